// Feeds arbitrary bytes to the out-of-band decoder: a peer controls every byte of it. What
// decodes must re-encode to a frame that decodes to the same message.
#include <cstdint>
#include <cstdlib>

#include "probes/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fabric::probes::wire;
  absl::StatusOr<Message> m = Decode(std::span<const uint8_t>(data, size));
  if (!m.ok()) return 0;
  absl::StatusOr<Message> again = Decode(Encode(*m));
  if (!again.ok() || !(*again == *m)) std::abort();
  return 0;
}
