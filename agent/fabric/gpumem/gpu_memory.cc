#include "agent/fabric/gpumem/gpu_memory.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/common/errno.h"
#include "agent/common/log.h"
#include "agent/fabric/gpumem/cuda_api.h"
#include "agent/fabric/gpumem/failures.h"
#include "agent/fabric/gpumem/gpu_buffer.h"
#include "agent/fabric/gpumem/rocm_api.h"
#include "agent/fabric/gpumem/rocm_buffer.h"

namespace fabric::gpumem {

// The loaded API and the buffer on it, the buffer going first.
class RegisteredGpuMemory::Allocation {
 public:
  virtual ~Allocation() = default;
  virtual GpuRange Range() const = 0;
  virtual absl::Status ExportDmabuf() = 0;
  // Frees the buffer (and closes its dma-buf), once.
  virtual absl::Status Free() = 0;
  // Unloads the driver library, once; after Free.
  virtual absl::Status Unload() = 0;
};

namespace {

using Allocation = RegisteredGpuMemory::Allocation;

// Api: CudaApi or RocmApi; Buffer: GpuBuffer or RocmBuffer.
template <typename Api, typename Buffer, GpuVendor kVendor>
class VendorAllocation final : public Allocation {
 public:
  explicit VendorAllocation(std::unique_ptr<Api> api) : api_(std::move(api)) {}
  // The buffer goes before the API it was taken from (members are destroyed in reverse).
  ~VendorAllocation() override = default;

  absl::Status Allocate(const std::string& device, size_t size) {
    absl::StatusOr<std::unique_ptr<Buffer>> b = Buffer::Allocate(*api_, device, size, false);
    if (!b.ok()) return b.status();
    buffer_ = std::move(*b);
    return absl::OkStatus();
  }
  GpuRange Range() const override {
    GpuRange r;
    r.vendor = kVendor;
    r.gpu = buffer_->device_name();
    r.device_ptr = buffer_->device_ptr();
    r.size = buffer_->size();
    r.dmabuf_fd = buffer_->dmabuf_fd();
    r.dmabuf_offset = buffer_->offset();
    return r;
  }
  absl::Status ExportDmabuf() override { return buffer_->ExportDmabuf(); }
  absl::Status Free() override { return buffer_ != nullptr ? buffer_->Free() : absl::OkStatus(); }
  absl::Status Unload() override {
    buffer_.reset();  // freed already: its destructor has nothing left to do
    return api_ != nullptr ? api_->Unload() : absl::OkStatus();
  }

 private:
  std::unique_ptr<Api> api_;
  std::unique_ptr<Buffer> buffer_;
};

using CudaAllocation = VendorAllocation<CudaApi, GpuBuffer, GpuVendor::kCuda>;
using RocmAllocation = VendorAllocation<RocmApi, RocmBuffer, GpuVendor::kRocm>;

absl::StatusOr<std::unique_ptr<Allocation>> Load(const GpuRequest& r, size_t size) {
  if (r.vendor == GpuVendor::kCuda) {
    absl::StatusOr<std::unique_ptr<CudaApi>> cuda =
        LoadCuda(r.library.empty() ? std::string("libcuda.so.1") : r.library, r.dmabuf);
    if (!cuda.ok()) return cuda.status();
    auto a = std::make_unique<CudaAllocation>(std::move(*cuda));
    if (absl::Status s = a->Allocate(r.device, size); !s.ok()) return s;
    return std::unique_ptr<Allocation>(std::move(a));
  }
  absl::StatusOr<std::unique_ptr<RocmApi>> rocm =
      LoadRocm(r.library, r.library.empty() ? std::string(kHsaLibrary) : r.library, r.dmabuf);
  if (!rocm.ok()) return rocm.status();
  auto a = std::make_unique<RocmAllocation>(std::move(*rocm));
  if (absl::Status s = a->Allocate(r.device, size); !s.ok()) return s;
  return std::unique_ptr<Allocation>(std::move(a));
}

}  // namespace

RegisteredGpuMemory::RegisteredGpuMemory(std::unique_ptr<Allocation> allocation, MrCalls calls)
    : allocation_(std::move(allocation)), calls_(calls) {}

RegisteredGpuMemory::~RegisteredGpuMemory() {
  if (absl::Status s = Release(); !s.ok()) {
    Log(LogLevel::kWarning, s.message());
    // Still registered: a leak is safer than memory freed under the NIC.
    if (mr_ != nullptr) (void)allocation_.release();
  }
}

absl::Status RegisteredGpuMemory::Release() {
  if (mr_ != nullptr) {
    if (const int err = calls_.dereg_mr(mr_); err != 0) {
      // The NIC may still reach the memory: leave it allocated rather than free it under the
      // NIC (a later Release tries again).
      return absl::InternalError(absl::StrCat("ibv_dereg_mr of GPU ", name_,
                                              "'s memory failed: ", ErrnoText(err),
                                              "; the GPU memory is left allocated"));
    }
    mr_ = nullptr;
  }
  if (allocation_ == nullptr) return absl::OkStatus();
  absl::Status all = allocation_->Free();
  AddFailure(all, allocation_->Unload());
  allocation_.reset();
  return all;
}

absl::StatusOr<std::unique_ptr<RegisteredGpuMemory>> AllocateRegistered(ibv_pd* pd,
                                                                        const GpuRequest& r,
                                                                        size_t size, int access) {
  return AllocateRegistered(pd, r, size, access, DefaultMrCalls());
}

absl::StatusOr<std::unique_ptr<RegisteredGpuMemory>> AllocateRegistered(ibv_pd* pd,
                                                                        const GpuRequest& r,
                                                                        size_t size, int access,
                                                                        const MrCalls& calls) {
  if (pd == nullptr) {
    return absl::InvalidArgumentError("GPU memory needs a protection domain to register with");
  }
  if (size == 0) return absl::InvalidArgumentError("GPU memory of 0 bytes");
  if (r.device.empty()) return absl::InvalidArgumentError("GPU memory needs a GPU to be on");
  if (calls.reg_mr == nullptr || calls.dereg_mr == nullptr) {
    return absl::InvalidArgumentError("GPU memory registration without verbs calls");
  }
  absl::StatusOr<std::unique_ptr<Allocation>> allocation = Load(r, size);
  if (!allocation.ok()) return allocation.status();
  const HostFiles files(r.host_root);
  if (r.dmabuf) {
    if (absl::Status s = (*allocation)->ExportDmabuf(); !s.ok()) {
      return absl::Status(
          s.code(), absl::StrCat("GPU ", r.device, ": dma-buf export failed: ",
                                 ExplainExportFailure(r.vendor, std::string(s.message()), files)));
    }
  }
  const GpuRange range = (*allocation)->Range();
  absl::StatusOr<ibv_mr*> mr = RegisterGpuRange(pd, range, access, calls, files);
  if (!mr.ok()) return mr.status();  // the allocation's destructor gives the buffer back
  std::unique_ptr<RegisteredGpuMemory> m(new RegisteredGpuMemory(std::move(*allocation), calls));
  m->mr_ = *mr;
  m->address_ = range.device_ptr;
  m->size_ = range.size;
  m->name_ = range.gpu;
  return m;
}

}  // namespace fabric::gpumem
