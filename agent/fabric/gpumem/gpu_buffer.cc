#include "agent/fabric/gpumem/gpu_buffer.h"

#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "agent/common/errno.h"
#include "agent/common/log.h"

namespace fabric::gpumem {
namespace {

absl::Status CudaFailed(CudaApi& cuda, const std::string& what, CUresult rc) {
  return absl::InternalError(absl::StrCat(what, " failed: ", CudaErrorText(cuda, rc)));
}

// A CUDA index is all digits; anything else is taken as a PCI bus id.
bool ParseIndex(std::string_view s, int* index) {
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *index);
  return ec == std::errc() && end == s.data() + s.size();
}

absl::StatusOr<CUdevice> FindDevice(CudaApi& cuda, const std::string& name) {
  int count = 0;
  if (const CUresult rc = cuda.DeviceGetCount(&count); rc != kCudaSuccess) {
    return CudaFailed(cuda, "cuDeviceGetCount", rc);
  }
  CUdevice device = 0;
  int index = 0;
  if (ParseIndex(name, &index)) {
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

}  // namespace

absl::StatusOr<std::unique_ptr<GpuBuffer>> GpuBuffer::Allocate(CudaApi& cuda,
                                                               std::string_view pci_bus_id_or_index,
                                                               size_t size) {
  const std::string name(pci_bus_id_or_index);
  if (size == 0) return absl::InvalidArgumentError("a GPU buffer of 0 bytes");
  if (const CUresult rc = cuda.Init(0); rc != kCudaSuccess) {
    return CudaFailed(cuda, "cuInit", rc);
  }
  absl::StatusOr<CUdevice> device = FindDevice(cuda, name);
  if (!device.ok()) return device.status();

  int dmabuf = 0;
  if (const CUresult rc =
          cuda.DeviceGetAttribute(&dmabuf, kCuDeviceAttributeDmaBufSupported, *device);
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

  // dma-buf export works on whole host pages: start at the page below the pointer and register
  // from `offset` within the dma-buf, as perftest does.
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t aligned = ptr & ~(page - 1);
  b->offset_ = ptr - aligned;
  b->dmabuf_size_ = (alloc_size + b->offset_ + page - 1) & ~(page - 1);
  int fd = -1;
  if (const CUresult rc = cuda.MemGetHandleForAddressRange(&fd, aligned, b->dmabuf_size_,
                                                           kCuMemRangeHandleTypeDmaBufFd, 0);
      rc != kCudaSuccess) {
    return CudaFailed(cuda, absl::StrCat("GPU ", name, ": cuMemGetHandleForAddressRange"), rc);
  }
  if (fd < 0) {
    return absl::InternalError(
        absl::StrCat("GPU ", name, ": cuMemGetHandleForAddressRange gave no fd"));
  }
  b->fd_.reset(fd);
  return b;
}

GpuBuffer::~GpuBuffer() {
  if (const int err = fd_.Close(); err != 0) {
    Log(LogLevel::kWarning, "GPU ", name_, ": closing the dma-buf fd: ", ErrnoText(err));
  }
  if (ptr_ != 0) {
    // The context is per thread: make it current here, as the destructor may run elsewhere.
    if (const CUresult rc = cuda_.CtxSetCurrent(ctx_); rc != kCudaSuccess) {
      Log(LogLevel::kWarning, "GPU ", name_, ": cuCtxSetCurrent: ", CudaErrorText(cuda_, rc));
    }
    if (const CUresult rc = cuda_.MemFree(ptr_); rc != kCudaSuccess) {
      Log(LogLevel::kWarning, "GPU ", name_, ": cuMemFree: ", CudaErrorText(cuda_, rc));
    }
  }
  if (retained_) {
    if (const CUresult rc = cuda_.DevicePrimaryCtxRelease(device_); rc != kCudaSuccess) {
      Log(LogLevel::kWarning, "GPU ", name_,
          ": cuDevicePrimaryCtxRelease: ", CudaErrorText(cuda_, rc));
    }
  }
}

absl::StatusOr<ibv_mr*> RegisterDmabuf(ibv_pd* pd, const GpuBuffer& buffer, int access) {
  errno = 0;
  ibv_mr* mr = ibv_reg_dmabuf_mr(pd, buffer.offset(), buffer.size(), buffer.device_ptr(),
                                 buffer.dmabuf_fd(), access);
  if (mr != nullptr) return mr;
  const int err = errno != 0 ? errno : EIO;
  std::string why;
  switch (err) {
    case EOPNOTSUPP:
      why =
          "the RDMA device or rdma-core cannot register dma-buf (Soft-RoCE cannot; rdma-core older "
          "than v34)";
      break;
    case EFAULT:
    case EINVAL:
      why =
          "the NIC could not map the GPU's memory (check the IOMMU and PCIe ACS settings between "
          "the NIC and the GPU)";
      break;
    default:
      why = ErrnoText(err);
  }
  return absl::InternalError(absl::StrCat("ibv_reg_dmabuf_mr of ", buffer.size(), " bytes of GPU ",
                                          buffer.device_name(), ": ", why));
}

}  // namespace fabric::gpumem
