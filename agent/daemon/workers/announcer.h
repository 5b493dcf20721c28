// The agent's side of announcing: accepts fabric-cni's hand-offs (SCM_RIGHTS over a Unix
// SOCK_SEQPACKET socket), runs every held interface's repeat schedule on one thread, and
// re-announces on request (the Announce RPC). Holding the pod's sockets means the agent never
// enters a pod's network namespace (no CAP_SYS_ADMIN).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/fabric/announce/announce.h"
#include "fabric/v1/agent.pb.h"

namespace fabric {

struct AnnouncerOptions {
  std::string socket;  // The hand-off socket; empty: hand-offs are not accepted.
  // How long an interface stays held after its schedule ends, for re-announcing. Held sockets pin
  // the pod's network namespace, so this is bounded; CNI DEL or the interface vanishing releases
  // it at once.
  absl::Duration hold = absl::Minutes(10);
  size_t max_held = 4096;     // Beyond this a hand-off is refused (the plugin runs it itself).
  size_t max_finished = 256;  // Released interfaces kept for ListAnnouncements.
  absl::Duration connection_timeout = absl::Seconds(1);
  announce::Plan host_plan;  // For interfaces of the agent's own netns (Announce RPC).
};

// Totals since the agent started, for metrics.
struct AnnouncerStats {
  uint64_t handoffs = 0;          // accepted from fabric-cni
  uint64_t handoffs_refused = 0;  // malformed, not allowed, or over max_held
  uint64_t arp_sent = 0;
  uint64_t na_sent = 0;
  uint64_t send_errors = 0;
  uint64_t conflicts = 0;             // addresses another host answered for
  uint64_t gateways_reachable = 0;    // gateway primings answered ...
  uint64_t gateways_unreachable = 0;  // ... and not
  uint64_t running = 0;               // interfaces with repeats pending now
  uint64_t held = 0;                  // interfaces held now (running or done)
};

class Announcer {
 public:
  // Binds the socket (replacing a stale one; a live one is AlreadyExists) and starts the thread.
  static absl::StatusOr<std::unique_ptr<Announcer>> Start(const AnnouncerOptions& options);
  // Stops the thread, unlinks the socket if it is still the one bound, and closes every held fd.
  ~Announcer();
  Announcer(const Announcer&) = delete;
  Announcer& operator=(const Announcer&) = delete;

  // Re-announces a held pod's interfaces (container_id) or an interface of this netns (ifname).
  // Returns after the first round went out (or a bound passed).
  absl::StatusOr<std::vector<v1::Announcement>> Announce(const v1::AnnounceRequest& req);
  std::vector<v1::Announcement> List(const std::string& container_id) const;
  AnnouncerStats Stats() const;

  struct Impl;

 private:
  explicit Announcer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace fabric
