// What both host sources share (host_source.h).
#include "agent/fabricctl/host_source.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_split.h"
#include "agent/policy/select/gpu_names.h"

namespace fabric::ctl {

absl::StatusOr<std::vector<std::string>> GpuNames(const std::string& gpus) {
  std::vector<std::string> list;
  for (absl::string_view g : absl::StrSplit(gpus, ',', absl::SkipWhitespace())) {
    list.emplace_back(g);
  }
  if (list.empty()) return absl::InvalidArgumentError("--gpus is empty");
  return list;
}

absl::StatusOr<v1::SelectNicsRequest> GpuRequest(
    std::string_view gpus, const std::function<const char*(const char*)>& getenv) {
  v1::SelectNicsRequest req;
  req.set_include_rejected(true);
  if (gpus == "all") {
    req.set_all(true);
  } else if (gpus == "visible") {
    *req.mutable_visible() = VisibleFromEnvironment(getenv);
    // Nothing set: ExpandVisible's error, naming the variables it looked at.
    if (!HasVisible(req.visible())) return ExpandVisible(req.visible(), v1::Host()).status();
  } else {
    auto names = GpuNames(std::string(gpus));
    if (!names.ok()) return names.status();
    for (std::string& g : *names) req.add_gpus(std::move(g));
  }
  return req;
}

v1::VisibleDevices VisibleFromEnvironment(
    const std::function<const char*(const char*)>& getenv) {
  auto get = [&getenv](const char* name) -> const char* {
    return getenv ? getenv(name) : std::getenv(name);
  };
  v1::VisibleDevices v;
  if (const char* e = get("NVIDIA_VISIBLE_DEVICES")) v.set_nvidia_visible_devices(e);
  if (const char* e = get("CUDA_VISIBLE_DEVICES")) v.set_cuda_visible_devices(e);
  if (const char* e = get("ROCR_VISIBLE_DEVICES")) v.set_rocr_visible_devices(e);
  if (const char* e = get("HIP_VISIBLE_DEVICES")) v.set_hip_visible_devices(e);
  return v;
}

}  // namespace fabric::ctl
