// Whether a rescan may replace the published inventory. A read that failed for a reason that says
// nothing about the host (EMFILE, ENOMEM, EIO, EACCES: FieldProblem.transient) leaves a hole that
// looks like a removed device, port or netdev; publishing it would tell every watcher a lie. Such a
// rescan is not published: the agent keeps serving the last good inventory, marked stale, and
// retries soon. Pure functions, so that the daemon's loop only wires them up.
#pragma once

#include <vector>

#include "absl/time/time.h"
#include "fabric/v1/health.pb.h"
#include "fabric/v1/host.pb.h"

namespace fabric {

struct ScanTrust {
  bool trusted = true;
  // The rescan's transient problems that the published host does not have (same field and path),
  // in discovery order. A file that is unreadable for good (EACCES in a restricted container)
  // is in the published host too and blocks nothing.
  std::vector<v1::FieldProblem> new_transient;
};

// Judges `scan` against the host now published.
ScanTrust JudgeScan(const v1::Host& published, const v1::Host& scan);

// The delay before the `retry`-th retry (from 1) of an untrusted rescan: 0.5 s doubling up to
// 30 s, and never longer than `rescan_interval`, the periodic rescan's.
absl::Duration StaleRetryDelay(int retry, absl::Duration rescan_interval);
inline constexpr absl::Duration kStaleRetryFirst = absl::Milliseconds(500);
inline constexpr absl::Duration kStaleRetryMax = absl::Seconds(30);

// The health finding while the inventory is stale: check "inventory_stale", WARNING, "inventory
// stale since <RFC 3339 time>: <path>: <reason> (N failed reads); serving the last good
// inventory", naming the first new transient problem of the latest rescan (`why`).
v1::Finding StaleFinding(absl::Time since, const ScanTrust& why);

}  // namespace fabric
