// Feeds arbitrary bytes to the out-of-band decoder: a peer controls every byte of it. What
// decodes must re-encode to a frame that decodes to the same message; a hello's MACs (auth.h)
// depend only on the decoded message, so both sides compute the same ones.
#include <cstdint>
#include <cstdlib>

#include "agent/fabric/probes/auth.h"
#include "agent/fabric/probes/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fabric::probes::wire;
  absl::StatusOr<Message> m = Decode(std::span<const uint8_t>(data, size));
  if (!m.ok()) return 0;
  absl::StatusOr<Message> again = Decode(Encode(*m));
  if (!again.ok() || !(*again == *m)) std::abort();
  if (const auto* h = std::get_if<Hello>(&*m)) {
    const Nonce server{};
    const Hello& h2 = std::get<Hello>(*again);
    if (!fabric::probes::MacEqual(fabric::probes::ClientMac("k", server, *h),
                                  fabric::probes::ClientMac("k", server, h2))) {
      std::abort();
    }
  }
  return 0;
}
