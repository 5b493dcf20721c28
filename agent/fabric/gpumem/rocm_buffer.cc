#include "agent/fabric/gpumem/rocm_buffer.h"

#include <charconv>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/common/log.h"
#include "agent/fabric/gpumem/failures.h"
#include "agent/fabric/gpumem/gpu_buffer.h"

namespace fabric::gpumem {
namespace {

absl::Status HipFailed(RocmApi& rocm, const std::string& what, hipError_t rc) {
  return absl::InternalError(absl::StrCat(what, " failed: ", HipErrorText(rocm, rc)));
}

absl::StatusOr<int> FindDevice(RocmApi& rocm, const std::string& name) {
  int count = 0;
  if (const hipError_t rc = rocm.GetDeviceCount(&count); rc != kHipSuccess) {
    return HipFailed(rocm, "hipGetDeviceCount", rc);
  }
  int index = 0;
  if (ParseGpuIndex(name, &index)) {
    if (index >= count) {
      return absl::NotFoundError(
          absl::StrCat("no GPU with HIP index ", name, " (", count, " HIP devices here)"));
    }
    return index;
  }
  int device = 0;
  if (const hipError_t rc = rocm.DeviceGetByPciBusId(&device, name.c_str()); rc != kHipSuccess) {
    return absl::NotFoundError(absl::StrCat("no GPU at PCI bus id ", name, " (", count,
                                            " HIP devices here; ", HipErrorText(rocm, rc), ")"));
  }
  return device;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RocmBuffer>> RocmBuffer::Allocate(
    RocmApi& rocm, std::string_view pci_bus_id_or_index, size_t size, bool export_dmabuf) {
  const std::string name(pci_bus_id_or_index);
  if (size == 0) return absl::InvalidArgumentError("a GPU buffer of 0 bytes");
  if (const hipError_t rc = rocm.Init(0); rc != kHipSuccess) {
    return HipFailed(rocm, "hipInit", rc);
  }
  absl::StatusOr<int> device = FindDevice(rocm, name);
  if (!device.ok()) return device.status();
  // hipMalloc allocates on the thread's current device.
  if (const hipError_t rc = rocm.SetDevice(*device); rc != kHipSuccess) {
    return HipFailed(rocm, absl::StrCat("GPU ", name, ": hipSetDevice(", *device, ")"), rc);
  }

  std::unique_ptr<RocmBuffer> b(new RocmBuffer(rocm, name));
  b->device_ = *device;
  const size_t alloc_size =
      (size + kGpuAllocGranularity - 1) / kGpuAllocGranularity * kGpuAllocGranularity;
  void* ptr = nullptr;
  if (const hipError_t rc = rocm.Malloc(&ptr, alloc_size); rc != kHipSuccess) {
    return HipFailed(rocm, absl::StrCat("GPU ", name, ": hipMalloc of ", alloc_size, " bytes"), rc);
  }
  if (ptr == nullptr) {
    return absl::InternalError(absl::StrCat("GPU ", name, ": hipMalloc gave no pointer"));
  }
  // From here on the buffer owns the allocation, so its destructor frees it on failure.
  b->ptr_ = ptr;
  b->size_ = alloc_size;
  if (export_dmabuf) {
    if (absl::Status s = b->ExportDmabuf(); !s.ok()) return s;
  }
  return b;
}

absl::Status RocmBuffer::ExportDmabuf() {
  if (fd_ >= 0) return absl::OkStatus();
  if (ptr_ == nullptr) return absl::FailedPreconditionError(absl::StrCat("GPU ", name_, ": freed"));
  // The allocation itself: the runtime exports the whole buffer object it lies in and says where
  // the pointer is (perftest passes the page-rounded size, the same for a 64 KiB multiple).
  int fd = -1;
  uint64_t offset = 0;
  if (const hsa_status_t rc = rocm_.ExportDmabuf(ptr_, size_, &fd, &offset);
      rc != kHsaStatusSuccess) {
    return absl::InternalError(absl::StrCat("GPU ", name_, ": hsa_amd_portable_export_dmabuf of ",
                                            size_, " bytes failed: ", HsaStatusText(rocm_, rc)));
  }
  if (fd < 0) {
    return absl::InternalError(
        absl::StrCat("GPU ", name_, ": hsa_amd_portable_export_dmabuf gave no fd"));
  }
  fd_ = fd;
  offset_ = offset;
  return absl::OkStatus();
}

absl::Status RocmBuffer::Free() {
  absl::Status all;
  if (fd_ >= 0) {
    if (const hsa_status_t rc = rocm_.CloseDmabuf(std::exchange(fd_, -1));
        rc != kHsaStatusSuccess) {
      AddFailure(all, absl::InternalError(absl::StrCat(
                          "GPU ", name_,
                          ": hsa_amd_portable_close_dmabuf failed: ", HsaStatusText(rocm_, rc))));
    }
  }
  if (ptr_ != nullptr) {
    // hipFree needs no current device: the runtime knows the pointer's.
    if (const hipError_t rc = rocm_.Free(std::exchange(ptr_, nullptr)); rc != kHipSuccess) {
      AddFailure(all, HipFailed(rocm_, absl::StrCat("GPU ", name_, ": hipFree"), rc));
    }
  }
  return all;
}

RocmBuffer::~RocmBuffer() {
  if (absl::Status s = Free(); !s.ok()) Log(LogLevel::kWarning, s.message());
}

}  // namespace fabric::gpumem
