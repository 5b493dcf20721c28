// GPU memory registered with an RDMA device, whichever the vendor: what fabric-probe's
// --use_cuda and --use_rocm use in place of host memory. The driver library is loaded at run
// time, the buffer allocated on the named GPU and registered either as a dma-buf
// (ibv_reg_dmabuf_mr) or, on the peer-memory path, by its device pointer (ibv_reg_mr, which needs
// nvidia_peermem or amdgpu's peer memory). Failures say why in one line.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/fabric/gpumem/gpu_request.h"
#include "agent/fabric/gpumem/registration_failure.h"

namespace fabric::gpumem {

class RegisteredGpuMemory {
 public:
  RegisteredGpuMemory(const RegisteredGpuMemory&) = delete;
  RegisteredGpuMemory& operator=(const RegisteredGpuMemory&) = delete;
  // Calls Release() if not done, logging failures (and leaving the memory allocated when the MR
  // could not be deregistered).
  ~RegisteredGpuMemory();

  // The device pointer = the MR's iova: what work requests and peers use.
  uint64_t address() const { return address_; }
  // The registered size: the request rounded up to 64 KiB.
  size_t size() const { return size_; }
  const std::string& device_name() const { return name_; }
  ibv_mr* mr() const { return mr_; }

  // Deregisters the MR, then frees the buffer, then unloads the driver library, once; every
  // failure is returned, not just logged.
  absl::Status Release();

  // The vendor's API and buffer (gpu_memory.cc).
  class Allocation;

 private:
  friend absl::StatusOr<std::unique_ptr<RegisteredGpuMemory>> AllocateRegistered(
      ibv_pd* pd, const GpuRequest& r, size_t size, int access, const MrCalls& calls);
  RegisteredGpuMemory(std::unique_ptr<Allocation> allocation, MrCalls calls);

  // Owned in creation order: the loaded API with the allocation (and its dma-buf), then the MR.
  std::unique_ptr<Allocation> allocation_;
  ibv_mr* mr_ = nullptr;
  MrCalls calls_;
  uint64_t address_ = 0;
  size_t size_ = 0;
  std::string name_;
};

// Loads the driver library, allocates `size` bytes (rounded up to 64 KiB) on the GPU and
// registers them with `pd`'s device with `access` (IBV_ACCESS_*). Whatever was taken before a
// failure is given back. InvalidArgument, before anything is loaded, without a pd or a size.
absl::StatusOr<std::unique_ptr<RegisteredGpuMemory>> AllocateRegistered(ibv_pd* pd,
                                                                        const GpuRequest& r,
                                                                        size_t size, int access);
// The same with the verbs calls replaced (tests: there is no RDMA device on the build hosts).
absl::StatusOr<std::unique_ptr<RegisteredGpuMemory>> AllocateRegistered(ibv_pd* pd,
                                                                        const GpuRequest& r,
                                                                        size_t size, int access,
                                                                        const MrCalls& calls);

}  // namespace fabric::gpumem
