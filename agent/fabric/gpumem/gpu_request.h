// Which GPU memory a test asks for: the vendor, the GPU, the registration path. Plain data, so
// that what a probe is (agent/fabric/probes/params.h) can say where its buffer lives without
// pulling in verbs or a driver.
#pragma once

#include <string>

namespace fabric::gpumem {

enum class GpuVendor { kCuda, kRocm };

struct GpuRequest {
  using Vendor = GpuVendor;
  Vendor vendor = Vendor::kCuda;
  std::string device;  // index ("0") or PCI bus id ("0000:3b:00.0")
  // false: the peer-memory path (nvidia_peermem / amdgpu's peer memory): ibv_reg_mr on the device
  // pointer.
  bool dmabuf = true;
  // Empty: the default driver library (libcuda.so.1; libamdhip64 and libhsa-runtime64.so.1).
  // For ROCm a named library must export both HIP's and the HSA runtime's entry points (tests
  // pass the fake).
  std::string library;
  // Where the host's /proc and /sys are read from to explain a failure (tests: a temp dir).
  std::string host_root = "/";
};

// Where a buffer of `r` lives, for people: "CUDA GPU 0000:3b:00.0 (dma-buf)". `name`: the GPU
// as its driver names it; empty: as `r` does.
inline std::string Describe(const GpuRequest& r, const std::string& name = "") {
  return std::string(r.vendor == GpuVendor::kCuda ? "CUDA" : "ROCm") + " GPU " +
         (name.empty() ? r.device : name) + (r.dmabuf ? " (dma-buf)" : " (peer memory)");
}

}  // namespace fabric::gpumem
