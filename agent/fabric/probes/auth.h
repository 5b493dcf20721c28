// The shared secret of probe peers (--secret-file, --probe-secret-file) and the HMAC exchange
// that proves both sides know it without sending it:
//
//   client -> Hello{params, auth, client nonce}
//   server -> Challenge{server nonce, ServerMac}     the server proves itself first
//   client -> Proof{ClientMac}                        over the server's fresh nonce
//   server -> Accept | Reject
//
// Each MAC is HMAC-SHA256(secret, label || server nonce || the hello frame as encoded), the
// hello carrying the client's nonce and the test parameters. The labels differ, so one side's
// MAC never serves as the other's; the server's nonce is fresh per connection, so a recorded
// hello and proof fail on a new connection.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "agent/fabric/probes/wire.h"

namespace fabric::probes {

// Reads the secret: trailing newlines ("\n", "\r\n") trimmed; an empty or unreadable file, or
// one over 4 KiB, is an error naming the path.
absl::StatusOr<std::string> LoadSecret(const std::string& path);

// A fresh random nonce (OpenSSL's CSPRNG).
absl::StatusOr<wire::Nonce> RandomNonce();

wire::Mac ServerMac(std::string_view secret, const wire::Nonce& server_nonce,
                    const wire::Hello& hello);
wire::Mac ClientMac(std::string_view secret, const wire::Nonce& server_nonce,
                    const wire::Hello& hello);

// Constant time (CRYPTO_memcmp).
bool MacEqual(const wire::Mac& a, const wire::Mac& b);

}  // namespace fabric::probes
