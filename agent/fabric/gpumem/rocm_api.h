// A narrow seam over ROCm, loaded at run time so the agent has no build or package dependency on
// it: HIP's runtime (libamdhip64) for the device and the allocation, and the HSA runtime
// (libhsa-runtime64.so.1) for the dma-buf export, the calls perftest's src/rocm_memory.c makes.
// The types are declared here because no ROCm header exists on the build hosts; they match
// ROCm's ABI on 64-bit Linux.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace fabric::gpumem {

// hip/hip_runtime_api.h: `typedef enum hipError_t {hipSuccess = 0, ...}` (an int-sized enum).
using hipError_t = int;
inline constexpr hipError_t kHipSuccess = 0;
// hsa/hsa.h: `typedef enum {HSA_STATUS_SUCCESS = 0x0, ...} hsa_status_t` (an int-sized enum).
using hsa_status_t = int;
inline constexpr hsa_status_t kHsaStatusSuccess = 0;

class RocmApi {
 public:
  virtual ~RocmApi() = default;

  // hip/hip_runtime_api.h.
  virtual hipError_t Init(unsigned int flags) = 0;
  virtual hipError_t GetDeviceCount(int* count) = 0;
  virtual hipError_t DeviceGetByPciBusId(int* device, const char* pci_bus_id) = 0;
  virtual hipError_t SetDevice(int device) = 0;
  virtual hipError_t Malloc(void** ptr, size_t size) = 0;
  virtual hipError_t Free(void* ptr) = 0;
  // Never null for a real runtime ("hipErrorOutOfMemory"); may be for a missing entry.
  virtual const char* GetErrorString(hipError_t error) = 0;
  // hsa/hsa_ext_amd.h: exports [ptr, ptr + size) of one allocation; `offset` receives where ptr
  // lies in the dma-buf. Only when loaded with dmabuf.
  virtual hsa_status_t ExportDmabuf(const void* ptr, size_t size, int* dmabuf,
                                    uint64_t* offset) = 0;
  // Closes an fd ExportDmabuf gave (the runtime tracks them: close(2) is not enough).
  virtual hsa_status_t CloseDmabuf(int dmabuf) = 0;
  // hsa_status_string; false when the runtime has none for `status`.
  virtual bool StatusString(hsa_status_t status, const char** text) = 0;
  // Closes the libraries now and reports dlclose's failures (the destructor closes them
  // otherwise, silently). No call may follow.
  virtual absl::Status Unload() = 0;
};

// "hipErrorOutOfMemory (HIP error 2)"; the number alone when the runtime has no text for it.
std::string HipErrorText(RocmApi& rocm, hipError_t error);
// "HSA_STATUS_ERROR_INVALID_ARGUMENT: ... (HSA status 0x1001)"; the number alone without text.
std::string HsaStatusText(RocmApi& rocm, hsa_status_t status);

// HIP's runtime, tried in this order when no library is named.
inline constexpr const char* kHipLibraries[] = {"libamdhip64.so.6", "libamdhip64.so.5",
                                                "libamdhip64.so"};
inline constexpr const char* kHsaLibrary = "libhsa-runtime64.so.1";

// dlopens HIP's runtime (`hip_library`, or kHipLibraries in turn when empty) and, with `dmabuf`,
// the HSA runtime (`hsa_library`: the one libamdhip64 itself links, so dlopen finds the copy HIP
// initialised), and resolves every entry point. One-line errors name the library or symbol.
absl::StatusOr<std::unique_ptr<RocmApi>> LoadRocm(const std::string& hip_library = "",
                                                  const std::string& hsa_library = kHsaLibrary,
                                                  bool dmabuf = true);

}  // namespace fabric::gpumem
