// AllocateRegistered and RegisteredGpuMemory against fake_cuda and fake_rocm, with the verbs
// calls replaced (no RDMA device on the build hosts): what is refused before anything is loaded,
// the one-line errors, and that every path (failure half-way, Release, the destructor) gives
// back what it took, in order.
#include "agent/fabric/gpumem/gpu_memory.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <stdlib.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fabric::gpumem {
namespace {

using ::testing::HasSubstr;

using SetFn = void (*)(const char*, long long);
using GetFn = long long (*)(const char*);

// The fake verbs: what they were called with, and what they do.
struct Verbs {
  static inline int reg_dmabuf_calls = 0, reg_calls = 0, dereg_calls = 0;
  static inline int fail_errno = 0;   // registration fails with this errno when not 0
  static inline int dereg_error = 0;  // ibv_dereg_mr's result
  static inline uint64_t iova = 0, offset = 0;
  static inline void* addr = nullptr;
  static inline int fd = -1;
  static inline ibv_mr mr{};
  static inline long long allocated_at_dereg = -1;  // the fake GPU's count when deregistered
  static inline GetFn gpu_get = nullptr;

  static void Reset() {
    reg_dmabuf_calls = reg_calls = dereg_calls = fail_errno = dereg_error = 0;
    iova = offset = 0;
    addr = nullptr;
    fd = -1;
    allocated_at_dereg = -1;
  }
  static MrCalls Calls() {
    MrCalls c;
    c.reg_dmabuf_mr = [](ibv_pd*, uint64_t off, size_t length, uint64_t va, int dmabuf_fd,
                         int) -> ibv_mr* {
      ++reg_dmabuf_calls;
      offset = off;
      iova = va;
      fd = dmabuf_fd;
      if (fail_errno != 0) {
        errno = fail_errno;
        return nullptr;
      }
      mr.addr = reinterpret_cast<void*>(va);
      mr.length = length;
      return &mr;
    };
    c.reg_mr = [](ibv_pd*, void* a, size_t length, int) -> ibv_mr* {
      ++reg_calls;
      addr = a;
      if (fail_errno != 0) {
        errno = fail_errno;
        return nullptr;
      }
      mr.addr = a;
      mr.length = length;
      return &mr;
    };
    c.dereg_mr = [](ibv_mr*) {
      ++dereg_calls;
      allocated_at_dereg = gpu_get != nullptr ? gpu_get("allocated") : -1;
      return dereg_error;
    };
    return c;
  }
};

class GpuMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cuda_ = dlopen(FAKE_CUDA, RTLD_NOW | RTLD_LOCAL);
    rocm_ = dlopen(FAKE_ROCM, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(cuda_, nullptr) << dlerror();
    ASSERT_NE(rocm_, nullptr) << dlerror();
    cuda_set_ = reinterpret_cast<SetFn>(dlsym(cuda_, "fake_cuda_set"));
    cuda_get_ = reinterpret_cast<GetFn>(dlsym(cuda_, "fake_cuda_get"));
    rocm_set_ = reinterpret_cast<SetFn>(dlsym(rocm_, "fake_rocm_set"));
    rocm_get_ = reinterpret_cast<GetFn>(dlsym(rocm_, "fake_rocm_get"));
    ASSERT_TRUE(cuda_set_ && cuda_get_ && rocm_set_ && rocm_get_);
    cuda_set_("reset", 0);
    rocm_set_("reset", 0);
    Verbs::Reset();
    std::string tmpl = (std::filesystem::temp_directory_path() / "gpu_memory_XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
  }
  void TearDown() override {
    std::filesystem::remove_all(root_);
    if (cuda_ != nullptr) dlclose(cuda_);
    if (rocm_ != nullptr) dlclose(rocm_);
  }

  GpuRequest Cuda(const std::string& device = "0") {
    GpuRequest r;
    r.vendor = GpuRequest::Vendor::kCuda;
    r.device = device;
    r.library = FAKE_CUDA;
    r.host_root = root_;
    Verbs::gpu_get = cuda_get_;
    return r;
  }
  GpuRequest Rocm(const std::string& device = "0") {
    GpuRequest r;
    r.vendor = GpuRequest::Vendor::kRocm;
    r.device = device;
    r.library = FAKE_ROCM;
    r.host_root = root_;
    Verbs::gpu_get = rocm_get_;
    return r;
  }
  void Write(const std::string& path, const std::string& text) {
    const std::filesystem::path p = root_ + path;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  void ExpectNothingHeld() {
    EXPECT_EQ(cuda_get_("allocated"), 0);
    EXPECT_EQ(cuda_get_("retained"), 0);
    EXPECT_EQ(rocm_get_("allocated"), 0);
    EXPECT_EQ(rocm_get_("exported"), 0);
  }

  void* cuda_ = nullptr;
  void* rocm_ = nullptr;
  SetFn cuda_set_ = nullptr, rocm_set_ = nullptr;
  GetFn cuda_get_ = nullptr, rocm_get_ = nullptr;
  std::string root_;
  ibv_pd pd_{};  // never used by the fake verbs; no context, so "the RDMA device" in messages
};

TEST_F(GpuMemoryTest, NoPdIsRefusedBeforeAnythingIsLoaded) {
  for (const GpuRequest& r : {Cuda(), Rocm()}) {
    auto m = AllocateRegistered(nullptr, r, 4096, IBV_ACCESS_LOCAL_WRITE);
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(m.status().message(), "GPU memory needs a protection domain to register with");
  }
  // The fakes were never asked for anything.
  EXPECT_EQ(cuda_get_("v1_calls") + cuda_get_("v2_calls"), 0);
  EXPECT_EQ(rocm_get_("malloc_size"), 0);
  EXPECT_EQ(rocm_get_("current_device"), -1);
  // The real defaults too: a null pd is refused with the stock verbs calls.
  EXPECT_EQ(AllocateRegistered(nullptr, Cuda(), 4096, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(GpuMemoryTest, OtherArgumentsRefused) {
  EXPECT_EQ(AllocateRegistered(&pd_, Cuda(), 0, 0, Verbs::Calls()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AllocateRegistered(&pd_, Cuda(""), 4096, 0, Verbs::Calls()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cuda_get_("v1_calls") + cuda_get_("v2_calls"), 0);
}

TEST_F(GpuMemoryTest, MissingLibraryIsOneLine) {
  GpuRequest cuda = Cuda();
  cuda.library = "/nonexistent/libcuda.so.1";
  auto m = AllocateRegistered(&pd_, cuda, 4096, 0, Verbs::Calls());
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(m.status().message(),
              HasSubstr("/nonexistent/libcuda.so.1 not found: no NVIDIA driver here ("));
  EXPECT_EQ(std::string(m.status().message()).find('\n'), std::string::npos);

  GpuRequest rocm = Rocm();
  rocm.library = "/nonexistent/libamdhip64.so.6";
  m = AllocateRegistered(&pd_, rocm, 4096, 0, Verbs::Calls());
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(),
              HasSubstr("/nonexistent/libamdhip64.so.6 not found: no ROCm here ("));
  EXPECT_EQ(Verbs::reg_dmabuf_calls + Verbs::reg_calls, 0);
}

TEST_F(GpuMemoryTest, CudaExportFailsHalfWay) {
  // A proprietary module on the fake host: the reason names the open kernel module.
  Write("/proc/driver/nvidia/version", "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.1\n");
  cuda_set_("export_fails", 1);
  auto m = AllocateRegistered(&pd_, Cuda(), 4096, 0, Verbs::Calls());
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(),
              HasSubstr("GPU 0: dma-buf export failed: the NVIDIA proprietary kernel module "
                        "cannot export GPU memory as dma-buf: the open kernel module is needed"));
  EXPECT_THAT(m.status().message(), HasSubstr("cuMemGetHandleForAddressRange failed"));
  EXPECT_EQ(Verbs::reg_dmabuf_calls, 0);
  ExpectNothingHeld();
}

TEST_F(GpuMemoryTest, CudaRegistrationFailsAndFreesTheBuffer) {
  Verbs::fail_errno = EOPNOTSUPP;
  auto m = AllocateRegistered(&pd_, Cuda("0000:3b:00.0"), 4096, 0, Verbs::Calls());
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(Verbs::reg_dmabuf_calls, 1);
  EXPECT_EQ(m.status().message(),
            "ibv_reg_dmabuf_mr of 65536 bytes of GPU 0000:3b:00.0 on the RDMA device failed: the "
            "RDMA provider of the RDMA device cannot register dma-buf memory (Soft-RoCE and older "
            "drivers cannot; use the peer-memory path or a NIC whose driver can)");
  EXPECT_EQ(fcntl(Verbs::fd, F_GETFD), -1);  // the dma-buf was closed
  ExpectNothingHeld();
}

TEST_F(GpuMemoryTest, CudaDmabufRegisteredThenReleasedInOrder) {
  cuda_set_("misalign", 0x100);
  auto m = AllocateRegistered(&pd_, Cuda(), 100000, IBV_ACCESS_LOCAL_WRITE, Verbs::Calls());
  ASSERT_TRUE(m.ok()) << m.status();
  const RegisteredGpuMemory& mem = **m;
  EXPECT_EQ(mem.address(), 0x7f0000200100u);
  EXPECT_EQ(Verbs::iova, mem.address());  // the MR's iova is the device pointer
  EXPECT_EQ(Verbs::offset, 0x100u);
  EXPECT_EQ(mem.size(), 131072u);
  EXPECT_EQ(mem.device_name(), "0");
  EXPECT_EQ(mem.mr(), &Verbs::mr);
  EXPECT_EQ(cuda_get_("allocated"), 1);
  const int fd = Verbs::fd;
  ASSERT_GE(fd, 0);
  EXPECT_NE(fcntl(fd, F_GETFD), -1);

  EXPECT_TRUE((*m)->Release().ok());
  EXPECT_EQ(Verbs::dereg_calls, 1);
  EXPECT_EQ(Verbs::allocated_at_dereg, 1);  // deregistered before the buffer was freed
  EXPECT_EQ(fcntl(fd, F_GETFD), -1);
  ExpectNothingHeld();
  EXPECT_TRUE((*m)->Release().ok());  // once
  m->reset();
  EXPECT_EQ(Verbs::dereg_calls, 1);
}

TEST_F(GpuMemoryTest, CudaPeerMemoryPathRegistersTheDevicePointer) {
  // An old driver without dma-buf export is fine for the peer-memory path.
  cuda_set_("driver_version", 11040);
  GpuRequest r = Cuda();
  r.dmabuf = false;
  auto m = AllocateRegistered(&pd_, r, 4096, 0, Verbs::Calls());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(Verbs::reg_calls, 1);
  EXPECT_EQ(Verbs::reg_dmabuf_calls, 0);
  EXPECT_EQ(Verbs::addr, reinterpret_cast<void*>(0x7f0000200000));
  EXPECT_EQ((*m)->address(), 0x7f0000200000u);
  m->reset();  // the destructor releases
  EXPECT_EQ(Verbs::dereg_calls, 1);
  ExpectNothingHeld();
}

TEST_F(GpuMemoryTest, PeerMemoryFailureExplainedFromTheHost) {
  GpuRequest r = Cuda();
  r.dmabuf = false;
  Verbs::fail_errno = EFAULT;
  auto m = AllocateRegistered(&pd_, r, 4096, 0, Verbs::Calls());
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("ibv_reg_mr of 65536 bytes of GPU 0 on the RDMA "
                                              "device failed: nvidia_peermem is not loaded"));
  ExpectNothingHeld();

  // With nvidia_peermem loaded and an IOMMU on, the reason is the mapping.
  std::filesystem::create_directories(root_ + "/sys/module/nvidia_peermem");
  std::filesystem::create_directories(root_ + "/sys/class/iommu/dmar0");
  m = AllocateRegistered(&pd_, r, 4096, 0, Verbs::Calls());
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("the NIC could not map the GPU's memory (Bad "
                                              "address); the IOMMU is on"));
  ExpectNothingHeld();
}

TEST_F(GpuMemoryTest, DeregisterFailureKeepsTheMemory) {
  auto m = AllocateRegistered(&pd_, Rocm(), 4096, 0, Verbs::Calls());
  ASSERT_TRUE(m.ok()) << m.status();
  Verbs::dereg_error = EBUSY;
  absl::Status s = (*m)->Release();
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(s.message(), HasSubstr("ibv_dereg_mr of GPU 0's memory failed: Device or resource "
                                     "busy; the GPU memory is left allocated"));
  EXPECT_EQ(rocm_get_("allocated"), 1);  // the NIC may still reach it
  Verbs::dereg_error = 0;
  EXPECT_TRUE((*m)->Release().ok());  // tried again
  EXPECT_EQ(Verbs::dereg_calls, 2);
  ExpectNothingHeld();
}

TEST_F(GpuMemoryTest, RocmDmabufRegisteredAndReleased) {
  rocm_set_("misalign", 0x40);
  auto m = AllocateRegistered(&pd_, Rocm("0000:c1:00.0"), 70000, 0, Verbs::Calls());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(rocm_get_("current_device"), 1);
  EXPECT_EQ((*m)->address(), 0x7e0000000040u);
  EXPECT_EQ(Verbs::iova, 0x7e0000000040u);
  EXPECT_EQ(Verbs::offset, 0x40u);  // the runtime's offset
  EXPECT_EQ(Verbs::fd, rocm_get_("export_fd"));
  EXPECT_EQ((*m)->size(), 131072u);
  EXPECT_EQ(rocm_get_("exported"), 1);
  EXPECT_TRUE((*m)->Release().ok());
  EXPECT_EQ(Verbs::allocated_at_dereg, 1);
  ExpectNothingHeld();
}

TEST_F(GpuMemoryTest, RocmExportFailsHalfWay) {
  rocm_set_("export_fails", 1);
  auto m = AllocateRegistered(&pd_, Rocm(), 4096, 0, Verbs::Calls());
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(),
              HasSubstr("GPU 0: dma-buf export failed: the ROCm runtime could not export the GPU "
                        "memory as dma-buf (GPU 0: hsa_amd_portable_export_dmabuf of 65536 bytes "
                        "failed: HSA status 0x1003)"));
  EXPECT_EQ(rocm_get_("malloc_size"), 65536);  // it was allocated, and freed again
  ExpectNothingHeld();
}

TEST_F(GpuMemoryTest, RocmPeerMemoryWithoutAmdPeerClient) {
  std::filesystem::create_directories(root_ + "/sys/module/amdgpu");
  GpuRequest r = Rocm();
  r.dmabuf = false;
  Verbs::fail_errno = EINVAL;
  auto m = AllocateRegistered(&pd_, r, 4096, 0, Verbs::Calls());
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("amdgpu is loaded but offers RDMA no peer memory"));
  EXPECT_EQ(Verbs::addr, reinterpret_cast<void*>(0x7e0000000000));
  EXPECT_EQ(rocm_get_("exported"), 0);
  ExpectNothingHeld();
}

TEST_F(GpuMemoryTest, ReleaseReturnsEveryFreeFailure) {
  auto m = AllocateRegistered(&pd_, Rocm(), 4096, 0, Verbs::Calls());
  ASSERT_TRUE(m.ok()) << m.status();
  rocm_set_("close_fails", 1);
  rocm_set_("free_fails", 1);
  absl::Status s = (*m)->Release();
  EXPECT_THAT(s.message(), HasSubstr("hsa_amd_portable_close_dmabuf failed"));
  EXPECT_THAT(s.message(), HasSubstr("hipFree failed"));
  EXPECT_EQ(Verbs::dereg_calls, 1);
  EXPECT_TRUE((*m)->Release().ok());  // nothing is tried twice
  ExpectNothingHeld();
}

}  // namespace
}  // namespace fabric::gpumem
