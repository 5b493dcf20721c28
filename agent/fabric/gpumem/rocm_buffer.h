// A buffer in AMD GPU memory, optionally exported as a dma-buf: GpuBuffer's twin for ROCm, as
// perftest's --use_rocm (--use_rocm_dmabuf) allocates it (src/rocm_memory.c).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/fabric/gpumem/rocm_api.h"

namespace fabric::gpumem {

class RocmBuffer {
 public:
  // Allocates `size` bytes (rounded up to kGpuAllocGranularity, as perftest's ACCEL_PAGE_SIZE)
  // on the GPU named by its PCI bus id ("0000:c1:00.0") or HIP index ("0"), and with
  // `export_dmabuf` exports them (ExportDmabuf). `rocm` must outlive the buffer. Whatever was
  // taken before a failure is given back.
  static absl::StatusOr<std::unique_ptr<RocmBuffer>> Allocate(RocmApi& rocm,
                                                              std::string_view pci_bus_id_or_index,
                                                              size_t size,
                                                              bool export_dmabuf = true);

  RocmBuffer(const RocmBuffer&) = delete;
  RocmBuffer& operator=(const RocmBuffer&) = delete;
  // Free(), its failures logged.
  ~RocmBuffer();

  // Exports the whole allocation with hsa_amd_portable_export_dmabuf, once.
  absl::Status ExportDmabuf();
  // Closes the dma-buf (hsa_amd_portable_close_dmabuf), then frees the allocation, once; every
  // failure is returned.
  absl::Status Free();

  int dmabuf_fd() const { return fd_; }  // -1 until exported
  // Where device_ptr() lies in the dma-buf, as the runtime says.
  uint64_t offset() const { return offset_; }
  uint64_t device_ptr() const { return reinterpret_cast<uint64_t>(ptr_); }
  size_t size() const { return size_; }
  const std::string& device_name() const { return name_; }

 private:
  RocmBuffer(RocmApi& rocm, std::string name) : rocm_(rocm), name_(std::move(name)) {}

  RocmApi& rocm_;
  std::string name_;
  int device_ = 0;
  void* ptr_ = nullptr;
  size_t size_ = 0;
  int fd_ = -1;
  uint64_t offset_ = 0;
};

}  // namespace fabric::gpumem
