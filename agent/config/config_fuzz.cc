// libFuzzer target for the agent's config file parser (operators' bytes).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "agent/config/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)fabric::ParseConfig(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
