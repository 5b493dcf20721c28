// The agent decodes hand-offs from any root process on the node: outside bytes.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "agent/fabric/announce/handoff.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto h =
      fabric::announce::DecodeHandoff(std::string_view(reinterpret_cast<const char*>(data), size));
  if (h.ok()) {
    // What decodes must encode and decode to the same thing.
    auto again = fabric::announce::DecodeHandoff(fabric::announce::EncodeHandoff(*h));
    if (!again.ok() ||
        fabric::announce::EncodeHandoff(*again) != fabric::announce::EncodeHandoff(*h)) {
      __builtin_trap();
    }
  }
  return 0;
}
