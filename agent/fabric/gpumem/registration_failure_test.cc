// ExplainRegistrationFailure's rules, one row each; the host facts read from a fake root; and
// RegisterGpuRange's message with the verbs calls replaced (no RDMA device here).
#include "agent/fabric/gpumem/registration_failure.h"

#include <stdlib.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fabric::gpumem {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Stage = RegistrationFailure::Stage;

constexpr const char* kIommu = "the IOMMU is on";

HostGpuFacts Host(bool nvidia_open, bool peermem, bool iommu) {
  HostGpuFacts h;
  h.nvidia_loaded = true;
  h.nvidia_open = nvidia_open;
  h.nvidia_peermem = peermem;
  h.iommu = iommu;
  return h;
}

HostGpuFacts Amd(bool peer_memory, bool loaded = true) {
  HostGpuFacts h;
  h.amdgpu_loaded = loaded;
  h.amd_peer_memory = peer_memory;
  return h;
}

TEST(ExplainRegistrationFailureTest, Table) {
  struct Row {
    const char* name;
    RegistrationFailure f;
    const char* want;      // a substring of the reason
    const char* not_want;  // and one it must not have (null: none)
  };
  const auto F = [](Stage stage, GpuVendor vendor, bool dmabuf, int err, HostGpuFacts host,
                    bool has_reg_dmabuf_mr = true) {
    RegistrationFailure f;
    f.stage = stage;
    f.vendor = vendor;
    f.dmabuf = dmabuf;
    f.err = err;
    f.host = std::move(host);
    f.has_reg_dmabuf_mr = has_reg_dmabuf_mr;
    f.rdma_device = "rxe0";
    f.detail = "invalid argument (CUDA error 1)";
    return f;
  };
  const HostGpuFacts plain = Host(true, true, false);
  const Row rows[] = {
      {"provider without dma-buf (EOPNOTSUPP)",
       F(Stage::kRegister, GpuVendor::kCuda, true, EOPNOTSUPP, plain),
       "the RDMA provider of rxe0 cannot register dma-buf memory (Soft-RoCE and older drivers "
       "cannot; use the peer-memory path or a NIC whose driver can)",
       nullptr},
      {"provider without dma-buf (ENOSYS)",
       F(Stage::kRegister, GpuVendor::kRocm, true, ENOSYS, Amd(true)),
       "the RDMA provider of rxe0 cannot register dma-buf memory", nullptr},
      {"EOPNOTSUPP on the peer-memory path is not the dma-buf rule",
       F(Stage::kRegister, GpuVendor::kCuda, false, EOPNOTSUPP, plain), "Operation not supported",
       "dma-buf"},
      {"rdma-core too old", F(Stage::kRegister, GpuVendor::kCuda, true, EIO, plain, false),
       "rdma-core older than v34 has no ibv_reg_dmabuf_mr", nullptr},
      {"proprietary module cannot export",
       F(Stage::kExport, GpuVendor::kCuda, true, 0, Host(false, false, false)),
       "the NVIDIA proprietary kernel module cannot export GPU memory as dma-buf: the open kernel "
       "module is needed (or nvidia_peermem and the peer-memory path) (invalid argument (CUDA "
       "error 1))",
       nullptr},
      {"open module export failure gives the driver's words",
       F(Stage::kExport, GpuVendor::kCuda, true, 0, Host(true, false, false)),
       "the NVIDIA driver could not export the GPU memory as dma-buf (invalid argument",
       "proprietary"},
      {"nvidia_peermem not loaded (EFAULT)",
       F(Stage::kRegister, GpuVendor::kCuda, false, EFAULT, Host(false, false, false)),
       "nvidia_peermem is not loaded", nullptr},
      {"nvidia_peermem not loaded (ENOENT)",
       F(Stage::kRegister, GpuVendor::kCuda, false, ENOENT, Host(true, false, false)),
       "nvidia_peermem is not loaded", nullptr},
      {"nvidia_peermem loaded: the mapping failed, IOMMU named",
       F(Stage::kRegister, GpuVendor::kCuda, false, EINVAL, Host(true, true, true)),
       "the NIC could not map the GPU's memory (Invalid argument); the IOMMU is on", "peermem"},
      {"amdgpu without peer memory",
       F(Stage::kRegister, GpuVendor::kRocm, false, EINVAL, Amd(false)),
       "amdgpu is loaded but offers RDMA no peer memory", nullptr},
      {"amdgpu not loaded", F(Stage::kRegister, GpuVendor::kRocm, false, EFAULT, Amd(false, false)),
       "amdgpu is not loaded", nullptr},
      {"amdgpu with peer memory: the mapping failed",
       F(Stage::kRegister, GpuVendor::kRocm, false, EFAULT, Amd(true)),
       "the NIC could not map the GPU's memory (Bad address)", kIommu},
      {"EPERM with an IOMMU",
       F(Stage::kRegister, GpuVendor::kCuda, true, EPERM, Host(true, true, true)),
       "rxe0 was refused access to the GPU's memory (Operation not permitted); the IOMMU is on "
       "(/sys/class/iommu has entries): its translation can block peer-to-peer DMA between the "
       "NIC and the GPU, and PCIe ACS redirects it through the root complex",
       nullptr},
      {"EACCES without an IOMMU", F(Stage::kRegister, GpuVendor::kRocm, false, EACCES, Amd(true)),
       "rxe0 was refused access to the GPU's memory (Permission denied)", kIommu},
      {"dma-buf EFAULT with an IOMMU",
       F(Stage::kRegister, GpuVendor::kCuda, true, EFAULT, Host(true, false, true)),
       "rxe0 could not map the GPU's dma-buf (Bad address); the IOMMU is on", "peermem"},
      {"other errno as it is", F(Stage::kRegister, GpuVendor::kCuda, true, ENOMEM, plain),
       "Cannot allocate memory", kIommu},
  };
  for (const Row& row : rows) {
    const std::string why = ExplainRegistrationFailure(row.f);
    EXPECT_THAT(why, HasSubstr(row.want)) << row.name;
    if (row.not_want != nullptr) {
      EXPECT_THAT(why, Not(HasSubstr(row.not_want))) << row.name;
    }
    EXPECT_EQ(why.find('\n'), std::string::npos) << row.name;
  }
}

TEST(ExplainRegistrationFailureTest, RocmExportNamesMissingKernelOptions) {
  RegistrationFailure f;
  f.stage = Stage::kExport;
  f.vendor = GpuVendor::kRocm;
  f.detail = "HSA status 0x1003";
  EXPECT_EQ(ExplainRegistrationFailure(f),
            "the ROCm runtime could not export the GPU memory as dma-buf (HSA status 0x1003)");
  f.host.kernel_config_missing = {"CONFIG_DMABUF_MOVE_NOTIFY=y", "CONFIG_PCI_P2PDMA=y"};
  EXPECT_THAT(ExplainRegistrationFailure(f),
              HasSubstr("the kernel lacks CONFIG_DMABUF_MOVE_NOTIFY=y and CONFIG_PCI_P2PDMA=y, "
                        "which dma-buf export of AMD GPU memory needs"));
}

class HostFactsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "host_facts_XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  void Write(const std::string& path, const std::string& text) {
    const std::filesystem::path p = root_ + path;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  void Mkdir(const std::string& path) { std::filesystem::create_directories(root_ + path); }

  std::string root_;
};

TEST_F(HostFactsTest, EmptyHost) {
  const HostGpuFacts h = ReadHostGpuFacts(HostFiles(root_), "6.1.0-test");
  EXPECT_FALSE(h.nvidia_loaded);
  EXPECT_FALSE(h.nvidia_open);
  EXPECT_FALSE(h.nvidia_peermem);
  EXPECT_FALSE(h.amdgpu_loaded);
  EXPECT_FALSE(h.amd_peer_memory);
  EXPECT_FALSE(h.iommu);
  EXPECT_TRUE(h.kernel_config_missing.empty());  // no config file: nothing claimed
}

TEST_F(HostFactsTest, ProprietaryNvidiaWithEmptyIommuClass) {
  Write("/proc/driver/nvidia/version",
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.154.05  Thu Dec 28 15:37:48 UTC "
        "2023\n");
  Mkdir("/sys/class/iommu");  // there but empty: no IOMMU in use
  const HostGpuFacts h = ReadHostGpuFacts(HostFiles(root_), "");
  EXPECT_TRUE(h.nvidia_loaded);
  EXPECT_FALSE(h.nvidia_open);
  EXPECT_FALSE(h.iommu);
}

TEST_F(HostFactsTest, OpenNvidiaPeermemIommuAmd) {
  Write("/proc/driver/nvidia/version",
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build\n");
  Mkdir("/sys/module/nvidia_peermem");
  Mkdir("/sys/class/iommu/dmar0");
  Mkdir("/sys/module/amdgpu");
  Mkdir("/sys/kernel/mm/memory_peers/amdkfd");
  Write("/boot/config-6.1.0-test",
        "CONFIG_PCI_P2PDMA=y\nCONFIG_DMABUF_MOVE_NOTIFY=yes_not_really\n");
  // A root given with a trailing slash reads the same files.
  const HostGpuFacts h = ReadHostGpuFacts(HostFiles(root_ + "/"), "6.1.0-test");
  EXPECT_TRUE(h.nvidia_loaded);
  EXPECT_TRUE(h.nvidia_open);
  EXPECT_TRUE(h.nvidia_peermem);
  EXPECT_TRUE(h.iommu);
  EXPECT_TRUE(h.amdgpu_loaded);
  EXPECT_TRUE(h.amd_peer_memory);
  EXPECT_EQ(h.kernel_config_missing, std::vector<std::string>{"CONFIG_DMABUF_MOVE_NOTIFY=y"});
}

TEST_F(HostFactsTest, OlderPeerMemModuleCounts) {
  Mkdir("/sys/module/nv_peer_mem");
  EXPECT_TRUE(ReadHostGpuFacts(HostFiles(root_), "").nvidia_peermem);
}

// RegisterGpuRange with the verbs calls replaced: the call it makes, and its failure's message.
struct Seen {
  static inline int calls = 0;
  static inline uint64_t offset = 0, iova = 0;
  static inline size_t length = 0;
  static inline int fd = -1, access = 0, err = 0;
  static inline void* addr = nullptr;
};

TEST(RegisterGpuRangeTest, ArgumentsAndReasons) {
  MrCalls calls;
  calls.reg_dmabuf_mr = [](ibv_pd*, uint64_t offset, size_t length, uint64_t iova, int fd,
                           int access) -> ibv_mr* {
    ++Seen::calls;
    Seen::offset = offset;
    Seen::length = length;
    Seen::iova = iova;
    Seen::fd = fd;
    Seen::access = access;
    errno = Seen::err;
    return nullptr;
  };
  calls.reg_mr = [](ibv_pd*, void* addr, size_t length, int) -> ibv_mr* {
    ++Seen::calls;
    Seen::addr = addr;
    Seen::length = length;
    errno = Seen::err;
    return nullptr;
  };
  ibv_pd pd{};  // no context: the device is "the RDMA device"
  GpuRange range;
  range.gpu = "0";
  range.device_ptr = 0x7f0000200100;
  range.size = 65536;
  range.dmabuf_fd = 42;
  range.dmabuf_offset = 0x100;
  const HostFiles nothing("/nonexistent-root");

  Seen::err = EOPNOTSUPP;
  absl::StatusOr<ibv_mr*> mr = RegisterGpuRange(&pd, range, 7, calls, nothing);
  ASSERT_FALSE(mr.ok());
  EXPECT_EQ(Seen::calls, 1);
  EXPECT_EQ(Seen::offset, 0x100u);
  EXPECT_EQ(Seen::iova, 0x7f0000200100u);  // the device pointer, as perftest passes it
  EXPECT_EQ(Seen::length, 65536u);
  EXPECT_EQ(Seen::fd, 42);
  EXPECT_EQ(Seen::access, 7);
  EXPECT_EQ(mr.status().message(),
            "ibv_reg_dmabuf_mr of 65536 bytes of GPU 0 on the RDMA device failed: the RDMA "
            "provider of the RDMA device cannot register dma-buf memory (Soft-RoCE and older "
            "drivers cannot; use the peer-memory path or a NIC whose driver can)");

  // The peer-memory path: ibv_reg_mr on the device pointer; the fake root has no nvidia_peermem.
  range.dmabuf_fd = -1;
  Seen::err = EFAULT;
  mr = RegisterGpuRange(&pd, range, 7, calls, nothing);
  ASSERT_FALSE(mr.ok());
  EXPECT_EQ(Seen::calls, 2);
  EXPECT_EQ(Seen::addr, reinterpret_cast<void*>(0x7f0000200100));
  EXPECT_THAT(mr.status().message(),
              HasSubstr("ibv_reg_mr of 65536 bytes of GPU 0 on the RDMA device failed: "
                        "nvidia_peermem is not loaded"));

  // No ibv_reg_dmabuf_mr in this rdma-core: nothing is called.
  range.dmabuf_fd = 42;
  calls.reg_dmabuf_mr = nullptr;
  mr = RegisterGpuRange(&pd, range, 7, calls, nothing);
  ASSERT_FALSE(mr.ok());
  EXPECT_EQ(Seen::calls, 2);
  EXPECT_THAT(mr.status().message(),
              HasSubstr("rdma-core older than v34 has no ibv_reg_dmabuf_mr"));

  EXPECT_EQ(RegisterGpuRange(nullptr, range, 7, calls, nothing).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(RegisterGpuRangeTest, DefaultCallsFindThisRdmaCore) {
  // Debian 12's rdma-core (44) has ibv_reg_dmabuf_mr: the run-time lookup finds it.
  const MrCalls calls = DefaultMrCalls();
  EXPECT_NE(calls.reg_dmabuf_mr, nullptr);
  EXPECT_NE(calls.reg_mr, nullptr);
  EXPECT_NE(calls.dereg_mr, nullptr);
}

}  // namespace
}  // namespace fabric::gpumem
