// libFuzzer target for the kernel uevent parser: datagrams come from the kernel, but the parser
// must hold on any bytes.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "agent/daemon/cycle/uevent.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto e = fabric::ParseUevent(std::string_view(reinterpret_cast<const char*>(data), size));
  if (e.ok()) (void)fabric::AffectsInventory(*e);
  return 0;
}
