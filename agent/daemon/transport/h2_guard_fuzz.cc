// The guard reads what any client sends: arbitrary bytes in arbitrary chunks must never crash it,
// and its counts must stay consistent.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "agent/daemon/transport/h2_guard.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t chunk = 1 + data[0] % 32;
  std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  fabric::H2Guard g(4, 8);
  absl::Time t = absl::UnixEpoch();
  for (size_t i = 0; i < bytes.size(); i += chunk) {
    t += absl::Milliseconds(data[i % size]);
    (void)g.Feed(bytes.substr(i, chunk), t);
  }
  if (g.resets() > g.frames()) std::abort();
  return 0;
}
