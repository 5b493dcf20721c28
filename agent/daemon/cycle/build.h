// The inventory cycle's pure core: the next snapshot from the last one and what changed. No I/O,
// no clock, no agent state: the cycle (inventory_cycle.cc) gathers the inputs, calls
// BuildSnapshot, publishes what it returns and hands it to the publishers (publisher.h).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "agent/daemon/cycle/snapshot.h"
#include "agent/inventory/changes/event_log.h"
#include "agent/inventory/discovery/refresh.h"
#include "fabric/v1/health.pb.h"
#include "fabric/v1/host.pb.h"
#include "fabric/v1/select.pb.h"

namespace fabric {

struct BuildInput {
  // The host a scan or a refresh produced, the agent's neighbours already laid on it; none when
  // only the policy or the agent's findings may have changed.
  std::optional<RefreshedHost> host;
  const v1::SelectionPolicy* policy = nullptr;  // Never null; copied into a snapshot built.
  // The config was (re)loaded: the pairing, rails and health are computed again.
  bool policy_changed = false;
  // What degrades the agent's answers without being the host's fault (sources, stale scans,
  // LLDP, InfiniBand neighbours), in a stable order.
  std::vector<v1::Finding> agent_findings;
  // The first inventory, for "GID table changed since start"; null: the host being built is it.
  std::shared_ptr<const v1::Host> start_host;
  // The agent's flaps, GID changes and absences so far (the previous snapshot's, or the log as
  // the cycle last kept it); the build records this change and expires what is past the window.
  EventLog events;
  absl::Duration event_window = absl::Hours(1);
  absl::Time now;
};

struct Built {
  // Null when nothing changed: the host, the policy and the agent's findings are as published.
  std::shared_ptr<const Snapshot> snapshot;
  // The event log after this build, kept by the cycle whether or not a snapshot was built.
  EventLog events;
  // DiffHosts from the previous snapshot's host (empty for the first, or for the same host).
  std::vector<v1::InventoryChange> changes;
  bool host_changed = false;
  // What the pairing and NFD labels read is as it was (SameRanking): they were kept, not
  // computed again, and the labels need not be rendered again.
  bool labels_same = false;
};

// `previous`: the snapshot now published (null before the first). A host in `input` is
// consumed: its rails and pairing are written into it.
Built BuildSnapshot(const Snapshot* previous, BuildInput input);

// A stable key of the agent's findings: equal keys, nothing to publish for them.
std::string FindingsKey(const std::vector<v1::Finding>& findings);

}  // namespace fabric
