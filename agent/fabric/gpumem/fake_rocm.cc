// A stand-in for HIP's runtime (libamdhip64) and the HSA runtime (libhsa-runtime64) at once, for
// the ROCm tests: it exports the entry points RocmApi resolves, behaving as the test sets with
// fake_rocm_set, and counts what is taken so the test can check every path gives it back.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <string>

namespace {

using hipError_t = int;
using hsa_status_t = int;
// hip_runtime_api.h's codes.
constexpr hipError_t kHipSuccess = 0;
constexpr hipError_t kHipErrorInvalidValue = 1;
constexpr hipError_t kHipErrorOutOfMemory = 2;
constexpr hipError_t kHipErrorInvalidDevice = 101;
// hsa.h's codes.
constexpr hsa_status_t kHsaSuccess = 0;
constexpr hsa_status_t kHsaErrorInvalidArgument = 0x1001;
constexpr hsa_status_t kHsaErrorInvalidAllocation = 0x1003;  // hsa_status_string: no text here
constexpr const char* kBusId = "0000:c1:00.0";
constexpr uint64_t kBase = 0x7e0000000000ULL;

// Keys: device_count, init_fails, alloc_fails, export_fails, close_fails, free_fails, misalign
// (bytes the pointer hipMalloc gives lies past its buffer object's start). Counters: allocated,
// exported (dma-bufs open), current_device, export_size, malloc_size.
std::map<std::string, long long>& State() {
  static std::map<std::string, long long> s;
  return s;
}
long long Get(const char* key) { return State()[key]; }

void Reset() {
  State().clear();
  State()["device_count"] = 2;
  State()["current_device"] = -1;
}

struct Init {
  Init() { Reset(); }
} init;

}  // namespace

extern "C" {

#define FAKE_EXPORT __attribute__((visibility("default")))

FAKE_EXPORT hipError_t hipInit(unsigned int flags) {
  if (flags != 0) return kHipErrorInvalidValue;  // HIP wants 0
  return Get("init_fails") != 0 ? kHipErrorInvalidDevice : kHipSuccess;
}

FAKE_EXPORT hipError_t hipGetDeviceCount(int* count) {
  *count = static_cast<int>(Get("device_count"));
  return kHipSuccess;
}

FAKE_EXPORT hipError_t hipDeviceGetByPCIBusId(int* device, const char* id) {
  if (Get("device_count") < 2 || strcasecmp(id, kBusId) != 0) return kHipErrorInvalidDevice;
  *device = 1;  // the second GPU, so a test sees the bus id was looked up
  return kHipSuccess;
}

FAKE_EXPORT hipError_t hipSetDevice(int device) {
  if (device < 0 || device >= Get("device_count")) return kHipErrorInvalidDevice;
  State()["current_device"] = device;
  return kHipSuccess;
}

FAKE_EXPORT hipError_t hipMalloc(void** ptr, size_t size) {
  if (Get("alloc_fails") != 0) return kHipErrorOutOfMemory;
  if (size == 0) return kHipErrorInvalidValue;
  ++State()["allocated"];
  State()["malloc_size"] = static_cast<long long>(size);
  *ptr = reinterpret_cast<void*>(kBase + static_cast<uint64_t>(Get("misalign")));
  return kHipSuccess;
}

FAKE_EXPORT hipError_t hipFree(void* ptr) {
  if (ptr == nullptr) return kHipSuccess;  // as HIP: freeing null is no error
  if (Get("allocated") <= 0) return kHipErrorInvalidValue;
  --State()["allocated"];
  return Get("free_fails") != 0 ? kHipErrorInvalidValue : kHipSuccess;
}

FAKE_EXPORT const char* hipGetErrorString(hipError_t e) {
  switch (e) {
    case kHipSuccess:
      return "hipSuccess";
    case kHipErrorInvalidValue:
      return "hipErrorInvalidValue";
    case kHipErrorOutOfMemory:
      return "hipErrorOutOfMemory";
    case kHipErrorInvalidDevice:
      return "hipErrorInvalidDevice";
    default:
      return "hipErrorUnknown";
  }
}

FAKE_EXPORT hsa_status_t hsa_amd_portable_export_dmabuf(const void* ptr, size_t size, int* dmabuf,
                                                        uint64_t* offset) {
  const auto p = reinterpret_cast<uint64_t>(ptr);
  const auto misalign = static_cast<uint64_t>(Get("misalign"));
  // The real runtime wants a range inside one live allocation.
  if (Get("allocated") <= 0 || p != kBase + misalign || size == 0 ||
      size > static_cast<uint64_t>(Get("malloc_size"))) {
    return kHsaErrorInvalidArgument;
  }
  if (Get("export_fails") != 0) return kHsaErrorInvalidAllocation;
  const int fd = memfd_create("fake-rocm-dmabuf", MFD_CLOEXEC);
  if (fd < 0) return kHsaErrorInvalidArgument;
  ++State()["exported"];
  State()["export_size"] = static_cast<long long>(size);
  State()["export_fd"] = fd;
  *dmabuf = fd;
  *offset = misalign;
  return kHsaSuccess;
}

FAKE_EXPORT hsa_status_t hsa_amd_portable_close_dmabuf(int dmabuf) {
  if (dmabuf < 0 || close(dmabuf) != 0) return kHsaErrorInvalidArgument;
  --State()["exported"];
  return Get("close_fails") != 0 ? kHsaErrorInvalidArgument : kHsaSuccess;
}

FAKE_EXPORT hsa_status_t hsa_status_string(hsa_status_t status, const char** text) {
  if (status != kHsaErrorInvalidArgument) return kHsaErrorInvalidArgument;
  *text =
      "HSA_STATUS_ERROR_INVALID_ARGUMENT: One of the actual arguments does not meet a "
      "precondition stated in the documentation of the corresponding formal argument.";
  return kHsaSuccess;
}

// "reset" (any value) restores the defaults and zeroes the counters.
FAKE_EXPORT void fake_rocm_set(const char* key, long long value) {
  if (strcmp(key, "reset") == 0) {
    Reset();
    return;
  }
  State()[key] = value;
}

FAKE_EXPORT long long fake_rocm_get(const char* key) { return Get(key); }

}  // extern "C"
