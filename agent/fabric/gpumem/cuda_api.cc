#include "agent/fabric/gpumem/cuda_api.h"

#include <dlfcn.h>

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace fabric::gpumem {
namespace {

// CUDA_ERROR_NOT_SUPPORTED (cuda.h).
constexpr CUresult kCudaErrorNotSupported = 801;

// cuGetProcAddress's flags: the driver's default (per-thread stream off).
constexpr unsigned long long kGetProcAddressDefault = 0;

// The v1 export (CUDA 11.3 to 12.x) and the v2 one (12.0 on), which adds a query result.
using GetProcAddressV1 = CUresult (*)(const char*, void**, int, unsigned long long);
using GetProcAddressV2 = CUresult (*)(const char*, void**, int, unsigned long long, int*);

struct CudaEntries {
  CUresult (*init)(unsigned int) = nullptr;
  CUresult (*driver_get_version)(int*) = nullptr;
  CUresult (*device_get_count)(int*) = nullptr;
  CUresult (*device_get)(CUdevice*, int) = nullptr;
  CUresult (*device_get_by_pci_bus_id)(CUdevice*, const char*) = nullptr;
  CUresult (*device_get_attribute)(int*, int, CUdevice) = nullptr;
  CUresult (*primary_ctx_retain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*primary_ctx_release)(CUdevice) = nullptr;
  CUresult (*ctx_set_current)(CUcontext) = nullptr;
  CUresult (*mem_alloc)(CUdeviceptr*, size_t) = nullptr;
  CUresult (*mem_free)(CUdeviceptr) = nullptr;
  CUresult (*mem_get_handle_for_address_range)(void*, CUdeviceptr, size_t, int,
                                               unsigned long long) = nullptr;
  CUresult (*get_error_string)(CUresult, const char**) = nullptr;
};

class CudaApiImpl final : public CudaApi {
 public:
  CudaApiImpl(void* handle, const CudaEntries& e) : handle_(handle), e_(e) {}
  ~CudaApiImpl() override {
    if (handle_ != nullptr) dlclose(handle_);
  }
  CudaApiImpl(const CudaApiImpl&) = delete;
  CudaApiImpl& operator=(const CudaApiImpl&) = delete;

  CUresult Init(unsigned int flags) override { return e_.init(flags); }
  CUresult DriverGetVersion(int* version) override { return e_.driver_get_version(version); }
  CUresult DeviceGetCount(int* count) override { return e_.device_get_count(count); }
  CUresult DeviceGet(CUdevice* device, int ordinal) override {
    return e_.device_get(device, ordinal);
  }
  CUresult DeviceGetByPciBusId(CUdevice* device, const char* pci_bus_id) override {
    return e_.device_get_by_pci_bus_id(device, pci_bus_id);
  }
  CUresult DeviceGetAttribute(int* value, int attribute, CUdevice device) override {
    return e_.device_get_attribute(value, attribute, device);
  }
  CUresult DevicePrimaryCtxRetain(CUcontext* ctx, CUdevice device) override {
    return e_.primary_ctx_retain(ctx, device);
  }
  CUresult DevicePrimaryCtxRelease(CUdevice device) override {
    return e_.primary_ctx_release(device);
  }
  CUresult CtxSetCurrent(CUcontext ctx) override { return e_.ctx_set_current(ctx); }
  CUresult MemAlloc(CUdeviceptr* ptr, size_t size) override { return e_.mem_alloc(ptr, size); }
  CUresult MemFree(CUdeviceptr ptr) override { return e_.mem_free(ptr); }
  CUresult MemGetHandleForAddressRange(void* handle, CUdeviceptr ptr, size_t size, int handle_type,
                                       unsigned long long flags) override {
    // Not resolved when loaded for the peer-memory path.
    if (e_.mem_get_handle_for_address_range == nullptr) return kCudaErrorNotSupported;
    return e_.mem_get_handle_for_address_range(handle, ptr, size, handle_type, flags);
  }
  CUresult GetErrorString(CUresult error, const char** text) override {
    return e_.get_error_string(error, text);
  }
  absl::Status Unload() override {
    if (handle_ == nullptr) return absl::OkStatus();
    void* handle = std::exchange(handle_, nullptr);
    if (dlclose(handle) == 0) return absl::OkStatus();
    const char* err = dlerror();
    return absl::InternalError(absl::StrCat("unloading the CUDA driver library: ",
                                            std::string(err != nullptr ? err : "dlclose failed")));
  }

 private:
  void* handle_;
  CudaEntries e_;
};

// Resolves entry points through whichever cuGetProcAddress the driver exports.
class Resolver {
 public:
  Resolver(std::string library, GetProcAddressV1 v1, GetProcAddressV2 v2)
      : library_(std::move(library)), v1_(v1), v2_(v2) {}

  // `version` picks the ABI: e.g. cuMemAlloc at 3020 is cuMemAlloc_v2 (64-bit pointers).
  template <typename Fn>
  absl::Status Get(const char* name, int version, Fn* out) {
    void* fn = nullptr;
    int query_result = 0;
    const CUresult rc = v2_ != nullptr
                            ? v2_(name, &fn, version, kGetProcAddressDefault, &query_result)
                            : v1_(name, &fn, version, kGetProcAddressDefault);
    if (rc != kCudaSuccess || fn == nullptr) {
      return absl::NotFoundError(absl::StrCat(library_, " has no entry point ", name, " for CUDA ",
                                              version, " (CUDA error ", rc, ")"));
    }
    *out = reinterpret_cast<Fn>(fn);
    return absl::OkStatus();
  }

 private:
  std::string library_;
  GetProcAddressV1 v1_;
  GetProcAddressV2 v2_;
};

absl::Status ResolveAll(Resolver& r, bool dmabuf, CudaEntries& e) {
  // Versions as perftest's cuda_loader.c uses them: the first CUDA with each call's current ABI.
  for (absl::Status s : {
           r.Get("cuInit", 2000, &e.init),
           r.Get("cuDeviceGetCount", 2000, &e.device_get_count),
           r.Get("cuDeviceGet", 2000, &e.device_get),
           r.Get("cuDeviceGetByPCIBusId", 4010, &e.device_get_by_pci_bus_id),
           r.Get("cuDeviceGetAttribute", 2000, &e.device_get_attribute),
           r.Get("cuDevicePrimaryCtxRetain", 7000, &e.primary_ctx_retain),
           // 11000 is cuDevicePrimaryCtxRelease_v2 (same signature, no longer fails when the
           // context is current elsewhere).
           r.Get("cuDevicePrimaryCtxRelease", 11000, &e.primary_ctx_release),
           r.Get("cuCtxSetCurrent", 4000, &e.ctx_set_current),
           r.Get("cuMemAlloc", 3020, &e.mem_alloc),
           r.Get("cuMemFree", 3020, &e.mem_free),
           dmabuf ? r.Get("cuMemGetHandleForAddressRange", kCudaDmaBufVersion,
                          &e.mem_get_handle_for_address_range)
                  : absl::OkStatus(),
           r.Get("cuGetErrorString", 6000, &e.get_error_string),
       }) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

std::string VersionText(int v) { return absl::StrCat(v / 1000, ".", (v % 1000) / 10); }

}  // namespace

std::string CudaErrorText(CudaApi& cuda, CUresult error) {
  const char* text = nullptr;
  if (cuda.GetErrorString(error, &text) != kCudaSuccess || text == nullptr) {
    return absl::StrCat("CUDA error ", error);
  }
  return absl::StrCat(std::string(text), " (CUDA error ", error, ")");
}

absl::StatusOr<std::unique_ptr<CudaApi>> LoadCuda(const std::string& library, bool dmabuf) {
  // RTLD_LOCAL: the driver's symbols stay out of the global namespace, where they could satisfy
  // another library's undefined references by accident.
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    return absl::NotFoundError(absl::StrCat(library, " not found: no NVIDIA driver here (",
                                            std::string(err != nullptr ? err : "dlopen failed"),
                                            ")"));
  }
  // Closes the library on every failure below; the CudaApiImpl owns it once made.
  std::unique_ptr<void, int (*)(void*)> closer(handle, &dlclose);

  auto v2 = reinterpret_cast<GetProcAddressV2>(dlsym(handle, "cuGetProcAddress_v2"));
  auto v1 = reinterpret_cast<GetProcAddressV1>(dlsym(handle, "cuGetProcAddress"));
  if (v1 == nullptr && v2 == nullptr) {
    return absl::NotFoundError(absl::StrCat(
        library, " has no cuGetProcAddress: not a CUDA driver, or one older than 11.3"));
  }
  Resolver resolver(library, v1, v2);
  CudaEntries e;
  // The version first: an old driver gets its own reason, not a missing entry point.
  if (absl::Status s = resolver.Get("cuDriverGetVersion", 2020, &e.driver_get_version); !s.ok()) {
    return s;
  }
  int version = 0;
  if (const CUresult rc = e.driver_get_version(&version); rc != kCudaSuccess) {
    return absl::InternalError(
        absl::StrCat(library, ": cuDriverGetVersion failed (CUDA error ", rc, ")"));
  }
  if (dmabuf && version < kCudaDmaBufVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("CUDA driver ", VersionText(version), " is older than ",
                     VersionText(kCudaDmaBufVersion), ", which dma-buf export needs"));
  }
  if (absl::Status s = ResolveAll(resolver, dmabuf, e); !s.ok()) return s;
  return std::unique_ptr<CudaApi>(new CudaApiImpl(closer.release(), e));
}

}  // namespace fabric::gpumem
