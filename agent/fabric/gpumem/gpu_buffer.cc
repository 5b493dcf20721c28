#include "agent/fabric/gpumem/gpu_buffer.h"

#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "agent/common/errno.h"
#include "agent/common/log.h"
#include "agent/fabric/gpumem/failures.h"
#include "agent/fabric/gpumem/registration_failure.h"

namespace fabric::gpumem {

bool ParseGpuIndex(std::string_view s, int* index) {
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *index);
  return ec == std::errc() && end == s.data() + s.size();
}

namespace {

absl::Status CudaFailed(CudaApi& cuda, const std::string& what, CUresult rc) {
  return absl::InternalError(absl::StrCat(what, " failed: ", CudaErrorText(cuda, rc)));
}

absl::StatusOr<CUdevice> FindDevice(CudaApi& cuda, const std::string& name) {
  int count = 0;
  if (const CUresult rc = cuda.DeviceGetCount(&count); rc != kCudaSuccess) {
    return CudaFailed(cuda, "cuDeviceGetCount", rc);
  }
  CUdevice device = 0;
  int index = 0;
  if (ParseGpuIndex(name, &index)) {
    if (index >= count || cuda.DeviceGet(&device, index) != kCudaSuccess) {
      return absl::NotFoundError(
          absl::StrCat("no GPU with CUDA index ", name, " (", count, " CUDA devices here)"));
    }
    return device;
  }
  if (const CUresult rc = cuda.DeviceGetByPciBusId(&device, name.c_str()); rc != kCudaSuccess) {
    return absl::NotFoundError(absl::StrCat("no GPU at PCI bus id ", name, " (", count,
                                            " CUDA devices here; ", CudaErrorText(cuda, rc), ")"));
  }
  return device;
}

absl::Status CheckDmabufSupported(CudaApi& cuda, const std::string& name, CUdevice device) {
  int dmabuf = 0;
  if (const CUresult rc =
          cuda.DeviceGetAttribute(&dmabuf, kCuDeviceAttributeDmaBufSupported, device);
      rc != kCudaSuccess) {
    return CudaFailed(cuda, absl::StrCat("GPU ", name, ": cuDeviceGetAttribute(DMA_BUF_SUPPORTED)"),
                      rc);
  }
  if (dmabuf == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "GPU ", name,
        " cannot export dma-buf (the proprietary kernel module without dma-buf support: use the "
        "open kernel module, or nvidia_peermem)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<GpuBuffer>> GpuBuffer::Allocate(CudaApi& cuda,
                                                               std::string_view pci_bus_id_or_index,
                                                               size_t size, bool export_dmabuf) {
  const std::string name(pci_bus_id_or_index);
  if (size == 0) return absl::InvalidArgumentError("a GPU buffer of 0 bytes");
  if (const CUresult rc = cuda.Init(0); rc != kCudaSuccess) {
    return CudaFailed(cuda, "cuInit", rc);
  }
  absl::StatusOr<CUdevice> device = FindDevice(cuda, name);
  if (!device.ok()) return device.status();
  if (export_dmabuf) {
    // Checked before allocating: the common failure costs nothing to give back.
    if (absl::Status s = CheckDmabufSupported(cuda, name, *device); !s.ok()) return s;
  }

  // From here on the buffer owns what each step takes, so its destructor frees it on failure.
  std::unique_ptr<GpuBuffer> b(new GpuBuffer(cuda, name));
  b->device_ = *device;
  if (const CUresult rc = cuda.DevicePrimaryCtxRetain(&b->ctx_, b->device_); rc != kCudaSuccess) {
    return CudaFailed(cuda, absl::StrCat("GPU ", name, ": cuDevicePrimaryCtxRetain"), rc);
  }
  b->retained_ = true;
  if (const CUresult rc = cuda.CtxSetCurrent(b->ctx_); rc != kCudaSuccess) {
    return CudaFailed(cuda, absl::StrCat("GPU ", name, ": cuCtxSetCurrent"), rc);
  }

  const size_t alloc_size =
      (size + kGpuAllocGranularity - 1) / kGpuAllocGranularity * kGpuAllocGranularity;
  CUdeviceptr ptr = 0;
  if (const CUresult rc = cuda.MemAlloc(&ptr, alloc_size); rc != kCudaSuccess) {
    return CudaFailed(cuda, absl::StrCat("GPU ", name, ": cuMemAlloc of ", alloc_size, " bytes"),
                      rc);
  }
  b->ptr_ = ptr;
  b->size_ = alloc_size;
  if (export_dmabuf) {
    if (absl::Status s = b->ExportDmabuf(); !s.ok()) return s;
  }
  return b;
}

absl::Status GpuBuffer::ExportDmabuf() {
  if (fd_.valid()) return absl::OkStatus();
  if (ptr_ == 0) return absl::FailedPreconditionError(absl::StrCat("GPU ", name_, ": freed"));
  if (absl::Status s = CheckDmabufSupported(cuda_, name_, device_); !s.ok()) return s;
  // dma-buf export works on whole host pages: start at the page below the pointer and register
  // from `offset` within the dma-buf, as perftest does.
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t aligned = ptr_ & ~(page - 1);
  offset_ = ptr_ - aligned;
  dmabuf_size_ = (size_ + offset_ + page - 1) & ~(page - 1);
  int fd = -1;
  if (const CUresult rc = cuda_.MemGetHandleForAddressRange(&fd, aligned, dmabuf_size_,
                                                            kCuMemRangeHandleTypeDmaBufFd, 0);
      rc != kCudaSuccess) {
    return CudaFailed(cuda_, absl::StrCat("GPU ", name_, ": cuMemGetHandleForAddressRange"), rc);
  }
  if (fd < 0) {
    return absl::InternalError(
        absl::StrCat("GPU ", name_, ": cuMemGetHandleForAddressRange gave no fd"));
  }
  fd_.reset(fd);
  return absl::OkStatus();
}

absl::Status GpuBuffer::Free() {
  absl::Status all;
  if (const int err = fd_.Close(); err != 0) {
    AddFailure(all, absl::InternalError(
                        absl::StrCat("GPU ", name_, ": closing the dma-buf fd: ", ErrnoText(err))));
  }
  if (ptr_ != 0) {
    // The context is per thread: make it current here, as this may run on another thread.
    if (const CUresult rc = cuda_.CtxSetCurrent(ctx_); rc != kCudaSuccess) {
      AddFailure(all, CudaFailed(cuda_, absl::StrCat("GPU ", name_, ": cuCtxSetCurrent"), rc));
    }
    if (const CUresult rc = cuda_.MemFree(std::exchange(ptr_, 0)); rc != kCudaSuccess) {
      AddFailure(all, CudaFailed(cuda_, absl::StrCat("GPU ", name_, ": cuMemFree"), rc));
    }
  }
  if (std::exchange(retained_, false)) {
    if (const CUresult rc = cuda_.DevicePrimaryCtxRelease(device_); rc != kCudaSuccess) {
      AddFailure(all,
                 CudaFailed(cuda_, absl::StrCat("GPU ", name_, ": cuDevicePrimaryCtxRelease"), rc));
    }
  }
  return all;
}

GpuBuffer::~GpuBuffer() {
  if (absl::Status s = Free(); !s.ok()) Log(LogLevel::kWarning, s.message());
}

absl::StatusOr<ibv_mr*> RegisterDmabuf(ibv_pd* pd, const GpuBuffer& buffer, int access) {
  if (buffer.dmabuf_fd() < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("GPU ", buffer.device_name(), ": not exported as a dma-buf"));
  }
  GpuRange range;
  range.vendor = GpuVendor::kCuda;
  range.gpu = buffer.device_name();
  range.device_ptr = buffer.device_ptr();
  range.size = buffer.size();
  range.dmabuf_fd = buffer.dmabuf_fd();
  range.dmabuf_offset = buffer.offset();
  return RegisterGpuRange(pd, range, access, DefaultMrCalls(), HostFiles());
}

}  // namespace fabric::gpumem
