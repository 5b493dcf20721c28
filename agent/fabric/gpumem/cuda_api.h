// A narrow seam over CUDA's driver API, loaded at run time so the agent has no build or package
// dependency on CUDA: only the calls a dma-buf-exported device buffer needs. The types are
// declared here because no CUDA header exists on the build hosts; they match the driver's ABI
// on 64-bit Linux.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace fabric::gpumem {

using CUresult = int;
using CUdevice = int;
using CUcontext = struct CUctx_st*;
using CUdeviceptr = std::uint64_t;  // the _v2 ABI (64-bit), which cuMemAlloc at 3020 hands out

inline constexpr CUresult kCudaSuccess = 0;
inline constexpr int kCuDeviceAttributeDmaBufSupported = 124;
inline constexpr int kCuMemRangeHandleTypeDmaBufFd = 1;
// The first driver with cuMemGetHandleForAddressRange (dma-buf export).
inline constexpr int kCudaDmaBufVersion = 11070;

class CudaApi {
 public:
  virtual ~CudaApi() = default;

  virtual CUresult Init(unsigned int flags) = 0;
  virtual CUresult DriverGetVersion(int* version) = 0;
  virtual CUresult DeviceGetCount(int* count) = 0;
  virtual CUresult DeviceGet(CUdevice* device, int ordinal) = 0;
  virtual CUresult DeviceGetByPciBusId(CUdevice* device, const char* pci_bus_id) = 0;
  virtual CUresult DeviceGetAttribute(int* value, int attribute, CUdevice device) = 0;
  virtual CUresult DevicePrimaryCtxRetain(CUcontext* ctx, CUdevice device) = 0;
  virtual CUresult DevicePrimaryCtxRelease(CUdevice device) = 0;
  virtual CUresult CtxSetCurrent(CUcontext ctx) = 0;
  virtual CUresult MemAlloc(CUdeviceptr* ptr, size_t size) = 0;
  virtual CUresult MemFree(CUdeviceptr ptr) = 0;
  // `handle` receives an int (the dma-buf fd) for kCuMemRangeHandleTypeDmaBufFd.
  virtual CUresult MemGetHandleForAddressRange(void* handle, CUdeviceptr ptr, size_t size,
                                               int handle_type, unsigned long long flags) = 0;
  virtual CUresult GetErrorString(CUresult error, const char** text) = 0;
  // Closes the driver library now and reports dlclose's failure (the destructor closes it
  // otherwise, silently). No call may follow.
  virtual absl::Status Unload() { return absl::OkStatus(); }
};

// "out of memory (CUDA error 2)"; the number alone when the driver has no text for it.
std::string CudaErrorText(CudaApi& cuda, CUresult error);

// dlopens `library` and resolves every entry point through cuGetProcAddress at explicit CUDA
// versions (so the ABI is the one these declarations describe, whatever the driver's default).
// With `dmabuf`, checks the driver can export dma-buf (11.7 or later); without it (the peer-memory
// path) MemGetHandleForAddressRange is not resolved and must not be called. One-line errors name
// the library or symbol.
absl::StatusOr<std::unique_ptr<CudaApi>> LoadCuda(const std::string& library = "libcuda.so.1",
                                                  bool dmabuf = true);

}  // namespace fabric::gpumem
