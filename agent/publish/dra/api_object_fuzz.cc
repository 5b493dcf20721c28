// What the API server sends the DRA driver, as it parses it: a ResourceSlice list (the slices'
// publisher) and a ResourceClaim (the kubelet plugin, and its status update with network data).
// Any bytes give an object or an error, never a crash; what parses holds what the callers rely on.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "agent/publish/dra/claim.h"
#include "agent/publish/dra/slice_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  auto listed = fabric::dra::ParseSliceList(body);
  if (listed.ok()) {
    for (const auto& s : *listed) {
      if (s.name.empty() || s.devices_key.empty()) __builtin_trap();
    }
  }
  auto claim = fabric::dra::ParseClaim(body);
  if (claim.ok()) {
    if (claim->uid.empty()) __builtin_trap();
    for (const auto& r : claim->results) (void)r.device.size();
    if (!claim->allocated && !claim->results.empty()) __builtin_trap();
    // The network data's status update of what parsed: applied once, it is there (no second).
    const std::vector<fabric::dra::DeviceNetwork> net = {
        {"node-a", "mlx5-3", {"net1", {"10.50.0.11/24"}, "0a:58:0a:32:00:0b"}}};
    auto update = fabric::dra::ClaimStatusUpdate(body, net);
    if (update.ok() && update->has_value()) {
      auto again = fabric::dra::ClaimStatusUpdate(**update, net);
      if (again.ok() && again->has_value()) __builtin_trap();
    }
  }
  return 0;
}
