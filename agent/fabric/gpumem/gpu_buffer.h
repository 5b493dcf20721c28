// A buffer in GPU memory exported as a dma-buf, for RDMA probes that use GPU memory like
// perftest's --use_cuda --use_cuda_dmabuf: the NIC registers the dma-buf fd (RegisterDmabuf), so
// no nvidia_peermem is needed.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/common/fd.h"
#include "agent/fabric/gpumem/cuda_api.h"

namespace fabric::gpumem {

// A GPU named by index is all digits (CUDA's and HIP's ordinal); anything else is taken as a PCI
// bus id. Sets `index` and returns true for an index.
bool ParseGpuIndex(std::string_view s, int* index);

// cuMemAlloc's allocations are rounded up to this, as perftest does, so a whole GPU page is
// exported.
inline constexpr size_t kGpuAllocGranularity = 64 * 1024;

class GpuBuffer {
 public:
  // Allocates `size` bytes (rounded up to kGpuAllocGranularity) in the primary context of the
  // GPU named by its PCI bus id ("0000:3b:00.0") or CUDA index ("0"), and with `export_dmabuf`
  // exports them as a dma-buf (ExportDmabuf). `cuda` must outlive the buffer. Whatever was taken
  // before a failure is freed.
  static absl::StatusOr<std::unique_ptr<GpuBuffer>> Allocate(CudaApi& cuda,
                                                             std::string_view pci_bus_id_or_index,
                                                             size_t size,
                                                             bool export_dmabuf = true);

  GpuBuffer(const GpuBuffer&) = delete;
  GpuBuffer& operator=(const GpuBuffer&) = delete;
  // Free(), its failures logged.
  ~GpuBuffer();

  // Exports the allocation as a dma-buf, once; fails (FailedPrecondition) when the GPU cannot.
  absl::Status ExportDmabuf();
  // Closes the dma-buf fd, frees the allocation and releases the primary context, in that order,
  // once; every failure is returned (the first one's code).
  absl::Status Free();

  // -1 until exported.
  int dmabuf_fd() const { return fd_.get(); }
  // Where device_ptr() lies in the dma-buf (the export starts at the host page below it).
  uint64_t offset() const { return offset_; }
  uint64_t device_ptr() const { return ptr_; }
  // The allocation's size (the request rounded up to kGpuAllocGranularity).
  size_t size() const { return size_; }
  // The dma-buf's size: offset() + size(), rounded up to the host page.
  size_t dmabuf_size() const { return dmabuf_size_; }
  const std::string& device_name() const { return name_; }

 private:
  GpuBuffer(CudaApi& cuda, std::string name) : cuda_(cuda), name_(std::move(name)) {}

  CudaApi& cuda_;
  std::string name_;
  CUdevice device_ = 0;
  CUcontext ctx_ = nullptr;
  bool retained_ = false;
  CUdeviceptr ptr_ = 0;
  size_t size_ = 0;
  UniqueFd fd_;
  uint64_t offset_ = 0;
  size_t dmabuf_size_ = 0;
};

// Registers `buffer`'s dma-buf with the RDMA device of `pd` (ibv_reg_dmabuf_mr, the iova being the
// device pointer as perftest passes it). Errors say why in one line (ExplainRegistrationFailure).
absl::StatusOr<ibv_mr*> RegisterDmabuf(ibv_pd* pd, const GpuBuffer& buffer, int access);

}  // namespace fabric::gpumem
