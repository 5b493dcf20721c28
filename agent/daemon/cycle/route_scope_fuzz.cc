// libFuzzer target for route netlink messages: they come from the kernel, but the parser must
// hold on any bytes (lengths and attributes that lie included).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "agent/daemon/cycle/route_scope.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Netlink messages are 4-byte aligned in the receive buffer.
  std::vector<uint32_t> aligned((size + 3) / 4);
  if (size > 0) std::memcpy(aligned.data(), data, size);
  fabric::ChangeScope scope;
  (void)fabric::ScopeOfRouteMessage(
      std::string_view(reinterpret_cast<const char*>(aligned.data()), size),
      [](int i) { return i % 2 == 0 ? std::string("eth") + std::to_string(i) : std::string(); },
      &scope);
  return 0;
}
