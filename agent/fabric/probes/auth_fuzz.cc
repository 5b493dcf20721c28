// Feeds arbitrary bytes to both ends of the shared-secret hello (auth.h) as a peer would send
// them, with a fixed secret. The first byte picks the side under attack; the rest is the peer's
// byte stream, cut into frames the way Channel::Recv does (DecodeHeader on 12 bytes, a body of
// the length it allows, DecodeBody):
//
//   even: the responder (ProbeServer::Authenticate). It reads a hello, answers a challenge over
//         kServerNonce, reads a proof and accepts it when MacEqual(proof, ClientMac(...)).
//   odd:  the client (ProveSecret). Its hello carries kClientNonce; it reads a challenge and
//         accepts it when MacEqual(challenge.mac, ServerMac(...)).
//
// It aborts on a crash (ASan/UBSan in the fuzz build), a body allocation over kMaxBody, a hello
// that does not re-encode to the bytes received (the two sides MAC their own encodings, so they
// must agree), a responder's MAC that would pass as the client's proof (reflection), a rejection
// text with control characters (forged log lines), a MAC of auth.cc that differs from an
// HMAC-SHA256 computed here without it over the labelled nonce and the hello bytes (one that missed
// a field, the label or the nonce would let a replay through), and an accepted forgery: anything
// accepted must equal that MAC byte for byte (a compare that stopped early fails it). Corpus
// (agent/fabric/probes/testdata/auth_fuzz, made with auth.cc and wire.cc): for the responder, a
// valid hello and proof for kServerNonce, the same with the proof's last byte wrong, truncated,
// recorded under another nonce (a replay) and with the challenge's MAC reflected; for the client, a
// valid challenge for its hello, the same with the last byte wrong, truncated, one recorded for a
// hello with another client nonce (a replay) and a rejection.
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "agent/fabric/probes/auth.h"
#include "agent/fabric/probes/wire.h"

namespace {

namespace wire = fabric::probes::wire;

constexpr std::string_view kSecret = "fuzz-cluster-secret";
constexpr wire::Nonce kServerNonce = {0x5e, 0x72, 0x76, 0x65, 0x72, 0x2d, 0x6e, 0x6f,
                                      0x6e, 0x63, 0x65, 0x2d, 0x30, 0x30, 0x30, 0x31};
constexpr wire::Nonce kClientNonce = {0x63, 0x6c, 0x69, 0x65, 0x6e, 0x74, 0x2d, 0x6e,
                                      0x6f, 0x6e, 0x63, 0x65, 0x2d, 0x30, 0x30, 0x31};

void Check(bool ok) {
  if (!ok) std::abort();
}

// The peer's bytes, read frame by frame as Channel::Recv reads them off the socket.
class Stream {
 public:
  explicit Stream(std::span<const uint8_t> in) : in_(in) {}

  // The next frame's message and its bytes; nullopt where the receiver would fail (a bad
  // header or body, or the peer closing early).
  std::optional<wire::Message> Next(std::vector<uint8_t>* frame) {
    if (in_.size() < wire::kHeaderSize) return std::nullopt;
    absl::StatusOr<wire::Header> h = wire::DecodeHeader(in_.first(wire::kHeaderSize));
    if (!h.ok()) return std::nullopt;
    // Channel::Recv allocates the body before reading it: the header alone bounds it.
    Check(h->length <= wire::kMaxBody);
    std::vector<uint8_t> body(h->length);
    if (in_.size() - wire::kHeaderSize < body.size()) return std::nullopt;
    std::copy_n(in_.data() + wire::kHeaderSize, body.size(), body.data());  // Empty: no-op.
    const std::span<const uint8_t> whole = in_.first(wire::kHeaderSize + body.size());
    in_ = in_.subspan(whole.size());
    absl::StatusOr<wire::Message> m = wire::DecodeBody(h->type, body);
    if (!m.ok()) return std::nullopt;
    frame->assign(whole.begin(), whole.end());
    return *std::move(m);
  }

 private:
  std::span<const uint8_t> in_;
};

// HMAC-SHA256(secret, label || 0 || nonce || hello frame), the construction auth.h documents,
// computed without auth.cc so that a bug there is not checked against itself.
wire::Mac Reference(std::string_view label, const wire::Nonce& nonce,
                    const std::vector<uint8_t>& hello_frame) {
  std::vector<uint8_t> data(label.begin(), label.end());
  data.push_back(0);
  data.insert(data.end(), nonce.begin(), nonce.end());
  data.insert(data.end(), hello_frame.begin(), hello_frame.end());
  wire::Mac mac{};
  unsigned int len = 0;
  Check(HMAC(EVP_sha256(), kSecret.data(), static_cast<int>(kSecret.size()), data.data(),
             data.size(), mac.data(), &len) != nullptr &&
        len == mac.size());
  return mac;
}

void CheckText(const std::string& text) {
  for (char c : text) Check(static_cast<unsigned char>(c) >= 0x20 && c != 0x7f);
}

void AttackServer(Stream& peer) {
  std::vector<uint8_t> hello_frame;
  std::optional<wire::Message> m = peer.Next(&hello_frame);
  if (!m) return;
  const auto* hello = std::get_if<wire::Hello>(&*m);
  if (hello == nullptr || !hello->auth) return;  // refused: not a hello, or no secret
  Check(wire::Encode(*hello) == hello_frame);
  const wire::Mac server_mac = fabric::probes::ServerMac(kSecret, kServerNonce, *hello);
  const wire::Mac expect = fabric::probes::ClientMac(kSecret, kServerNonce, *hello);
  Check(server_mac == Reference("fabric-probe responder", kServerNonce, hello_frame));
  Check(expect == Reference("fabric-probe client", kServerNonce, hello_frame));
  // The challenge the responder sends must never pass as the client's proof.
  Check(!fabric::probes::MacEqual(server_mac, expect));
  std::vector<uint8_t> proof_frame;
  m = peer.Next(&proof_frame);
  if (!m) return;
  const auto* proof = std::get_if<wire::Proof>(&*m);
  if (proof == nullptr || !fabric::probes::MacEqual(proof->mac, expect)) return;
  // Accepted: it must be the real MAC over this very hello and the responder's nonce.
  Check(proof->mac == expect);
}

void AttackClient(Stream& peer) {
  wire::Hello hello;
  hello.auth = true;
  hello.nonce = kClientNonce;
  const std::vector<uint8_t> hello_frame = wire::Encode(hello);
  std::vector<uint8_t> frame;
  std::optional<wire::Message> m = peer.Next(&frame);
  if (!m) return;
  if (const auto* r = std::get_if<wire::Reject>(&*m)) {
    CheckText(r->reason);  // fabric-probe prints it
    return;
  }
  const auto* c = std::get_if<wire::Challenge>(&*m);
  if (c == nullptr) return;
  const wire::Mac expect = fabric::probes::ServerMac(kSecret, c->nonce, hello);
  Check(expect == Reference("fabric-probe responder", c->nonce, hello_frame));
  if (!fabric::probes::MacEqual(c->mac, expect)) return;
  // Accepted: the responder's MAC over this client's hello (its nonce) and the given nonce.
  Check(c->mac == expect);
  // What the client sends back must differ from what it was given.
  Check(!fabric::probes::MacEqual(fabric::probes::ClientMac(kSecret, c->nonce, hello), c->mac));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  Stream peer(std::span<const uint8_t>(data + 1, size - 1));
  if ((data[0] & 1) == 0) {
    AttackServer(peer);
  } else {
    AttackClient(peer);
  }
  return 0;
}
