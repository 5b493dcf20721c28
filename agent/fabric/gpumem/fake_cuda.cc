// A stand-in for libcuda.so.1 for gpu_buffer_test: it exports cuGetProcAddress (v1 and v2) and
// hands out fake entry points whose behaviour the test sets with fake_cuda_set, and counts what
// is taken so the test can check every path gives it back.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

namespace {

using CUresult = int;
constexpr CUresult kSuccess = 0;
constexpr CUresult kInvalidValue = 1;
constexpr CUresult kOutOfMemory = 2;
constexpr CUresult kInvalidDevice = 101;
constexpr CUresult kNotFound = 500;
constexpr const char* kBusId = "0000:3b:00.0";

// Keys: driver_version, device_count, dmabuf_supported, alloc_fails, export_fails,
// hide_export (cuGetProcAddress fails for cuMemGetHandleForAddressRange), misalign (bytes added
// to each pointer cuMemAlloc gives), host_backed (cuMemAlloc maps host memory, so that a process
// using the fake, fabric-probe in the VM test, registers and moves real bytes on the peer-memory
// path; also set by FAKE_CUDA_HOST_BACKED=1). Counters: retained, allocated, export_ptr,
// export_size.
std::map<std::string, long long>& State() {
  static std::map<std::string, long long> s;
  return s;
}
long long Get(const char* key) { return State()[key]; }

void Reset() {
  State().clear();
  State()["driver_version"] = 12040;
  State()["device_count"] = 1;
  State()["dmabuf_supported"] = 1;
  const char* host = getenv("FAKE_CUDA_HOST_BACKED");
  State()["host_backed"] = host != nullptr && strcmp(host, "1") == 0 ? 1 : 0;
}

std::map<uint64_t, size_t>& Mapped() {
  static std::map<uint64_t, size_t> m;
  return m;
}

struct Init {
  Init() { Reset(); }
} init;

CUresult FakeInit(unsigned int) { return kSuccess; }
CUresult FakeDriverGetVersion(int* v) {
  *v = static_cast<int>(Get("driver_version"));
  return kSuccess;
}
CUresult FakeDeviceGetCount(int* n) {
  *n = static_cast<int>(Get("device_count"));
  return kSuccess;
}
CUresult FakeDeviceGet(int* d, int ordinal) {
  if (ordinal < 0 || ordinal >= Get("device_count")) return kInvalidDevice;
  *d = ordinal;
  return kSuccess;
}
CUresult FakeDeviceGetByPciBusId(int* d, const char* id) {
  if (Get("device_count") < 1 || strcasecmp(id, kBusId) != 0) return kInvalidDevice;
  *d = 0;
  return kSuccess;
}
CUresult FakeDeviceGetAttribute(int* v, int attribute, int) {
  if (attribute != 124) return kInvalidValue;
  *v = static_cast<int>(Get("dmabuf_supported"));
  return kSuccess;
}
CUresult FakeRetain(void** ctx, int) {
  ++State()["retained"];
  *ctx = reinterpret_cast<void*>(0x1234);
  return kSuccess;
}
CUresult FakeRelease(int) {
  --State()["retained"];
  return kSuccess;
}
CUresult FakeCtxSetCurrent(void* ctx) { return ctx != nullptr ? kSuccess : kInvalidValue; }
CUresult FakeMemAlloc(uint64_t* p, size_t size) {
  if (Get("alloc_fails") != 0) return kOutOfMemory;
  if (size == 0) return kInvalidValue;
  if (Get("host_backed") != 0) {
    void* m = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return kOutOfMemory;
    *p = reinterpret_cast<uint64_t>(m);
    Mapped()[*p] = size;
  } else {
    *p = 0x7f0000200000ULL + static_cast<uint64_t>(Get("misalign"));
  }
  ++State()["allocated"];
  return kSuccess;
}
CUresult FakeMemFree(uint64_t p) {
  if (p == 0) return kInvalidValue;
  if (auto it = Mapped().find(p); it != Mapped().end()) {
    munmap(reinterpret_cast<void*>(p), it->second);
    Mapped().erase(it);
  }
  --State()["allocated"];
  return kSuccess;
}
CUresult FakeGetHandle(void* handle, uint64_t p, size_t size, int type, unsigned long long) {
  const auto page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  // The real driver wants a page-aligned range.
  if (type != 1 || p % page != 0 || size % page != 0) return kInvalidValue;
  if (Get("export_fails") != 0) return kInvalidValue;
  State()["export_ptr"] = static_cast<long long>(p);
  State()["export_size"] = static_cast<long long>(size);
  const int fd = memfd_create("fake-dmabuf", MFD_CLOEXEC);
  if (fd < 0) return kOutOfMemory;
  *static_cast<int*>(handle) = fd;
  return kSuccess;
}
CUresult FakeGetErrorString(CUresult e, const char** text) {
  switch (e) {
    case kOutOfMemory:
      *text = "out of memory";
      return kSuccess;
    case kInvalidValue:
      *text = "invalid argument";
      return kSuccess;
    case kInvalidDevice:
      *text = "invalid device ordinal";
      return kSuccess;
    default:
      *text = nullptr;
      return kInvalidValue;
  }
}

struct Entry {
  const char* name;
  void* fn;
  int version;  // the version the loader must ask for (the ABI these fakes implement)
};

CUresult Lookup(const char* name, void** fn, int version) {
  const Entry entries[] = {
      {"cuInit", reinterpret_cast<void*>(&FakeInit), 2000},
      {"cuDriverGetVersion", reinterpret_cast<void*>(&FakeDriverGetVersion), 2020},
      {"cuDeviceGetCount", reinterpret_cast<void*>(&FakeDeviceGetCount), 2000},
      {"cuDeviceGet", reinterpret_cast<void*>(&FakeDeviceGet), 2000},
      {"cuDeviceGetByPCIBusId", reinterpret_cast<void*>(&FakeDeviceGetByPciBusId), 4010},
      {"cuDeviceGetAttribute", reinterpret_cast<void*>(&FakeDeviceGetAttribute), 2000},
      {"cuDevicePrimaryCtxRetain", reinterpret_cast<void*>(&FakeRetain), 7000},
      {"cuDevicePrimaryCtxRelease", reinterpret_cast<void*>(&FakeRelease), 11000},
      {"cuCtxSetCurrent", reinterpret_cast<void*>(&FakeCtxSetCurrent), 4000},
      {"cuMemAlloc", reinterpret_cast<void*>(&FakeMemAlloc), 3020},
      {"cuMemFree", reinterpret_cast<void*>(&FakeMemFree), 3020},
      {"cuMemGetHandleForAddressRange", reinterpret_cast<void*>(&FakeGetHandle), 11070},
      {"cuGetErrorString", reinterpret_cast<void*>(&FakeGetErrorString), 6000},
  };
  *fn = nullptr;
  if (Get("hide_export") != 0 && strcmp(name, "cuMemGetHandleForAddressRange") == 0) {
    return kNotFound;
  }
  for (const Entry& e : entries) {
    if (strcmp(name, e.name) != 0) continue;
    // Another version would be another ABI (e.g. cuMemAlloc's 32-bit pointers before 3020):
    // fail so a loader asking for the wrong one is caught.
    if (version != e.version) return kNotFound;
    *fn = e.fn;
    return kSuccess;
  }
  return kNotFound;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) CUresult cuGetProcAddress(const char* name, void** fn,
                                                                 int version, unsigned long long) {
  ++State()["v1_calls"];
  return Lookup(name, fn, version);
}

__attribute__((visibility("default"))) CUresult cuGetProcAddress_v2(const char* name, void** fn,
                                                                    int version, unsigned long long,
                                                                    int* query_result) {
  ++State()["v2_calls"];
  const CUresult rc = Lookup(name, fn, version);
  if (query_result != nullptr) *query_result = rc == kSuccess ? 0 : 1;
  return rc;
}

// "reset" (any value) restores the defaults and zeroes the counters.
__attribute__((visibility("default"))) void fake_cuda_set(const char* key, long long value) {
  if (strcmp(key, "reset") == 0) {
    Reset();
    return;
  }
  State()[key] = value;
}

__attribute__((visibility("default"))) long long fake_cuda_get(const char* key) { return Get(key); }

}  // extern "C"
