// Registering GPU memory with an RDMA device, and saying in one line why it failed: the reason is
// decided by a pure function (ExplainRegistrationFailure) over facts gathered separately (the
// call's errno, the path used, and what the host shows under /proc and /sys), so every rule is
// tested without a GPU or a NIC.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/fabric/gpumem/gpu_request.h"

namespace fabric::gpumem {

// Reads host files under a root directory ("/" on a host; a temp dir in tests). Paths are
// absolute ("/proc/driver/nvidia/version") and taken below the root.
class HostFiles {
 public:
  explicit HostFiles(std::string root = "/") : root_(std::move(root)) {}
  // The file's first 64 KiB; nullopt when it cannot be read.
  std::optional<std::string> Read(const std::string& path) const;
  bool Exists(const std::string& path) const;
  // A directory with at least one entry besides . and ..
  bool HasEntries(const std::string& dir) const;

 private:
  std::string Under(const std::string& path) const;
  std::string root_;
};

// What the host shows about the GPU drivers and the IOMMU.
struct HostGpuFacts {
  bool nvidia_loaded = false;   // /proc/driver/nvidia/version is there
  bool nvidia_open = false;     // ... and names the "Open Kernel Module"
  bool nvidia_peermem = false;  // /sys/module/nvidia_peermem (or the older nv_peer_mem)
  bool amdgpu_loaded = false;   // /sys/module/amdgpu
  // An AMD peer-memory client registered with the RDMA stack (ROCm's amdgpu-dkms registers
  // "amdkfd" under /sys/kernel/mm/memory_peers, where MLNX_OFED's peer-memory API lists them).
  bool amd_peer_memory = false;
  bool iommu = false;  // /sys/class/iommu has entries
  // Of the options perftest's ROCm dma-buf path wants (CONFIG_DMABUF_MOVE_NOTIFY=y,
  // CONFIG_PCI_P2PDMA=y), those /boot/config-<release> lacks; empty when it cannot be read.
  std::vector<std::string> kernel_config_missing;
};

// `kernel_release`: uname's release, naming /boot/config-<release>; empty: not read.
HostGpuFacts ReadHostGpuFacts(const HostFiles& files, const std::string& kernel_release);
// uname(2)'s release ("6.1.0-18-amd64"); empty when uname fails.
std::string KernelRelease();

struct RegistrationFailure {
  // kExport: the GPU driver could not export the memory as a dma-buf; kRegister: the RDMA
  // device could not register it (ibv_reg_dmabuf_mr, or ibv_reg_mr on the peer-memory path).
  enum class Stage { kExport, kRegister } stage = Stage::kRegister;
  GpuVendor vendor = GpuVendor::kCuda;
  bool dmabuf = true;             // the path: dma-buf (true) or peer memory
  int err = 0;                    // the registration call's errno
  bool has_reg_dmabuf_mr = true;  // rdma-core exports ibv_reg_dmabuf_mr (v34 or later)
  std::string rdma_device;        // "mlx5_0"
  std::string detail;             // what the failing GPU call said (kExport)
  HostGpuFacts host;
};

// One line saying why, without the operation's name (the caller prefixes it).
std::string ExplainRegistrationFailure(const RegistrationFailure& f);

// The verbs calls registration makes; tests replace them (no RDMA device on the build hosts).
struct MrCalls {
  // Null when rdma-core has none (older than v34).
  ibv_mr* (*reg_dmabuf_mr)(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd,
                           int access) = nullptr;
  ibv_mr* (*reg_mr)(ibv_pd* pd, void* addr, size_t length, int access) = nullptr;
  int (*dereg_mr)(ibv_mr* mr) = nullptr;
};

// libibverbs' calls, ibv_reg_dmabuf_mr looked up at run time (dlsym) so that an rdma-core older
// than v34 still loads this binary and gets a reason instead of a loader error.
MrCalls DefaultMrCalls();

// GPU memory to register: the dma-buf (fd >= 0 with its offset) or, without one, the device
// pointer itself (the peer-memory path).
struct GpuRange {
  GpuVendor vendor = GpuVendor::kCuda;
  std::string gpu;  // the GPU's name, for messages
  uint64_t device_ptr = 0;
  size_t size = 0;
  int dmabuf_fd = -1;
  uint64_t dmabuf_offset = 0;
};

// Registers `range` with `pd`'s device, the iova being the device pointer (what work requests and
// peers use), as perftest does. A failure's message names the call and gives
// ExplainRegistrationFailure's reason, with facts read from `files`.
absl::StatusOr<ibv_mr*> RegisterGpuRange(ibv_pd* pd, const GpuRange& range, int access,
                                         const MrCalls& calls, const HostFiles& files);

// The failure of an export, explained with the host's facts (`detail`: the driver's error).
std::string ExplainExportFailure(GpuVendor vendor, const std::string& detail,
                                 const HostFiles& files);

}  // namespace fabric::gpumem
