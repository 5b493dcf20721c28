// libFuzzer target for the GPU driver parsers (gpu_info.h): the first byte picks the parser; they
// must return an error, never crash, on any input.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "agent/inventory/discovery/gpu_info.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view s(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 3) {
    case 0:
      (void)fabric::ParseNvidiaGpuInformation(s);
      break;
    case 1:
      (void)fabric::ParseNvidiaUuid(s);
      break;
    case 2:
      (void)fabric::ParseAmdUniqueId(s);
      break;
  }
  return 0;
}
