// The hand-off of an announcement schedule from the CNI plugin to the agent, which outlives it.
// The plugin sends the first round itself, then passes the already-bound sockets of the pod's
// interface (SCM_RIGHTS) with a small JSON message over a Unix SOCK_SEQPACKET socket; the agent
// runs the repeats without entering the pod's network namespace (no CAP_SYS_ADMIN needed) and
// answers with one JSON line. DEL sends a cancel for the container.
//
// No protobuf or gRPC here: the plugin links this and must start in well under a millisecond.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/fabric/announce/announce.h"

namespace fabric::announce {

inline constexpr char kDefaultHandoffSocket[] = "/run/fabric-agent/announce.sock";

// The agent's hand-off socket for --announce-socket=auto, in the directory of its API socket:
// announce.sock beside agent.sock (the default deployment, kDefaultHandoffSocket), else
// <stem>.announce.sock for <stem>[.sock], so agents whose sockets share a directory do not
// share a hand-off socket.
std::string HandoffSocketBeside(std::string_view agent_socket);

struct Handoff {
  enum class Kind { kAnnounce, kCancel };
  Kind kind = Kind::kAnnounce;
  std::string container_id;  // CNI_CONTAINERID: what a later cancel names
  std::string netns;         // CNI_NETNS, for logs only
  Target target;             // kCancel: only target.ifname (optional: that interface only)
  Plan plan;
  absl::Time start;        // MonotonicNow() of the first round
  bool first_done = true;  // the plugin already sent offset 0
};

// Fds travelling with a kAnnounce: [0] the packet socket bound to the pod's interface,
// [1] (optional) a NETLINK_ROUTE socket opened in the pod's netns (IPv6 DAD state).
std::string EncodeHandoff(const Handoff& h);
// Strict: unknown kinds, bad addresses, out-of-range numbers and schedules are errors.
absl::StatusOr<Handoff> DecodeHandoff(std::string_view bytes);

// Connects to `socket_path`, sends `h` with `fds` and waits for the agent's answer, all within
// `timeout`. OK means the agent owns the schedule now (the caller may close its copies of the fds).
absl::Status SendHandoff(const std::string& socket_path, const Handoff& h,
                         const std::vector<int>& fds, absl::Duration timeout);

// The agent's one-line answer: {"ok":true} or {"ok":false,"error":"..."}.
std::string EncodeHandoffAnswer(const absl::Status& status);

}  // namespace fabric::announce
