// Announcing a (new) address to the fabric: gratuitous ARP for IPv4, unsolicited neighbour
// advertisement for IPv6, gateway priming and an optional RFC 5227 conflict probe. Shared by the
// CNI plugin (cni-hook/), the agent (which runs the repeats it is handed) and `fabricctl announce`.
//
// Layers, each testable on its own: frames.h, pure (build and parse Ethernet/ARP/ICMPv6 frames;
// table-driven tests, a fuzzed parser); link.h, the OS (packet sockets bound to an interface,
// interface facts, entering a netns); this file, the plan, the schedule and the runner that
// executes it over a Link.
#pragma once

#include <netinet/in.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/common/ip.h"
#include "agent/fabric/announce/mac.h"

namespace fabric::announce {

// When announcements go out, as offsets from the first one (which is at offset 0).
// Default: 0, 100 ms, 200 ms, 300 ms, 1 s, 5 s ("one at once, 3 more at 100 ms, then 1 s and 5 s").
struct Schedule {
  int fast_count = 3;                                      // repeats after the first
  absl::Duration fast_interval = absl::Milliseconds(100);  // between the fast repeats
  std::vector<absl::Duration> tail = {absl::Seconds(1), absl::Seconds(5)};  // offsets from start
  // Every offset in send order, starting with 0; sorted, duplicates removed.
  std::vector<absl::Duration> Offsets() const;
  absl::Status Validate() const;  // bounds: counts 0..100, intervals 1 ms..60 s, offsets <= 10 min
};

// What to do for one interface.
struct Plan {
  Schedule schedule;
  bool arp_reply_form = false;  // also send the ARP reply form (some peers want it); request always
  bool ipv6 = true;             // unsolicited NA for IPv6 addresses
  bool prime_gateway = true;    // ARP request / NS to each address's gateway, answer reported
  absl::Duration gateway_timeout = absl::Milliseconds(500);
  bool conflict_probe = false;  // RFC 5227 probe from 0.0.0.0 before the first announcement
  absl::Duration conflict_timeout = absl::Milliseconds(200);
};

struct Address {
  int family = AF_INET;  // AF_INET or AF_INET6
  in6_addr addr{};       // IPv4 in the first 4 bytes when family == AF_INET
  int prefix_len = 0;
  bool has_gateway = false;
  in6_addr gateway{};            // same layout as addr
  std::string ToString() const;  // "10.0.0.2/24 via 10.0.0.1", "2001:db8::2/64"
};

// "02:00:00:00:0a:01".
std::string MacString(const Mac& mac);

struct Target {
  std::string ifname;
  int ifindex = 0;
  // IFLA_LINK of a macvlan, macvtap, ipvlan, ipvtap or VLAN: its lower device, an index in the
  // namespace the interface was created in (the host's, for a pod's macvlan); 0 for other kinds.
  int parent_ifindex = 0;
  Mac mac{};
  std::vector<Address> addresses;
};

// What happened, for logs, the CNI plugin's stderr, the agent's API and metrics.
struct Report {
  int arp_sent = 0;  // gratuitous ARPs (both forms); probes and gateway requests not counted
  int na_sent = 0;   // unsolicited NAs; gateway NSs not counted
  int send_errors = 0;
  std::string last_error;  // also notes that are not send errors (IPv6 DAD failed or too slow)
  // Per gateway: reachable (answered within gateway_timeout) or not; filled when primed.
  struct Gateway {
    std::string address;
    bool reachable = false;
    absl::Duration rtt;
    Mac mac{};
  };
  std::vector<Gateway> gateways;
  // Per address probed for conflicts: the MAC that claimed it, when one did.
  struct Conflict {
    std::string address;
    Mac owner{};
  };
  std::vector<Conflict> conflicts;
};

// The interface seam: frames out of and into one interface. PacketLink (link.h) is the real one;
// tests may substitute their own.
class Link {
 public:
  virtual ~Link() = default;
  // NotFound means the interface is gone (ENXIO/ENODEV): the job ends. Other errors are counted
  // and the job goes on (the interface may come back up).
  virtual absl::Status Send(const std::vector<uint8_t>& frame) = 0;
  // Non-blocking: the next received frame (ARP, or ICMPv6 neighbour discovery), or nullopt-like
  // NotFound when none is queued. Errors other than "nothing queued" are returned as is.
  virtual absl::StatusOr<std::vector<uint8_t>> TryReceive() = 0;
  // An fd that becomes readable when TryReceive has something, for poll(); -1 when none.
  virtual int poll_fd() const = 0;
  // Whether an IPv6 address on the interface is still tentative (DAD running, not optimistic):
  // no NA may be sent for it yet. FailedPrecondition: DAD failed, the job gives the address up.
  // Other errors: the job notes them and asks again later, as for a tentative address.
  virtual absl::StatusOr<bool> Tentative(const in6_addr& addr) = 0;
};

// One interface's announcements as a step machine, so one thread (the agent's) can run many and a
// caller can do just the first step synchronously (the CNI plugin before ADD returns).
//
// Offset 0: with conflict_probe, one RFC 5227 probe per IPv4 address, then conflict_timeout of
// listening (the whole schedule then counts from the end of it); an address another MAC claims
// is reported in Report::conflicts and never announced. Each offset: per IPv4 address the ARP
// request form (plus the reply form), per IPv6 address an NA unless Tentative(): those are
// re-checked at each offset and every 100 ms up to 3 s after start (later offsets still check),
// then given up with a note. Rounds that are overdue collapse into one. Gateway priming (one
// ARP request / NS per address with a gateway) is the step after the first round (an IPv6
// address's NS follows its first NA); answers are matched until gateway_timeout.
// Not thread-safe: one thread steps a job.
class Job {
 public:
  // `start` is the time of offset 0 (CLOCK_MONOTONIC based absl::Time from MonotonicNow()).
  // `first_done`: the offset-0 round was already sent by someone else (a hand-off).
  Job(Target target, Plan plan, std::unique_ptr<Link> link, absl::Time start,
      bool first_done = false);
  // Does what is due at `now` without blocking; returns when it wants to run next
  // (absl::InfiniteFuture() once done).
  absl::Time Step(absl::Time now);
  bool done() const;
  void Cancel();  // no more sends; done() becomes true
  int poll_fd() const;
  const Report& report() const;
  const Target& target() const;

  ~Job();
  Job(Job&&) noexcept;
  Job& operator=(Job&&) noexcept;
  // Whether the offset-0 round went out (true from the start with first_done). With
  // conflict_probe that takes conflict_timeout; a caller that only wants the first round (the
  // CNI plugin before its hand-off) steps until this holds. The Step that sends the round does
  // not prime gateways: that is the next Step, so it lands with whoever holds the repeats.
  bool first_round_sent() const;
  // The link the job sends on (for the hand-off of its fds).
  Link& link();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// CLOCK_MONOTONIC as absl::Time (the same in every network namespace, so a start time can be
// handed from the plugin to the agent).
absl::Time MonotonicNow();

// Runs `job` to the end on this thread, sleeping or polling between steps (fabricctl, the detached
// child). Returns early when `cancelled` (if given) turns true.
Report RunToCompletion(Job& job, const std::function<bool()>& cancelled = nullptr);

}  // namespace fabric::announce
