#include "agent/fabric/gpumem/rocm_api.h"

#include <dlfcn.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/fabric/gpumem/failures.h"

namespace fabric::gpumem {
namespace {

// hsa/hsa.h: HSA_STATUS_ERROR_NOT_INITIALIZED, returned where an entry point is missing.
constexpr hsa_status_t kHsaStatusErrorNotInitialized = 0x100B;

// The signatures, from hip/hip_runtime_api.h and hsa/hsa_ext_amd.h (ROCm 6).
struct RocmEntries {
  hipError_t (*init)(unsigned int) = nullptr;
  hipError_t (*get_device_count)(int*) = nullptr;
  hipError_t (*device_get_by_pci_bus_id)(int*, const char*) = nullptr;
  hipError_t (*set_device)(int) = nullptr;
  hipError_t (*malloc)(void**, size_t) = nullptr;
  hipError_t (*free)(void*) = nullptr;
  const char* (*get_error_string)(hipError_t) = nullptr;
  hsa_status_t (*export_dmabuf)(const void*, size_t, int*, uint64_t*) = nullptr;
  hsa_status_t (*close_dmabuf)(int) = nullptr;
  hsa_status_t (*status_string)(hsa_status_t, const char**) = nullptr;  // optional
};

absl::Status DlcloseStatus(void* handle, const std::string& library) {
  if (handle == nullptr || dlclose(handle) == 0) return absl::OkStatus();
  const char* err = dlerror();
  return absl::InternalError(absl::StrCat("unloading ", library, ": ",
                                          std::string(err != nullptr ? err : "dlclose failed")));
}

class RocmApiImpl final : public RocmApi {
 public:
  RocmApiImpl(void* hip, std::string hip_name, void* hsa, std::string hsa_name,
              const RocmEntries& e)
      : hip_(hip),
        hsa_(hsa),
        hip_name_(std::move(hip_name)),
        hsa_name_(std::move(hsa_name)),
        e_(e) {}
  ~RocmApiImpl() override { (void)Unload(); }
  RocmApiImpl(const RocmApiImpl&) = delete;
  RocmApiImpl& operator=(const RocmApiImpl&) = delete;

  hipError_t Init(unsigned int flags) override { return e_.init(flags); }
  hipError_t GetDeviceCount(int* count) override { return e_.get_device_count(count); }
  hipError_t DeviceGetByPciBusId(int* device, const char* pci_bus_id) override {
    return e_.device_get_by_pci_bus_id(device, pci_bus_id);
  }
  hipError_t SetDevice(int device) override { return e_.set_device(device); }
  hipError_t Malloc(void** ptr, size_t size) override { return e_.malloc(ptr, size); }
  hipError_t Free(void* ptr) override { return e_.free(ptr); }
  const char* GetErrorString(hipError_t error) override { return e_.get_error_string(error); }
  hsa_status_t ExportDmabuf(const void* ptr, size_t size, int* dmabuf, uint64_t* offset) override {
    if (e_.export_dmabuf == nullptr) return kHsaStatusErrorNotInitialized;
    return e_.export_dmabuf(ptr, size, dmabuf, offset);
  }
  hsa_status_t CloseDmabuf(int dmabuf) override {
    if (e_.close_dmabuf == nullptr) return kHsaStatusErrorNotInitialized;
    return e_.close_dmabuf(dmabuf);
  }
  bool StatusString(hsa_status_t status, const char** text) override {
    return e_.status_string != nullptr && e_.status_string(status, text) == kHsaStatusSuccess &&
           *text != nullptr;
  }
  absl::Status Unload() override {
    // HSA first: HIP's runtime holds its own reference to it, so this only drops ours.
    absl::Status all = DlcloseStatus(std::exchange(hsa_, nullptr), hsa_name_);
    AddFailure(all, DlcloseStatus(std::exchange(hip_, nullptr), hip_name_));
    return all;
  }

 private:
  void* hip_;
  void* hsa_;
  std::string hip_name_, hsa_name_;
  RocmEntries e_;
};

template <typename Fn>
absl::Status Resolve(void* handle, const std::string& library, const char* name, Fn* out) {
  void* fn = dlsym(handle, name);
  if (fn == nullptr) {
    return absl::NotFoundError(absl::StrCat(library, " has no ", name));
  }
  *out = reinterpret_cast<Fn>(fn);
  return absl::OkStatus();
}

using Handle = std::unique_ptr<void, int (*)(void*)>;

std::string DlerrorText() {
  const char* err = dlerror();
  return err != nullptr ? err : "dlopen failed";
}

absl::StatusOr<std::pair<Handle, std::string>> OpenHip(const std::string& library) {
  if (!library.empty()) {
    void* h = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      return absl::NotFoundError(
          absl::StrCat(library, " not found: no ROCm here (", DlerrorText(), ")"));
    }
    return std::make_pair(Handle(h, &dlclose), library);
  }
  std::string last;
  for (const char* name : kHipLibraries) {
    // RTLD_LOCAL: the runtime's symbols stay out of the global namespace.
    if (void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL)) {
      return std::make_pair(Handle(h, &dlclose), std::string(name));
    }
    last = DlerrorText();
  }
  return absl::NotFoundError(absl::StrCat(
      "no ROCm here: none of libamdhip64.so.6, libamdhip64.so.5, libamdhip64.so loads (", last,
      ")"));
}

}  // namespace

std::string HipErrorText(RocmApi& rocm, hipError_t error) {
  const char* text = rocm.GetErrorString(error);
  if (text == nullptr || *text == '\0') return absl::StrCat("HIP error ", error);
  return absl::StrCat(std::string(text), " (HIP error ", error, ")");
}

std::string HsaStatusText(RocmApi& rocm, hsa_status_t status) {
  const char* text = nullptr;
  const std::string number = absl::StrFormat("HSA status 0x%x", status);
  if (!rocm.StatusString(status, &text)) return number;
  return absl::StrCat(std::string(text), " (", number, ")");
}

absl::StatusOr<std::unique_ptr<RocmApi>> LoadRocm(const std::string& hip_library,
                                                  const std::string& hsa_library, bool dmabuf) {
  absl::StatusOr<std::pair<Handle, std::string>> hip = OpenHip(hip_library);
  if (!hip.ok()) return hip.status();
  void* h = hip->first.get();
  const std::string& hip_name = hip->second;
  RocmEntries e;
  for (absl::Status s : {
           Resolve(h, hip_name, "hipInit", &e.init),
           Resolve(h, hip_name, "hipGetDeviceCount", &e.get_device_count),
           Resolve(h, hip_name, "hipDeviceGetByPCIBusId", &e.device_get_by_pci_bus_id),
           Resolve(h, hip_name, "hipSetDevice", &e.set_device),
           Resolve(h, hip_name, "hipMalloc", &e.malloc),
           Resolve(h, hip_name, "hipFree", &e.free),
           Resolve(h, hip_name, "hipGetErrorString", &e.get_error_string),
       }) {
    if (!s.ok()) return s;
  }

  Handle hsa(nullptr, &dlclose);
  if (dmabuf) {
    hsa.reset(dlopen(hsa_library.c_str(), RTLD_NOW | RTLD_LOCAL));
    if (hsa == nullptr) {
      return absl::NotFoundError(absl::StrCat(hsa_library,
                                              " not found: the HSA runtime, whose dma-buf export "
                                              "ROCm needs (",
                                              DlerrorText(), ")"));
    }
    for (absl::Status s : {
             Resolve(hsa.get(), hsa_library, "hsa_amd_portable_export_dmabuf", &e.export_dmabuf),
             Resolve(hsa.get(), hsa_library, "hsa_amd_portable_close_dmabuf", &e.close_dmabuf),
         }) {
      if (!s.ok()) {
        return absl::NotFoundError(absl::StrCat(
            s.message(), ": a ROCm without dma-buf export (use the peer-memory path)"));
      }
    }
    // Only for messages: its absence costs the text, not the export.
    e.status_string =
        reinterpret_cast<decltype(e.status_string)>(dlsym(hsa.get(), "hsa_status_string"));
  }
  return std::unique_ptr<RocmApi>(
      new RocmApiImpl(hip->first.release(), hip_name, hsa.release(), hsa_library, e));
}

}  // namespace fabric::gpumem
