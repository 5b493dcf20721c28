// The API server's ResourceSlice list, as the publisher parses it: any bytes give a list or an
// error, never a crash, and what parses compares as DevicesKey renders.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "agent/publish/dra/slice_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  auto listed = fabric::dra::ParseSliceList(body);
  if (listed.ok()) {
    for (const auto& s : *listed) {
      if (s.name.empty() || s.devices_key.empty()) __builtin_trap();
    }
  }
  return 0;
}
