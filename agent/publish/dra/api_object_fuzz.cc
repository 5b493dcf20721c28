// What the API server sends the DRA driver, as it parses it: a ResourceSlice list (the slices'
// publisher) and a ResourceClaim (the kubelet plugin). Any bytes give an object or an error, never
// a crash; what parses holds what the callers rely on.
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
  }
  return 0;
}
