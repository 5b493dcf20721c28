// The agent's counters of its own work, written by the loop and the inventory cycle, read by
// metrics scrapes on another thread (hence atomics).
#pragma once

#include <atomic>
#include <cstdint>

#include "absl/time/time.h"

namespace fabric {

// The agent loop's counters; written on the loop, read by scrapes.
struct AgentCounters {
  std::atomic<uint64_t> rescans{0};
  std::atomic<uint64_t> rescan_errors{0};
  std::atomic<uint64_t> netlink_resyncs{0};
  std::atomic<int64_t> last_scan_ok_unix_ns{0};
  // Rescans not published for transient read failures; since when the inventory is stale (0:
  // it is not).
  std::atomic<uint64_t> stale_scans{0};
  std::atomic<int64_t> stale_since_unix_ns{0};
  // LLDP (LldpListener's counters, copied after each drain: scrapes read them).
  std::atomic<uint64_t> lldp_frames{0};
  std::atomic<uint64_t> lldp_malformed{0};
  std::atomic<uint64_t> lldp_dropped{0};
  std::atomic<uint64_t> lldp_listening{0};
  std::atomic<bool> route_events{false};
  std::atomic<bool> uevents{false};
  // Refreshes by kind (full: Discover; targeted: a splice; skipped: nothing depended on the
  // events), their time, and what full rescans found that no targeted refresh had.
  std::atomic<uint64_t> refreshes_full{0};
  std::atomic<uint64_t> refreshes_targeted{0};
  std::atomic<uint64_t> refreshes_skipped{0};
  std::atomic<int64_t> refresh_full_ns{0};
  std::atomic<int64_t> refresh_targeted_ns{0};
  std::atomic<uint64_t> refresh_drift{0};
  absl::Time started = absl::Now();
};

}  // namespace fabric
