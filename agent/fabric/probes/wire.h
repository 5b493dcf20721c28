// The out-of-band messages of a probe (over TCP, perftest's port 18515 by default): the client's
// hello with the test parameters, the server's accept or reject, each side's QP endpoints (QP
// number, PSN, GID, LID, rkey, address, size), barriers and the closing report. Encoding and
// decoding are pure so they can be tested and fuzzed: every message a peer sends is untrusted.
//
// Frame: magic "FPRB" (u32), version (u16), type (u16), body length (u32), body. Integers are
// big-endian. A body is at most kMaxBody bytes and must be consumed exactly.
//
// With a shared secret (auth.h) the hello carries the client's nonce and two more messages run
// before the accept: Challenge (server) and Proof (client). A hello without a secret is the same
// bytes as before they existed, so the version stays 1.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/fabric/probes/params.h"

namespace fabric::probes::wire {

inline constexpr uint32_t kMagic = 0x46505242;  // "FPRB"
inline constexpr uint16_t kVersion = 1;
inline constexpr size_t kHeaderSize = 12;
inline constexpr uint32_t kMaxBody = 64 * 1024;
inline constexpr size_t kMaxText = 1024;  // reasons and messages

enum class Type : uint16_t {
  kHello = 1,
  kAccept = 2,
  kReject = 3,
  kQpInfo = 4,
  kSync = 5,
  kDone = 6,
  kChallenge = 7,
  kProof = 8,
};

inline constexpr size_t kNonceSize = 16;
inline constexpr size_t kMacSize = 32;  // HMAC-SHA256
using Nonce = std::array<uint8_t, kNonceSize>;
using Mac = std::array<uint8_t, kMacSize>;

// Client -> server: what to run, and on which of the server's RDMA devices (empty: the
// server's own choice). Rail-aligned probes ask for the device of the same name as theirs.
// `auth`: the client holds a shared secret and sends its fresh `nonce` (auth.h).
struct Hello {
  ProbeParams params;
  std::string device;
  bool auth = false;
  Nonce nonce{};
  bool operator==(const Hello&) const = default;
};

// What an RDMA device name may hold (the kernel allows up to 63 bytes; ours are [A-Za-z0-9_.-]).
bool IsValidDeviceName(std::string_view name);

// Server -> client: the test will be served. `cm_port` is the rdma_cm listener's port with -R.
struct Accept {
  uint16_t cm_port = 0;
  bool operator==(const Accept&) const = default;
};

// Either side: the test will not run (bad parameters, no device, set-up failed), and why.
struct Reject {
  std::string reason;
  bool operator==(const Reject&) const = default;
};

struct QpEndpoint {
  uint32_t qpn = 0;  // 24 bits
  uint32_t psn = 0;  // 24 bits
  std::array<uint8_t, 16> gid{};
  uint16_t lid = 0;
  uint32_t rkey = 0;
  uint64_t addr = 0;
  uint64_t size = 0;  // bytes the peer may access at addr
  bool operator==(const QpEndpoint&) const = default;
};

// One side's queue pairs. `mtu` is its port's active MTU (enum ibv_mtu, 1..5); both use the
// smaller. `global` says it addresses with a GRH (RoCE, or -x on InfiniBand).
struct QpInfo {
  uint8_t mtu = 0;
  bool global = false;
  std::vector<QpEndpoint> qps;
  bool operator==(const QpInfo&) const = default;
};

// A barrier; both sides send the same phase.
struct Sync {
  uint32_t phase = 0;
  bool operator==(const Sync&) const = default;
};

// End of the test from one side: ok, messages it completed, and an error text when not ok.
struct Done {
  bool ok = true;
  uint64_t count = 0;
  std::string message;
  bool operator==(const Done&) const = default;
};

// Server -> client, after an authenticating hello: the server's fresh nonce and its proof of the
// secret (auth.h ServerMac).
struct Challenge {
  Nonce nonce{};
  Mac mac{};
  bool operator==(const Challenge&) const = default;
};

// Client -> server: the client's proof of the secret over the server's nonce (ClientMac).
struct Proof {
  Mac mac{};
  bool operator==(const Proof&) const = default;
};

using Message = std::variant<Hello, Accept, Reject, QpInfo, Sync, Done, Challenge, Proof>;

Type TypeOf(const Message& m);
std::string_view TypeName(Type t);

// A whole frame (header and body).
std::vector<uint8_t> Encode(const Message& m);

struct Header {
  Type type = Type::kHello;
  uint32_t length = 0;
};
// Checks magic, version, a known type and the length bound.
absl::StatusOr<Header> DecodeHeader(std::span<const uint8_t> bytes);
// Decodes a body of `type`; every field is range-checked (Hello's parameters with
// ValidateParams) and trailing bytes are an error.
absl::StatusOr<Message> DecodeBody(Type type, std::span<const uint8_t> body);
// A whole frame, exactly.
absl::StatusOr<Message> Decode(std::span<const uint8_t> frame);

}  // namespace fabric::probes::wire
