// What both host sources share (host_source.h).
#include "agent/fabricctl/host_source.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_split.h"
#include "agent/policy/select/select.h"

namespace fabric::ctl {

// "all" means the GPUs NCCL/RCCL drive (CollectiveGpus), in PCI order.
absl::StatusOr<std::vector<std::string>> GpuList(const v1::Host& host, const std::string& gpus) {
  std::vector<std::string> list;
  if (gpus == "all") {
    list = CollectiveGpus(host);
    if (list.empty()) {
      return absl::NotFoundError(ComputeGpus(host).empty()
                                     ? "--gpus=all: the host has no GPU or accelerator"
                                     : "--gpus=all: the host has no NVIDIA or AMD GPU (name other "
                                       "accelerators by address)");
    }
    return list;
  }
  for (absl::string_view g : absl::StrSplit(gpus, ',', absl::SkipWhitespace())) {
    list.emplace_back(g);
  }
  if (list.empty()) return absl::InvalidArgumentError("--gpus is empty");
  return list;
}

v1::VisibleDevices VisibleFromEnvironment(const char* (*getenv)(const char*)) {
  auto get = [getenv](const char* name) -> const char* {
    return getenv != nullptr ? getenv(name) : std::getenv(name);
  };
  v1::VisibleDevices v;
  if (const char* e = get("NVIDIA_VISIBLE_DEVICES")) v.set_nvidia_visible_devices(e);
  if (const char* e = get("CUDA_VISIBLE_DEVICES")) v.set_cuda_visible_devices(e);
  if (const char* e = get("ROCR_VISIBLE_DEVICES")) v.set_rocr_visible_devices(e);
  if (const char* e = get("HIP_VISIBLE_DEVICES")) v.set_hip_visible_devices(e);
  return v;
}

}  // namespace fabric::ctl
