// GpuBuffer and LoadCuda against fake_cuda (a stand-in libcuda.so.1): the loader's errors, each
// failure's reason, the export's page arithmetic, and that every path gives back what it took.
// RegisterDmabuf needs an RDMA device: its reasons are tested in registration_failure_test.
#include "agent/fabric/gpumem/gpu_buffer.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "agent/fabric/gpumem/cuda_api.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fabric::gpumem {
namespace {

using ::testing::HasSubstr;

class GpuBufferTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The same handle LoadCuda gets (dlopen counts references), so the fake's state is shared.
    handle_ = dlopen(FAKE_CUDA, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handle_, nullptr) << dlerror();
    set_ = reinterpret_cast<void (*)(const char*, long long)>(dlsym(handle_, "fake_cuda_set"));
    get_ = reinterpret_cast<long long (*)(const char*)>(dlsym(handle_, "fake_cuda_get"));
    ASSERT_NE(set_, nullptr);
    ASSERT_NE(get_, nullptr);
    set_("reset", 0);
  }
  void TearDown() override {
    if (handle_ != nullptr) dlclose(handle_);
  }

  std::unique_ptr<CudaApi> Load() {
    absl::StatusOr<std::unique_ptr<CudaApi>> cuda = LoadCuda(FAKE_CUDA);
    EXPECT_TRUE(cuda.ok()) << cuda.status();
    return cuda.ok() ? std::move(*cuda) : nullptr;
  }
  void ExpectNothingHeld() {
    EXPECT_EQ(get_("allocated"), 0);
    EXPECT_EQ(get_("retained"), 0);
  }

  void* handle_ = nullptr;
  void (*set_)(const char*, long long) = nullptr;
  long long (*get_)(const char*) = nullptr;
};

TEST_F(GpuBufferTest, LibraryMissing) {
  absl::StatusOr<std::unique_ptr<CudaApi>> cuda = LoadCuda("/nonexistent/libcuda.so.1");
  ASSERT_FALSE(cuda.ok());
  EXPECT_EQ(cuda.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(cuda.status().message(),
              HasSubstr("/nonexistent/libcuda.so.1 not found: no NVIDIA driver here"));
}

TEST_F(GpuBufferTest, NotACudaDriver) {
  // libc is always there and has no cuGetProcAddress.
  absl::StatusOr<std::unique_ptr<CudaApi>> cuda = LoadCuda("libc.so.6");
  ASSERT_FALSE(cuda.ok());
  EXPECT_THAT(cuda.status().message(), HasSubstr("libc.so.6 has no cuGetProcAddress"));
}

TEST_F(GpuBufferTest, EntryPointMissing) {
  set_("hide_export", 1);
  absl::StatusOr<std::unique_ptr<CudaApi>> cuda = LoadCuda(FAKE_CUDA);
  ASSERT_FALSE(cuda.ok());
  EXPECT_THAT(cuda.status().message(), HasSubstr("no entry point cuMemGetHandleForAddressRange"));
}

TEST_F(GpuBufferTest, PrefersGetProcAddressV2) {
  ASSERT_NE(Load(), nullptr);
  EXPECT_GT(get_("v2_calls"), 0);
  EXPECT_EQ(get_("v1_calls"), 0);
}

TEST_F(GpuBufferTest, OldDriver) {
  set_("driver_version", 11040);
  absl::StatusOr<std::unique_ptr<CudaApi>> cuda = LoadCuda(FAKE_CUDA);
  ASSERT_FALSE(cuda.ok());
  EXPECT_EQ(cuda.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(cuda.status().message(),
            "CUDA driver 11.4 is older than 11.7, which dma-buf export needs");
}

// Each failure of Allocate: its code and reason, and nothing held afterwards (what was taken
// before it is given back).
TEST_F(GpuBufferTest, FailuresSayWhyAndGiveBackWhatTheyTook) {
  struct Case {
    const char* knob;  // fake_cuda_set(knob, value), or null
    long long value;
    const char* gpu;
    absl::StatusCode code;
    const char* why;
  };
  const Case cases[] = {
      {nullptr, 0, "0000:af:00.0", absl::StatusCode::kNotFound,
       "no GPU at PCI bus id 0000:af:00.0"},
      {nullptr, 0, "3", absl::StatusCode::kNotFound,
       "no GPU with CUDA index 3 (1 CUDA devices here)"},
      {"dmabuf_supported", 0, "0000:3b:00.0", absl::StatusCode::kFailedPrecondition,
       "GPU 0000:3b:00.0 cannot export dma-buf (the proprietary kernel module without dma-buf "
       "support: use the open kernel module, or nvidia_peermem)"},
      {"alloc_fails", 1, "0000:3b:00.0", absl::StatusCode::kInternal,
       "cuMemAlloc of 65536 bytes failed: out of memory"},
      {"export_fails", 1, "0", absl::StatusCode::kInternal,
       "cuMemGetHandleForAddressRange failed: invalid argument"},
  };
  for (const Case& c : cases) {
    set_("reset", 0);
    if (c.knob != nullptr) set_(c.knob, c.value);
    auto cuda = Load();
    ASSERT_NE(cuda, nullptr);
    auto b = GpuBuffer::Allocate(*cuda, c.gpu, 4096);
    ASSERT_FALSE(b.ok()) << c.why;
    EXPECT_EQ(b.status().code(), c.code) << b.status();
    EXPECT_THAT(b.status().message(), HasSubstr(c.why));
    ExpectNothingHeld();
  }
}

TEST_F(GpuBufferTest, SuccessAndPageArithmetic) {
  const auto page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  set_("misalign", 0x100);
  auto cuda = Load();
  ASSERT_NE(cuda, nullptr);
  int fd = -1;
  {
    // Bus ids are matched without regard to case, as CUDA does.
    auto b = GpuBuffer::Allocate(*cuda, "0000:3B:00.0", 100000);
    ASSERT_TRUE(b.ok()) << b.status();
    const GpuBuffer& buf = **b;
    EXPECT_EQ(buf.size(), 2 * kGpuAllocGranularity);
    EXPECT_EQ(buf.device_ptr(), 0x7f0000200000ULL + 0x100);
    EXPECT_EQ(buf.offset(), 0x100u);
    EXPECT_EQ(static_cast<uint64_t>(get_("export_ptr")), 0x7f0000200000ULL);
    // The allocation plus the offset, up to a whole page: one page more than the allocation.
    EXPECT_EQ(buf.dmabuf_size(), 2 * kGpuAllocGranularity + page);
    EXPECT_EQ(static_cast<uint64_t>(get_("export_size")), buf.dmabuf_size());
    fd = buf.dmabuf_fd();
    ASSERT_GE(fd, 0);
    EXPECT_NE(fcntl(fd, F_GETFD), -1);
    EXPECT_EQ(get_("allocated"), 1);
    EXPECT_EQ(get_("retained"), 1);
  }
  // The destructor gave everything back: the fd is closed (nothing opened it again since).
  EXPECT_EQ(fcntl(fd, F_GETFD), -1);
  ExpectNothingHeld();
}

TEST_F(GpuBufferTest, AlignedPointerHasNoOffset) {
  auto cuda = Load();
  ASSERT_NE(cuda, nullptr);
  auto b = GpuBuffer::Allocate(*cuda, "0", kGpuAllocGranularity);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)->offset(), 0u);
  EXPECT_EQ((*b)->size(), kGpuAllocGranularity);
  EXPECT_EQ((*b)->dmabuf_size(), kGpuAllocGranularity);
  b->reset();
  ExpectNothingHeld();
}

TEST_F(GpuBufferTest, TwoBuffersEachFreed) {
  auto cuda = Load();
  ASSERT_NE(cuda, nullptr);
  auto a = GpuBuffer::Allocate(*cuda, "0", 1);
  auto b = GpuBuffer::Allocate(*cuda, "0", 1);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(get_("allocated"), 2);
  EXPECT_EQ(get_("retained"), 2);
  a->reset();
  EXPECT_EQ(get_("allocated"), 1);
  EXPECT_EQ(get_("retained"), 1);
  b->reset();
  ExpectNothingHeld();
}

// The peer-memory path: no dma-buf export, so neither 11.7 nor cuMemGetHandleForAddressRange is
// needed.
TEST_F(GpuBufferTest, WithoutExport) {
  set_("driver_version", 11040);
  set_("hide_export", 1);
  absl::StatusOr<std::unique_ptr<CudaApi>> cuda = LoadCuda(FAKE_CUDA, false);
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  auto b = GpuBuffer::Allocate(**cuda, "0", 1, false);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)->dmabuf_fd(), -1);
  EXPECT_EQ(get_("allocated"), 1);
  // Exporting anyway fails cleanly (the entry point was not resolved) and keeps the buffer.
  absl::Status s = (*b)->ExportDmabuf();
  EXPECT_THAT(s.message(), HasSubstr("cuMemGetHandleForAddressRange failed: CUDA error 801"));
  EXPECT_EQ(get_("allocated"), 1);
  EXPECT_TRUE((*b)->Free().ok());
  ExpectNothingHeld();
  EXPECT_TRUE((*b)->Free().ok());  // once
  EXPECT_TRUE((*cuda)->Unload().ok());
}

}  // namespace
}  // namespace fabric::gpumem
