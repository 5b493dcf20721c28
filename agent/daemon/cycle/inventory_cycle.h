// The inventory's cycle: full rescans and targeted refreshes, the trust check between them and
// the published snapshot, what the agent says of itself in health; BuildSnapshot (build.h) makes
// each snapshot, the store publishes it, and the publishers act on it. Loop thread only, but for
// store(), which any thread may read.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "agent/daemon/cycle/counters.h"
#include "agent/daemon/cycle/publisher.h"
#include "agent/daemon/cycle/snapshot.h"
#include "agent/hostfs/host_fs.h"
#include "agent/inventory/changes/event_log.h"
#include "agent/inventory/discovery/refresh.h"
#include "fabric/v1/health.pb.h"
#include "fabric/v1/select.pb.h"

namespace fabric {

struct CycleOptions {
  // The safety net's period, for the message that says events are missing.
  absl::Duration rescan_interval = absl::Minutes(5);
  // How long a vanished RDMA device is reported absent, and a link flap a health warning.
  absl::Duration event_window = absl::Hours(1);
};

// What a full rescan (InventoryCycle::Rescan) is for, named at each call.
struct RescanKind {
  // The config was just reloaded: publish even when the host is the same.
  bool policy_changed = false;
  // No event asked for it (periodic, reload): whatever it finds that the served inventory lacks
  // is drift of the targeted refreshes, logged and counted.
  bool safety_net = false;
};

class InventoryCycle {
 public:
  // `sysfs`, `procfs` and `counters` outlive the cycle.
  InventoryCycle(const HostFs* sysfs, const HostFs* procfs, CycleOptions options,
                 AgentCounters* counters);

  // Wiring, before the first inventory; each outlives the cycle (or is removed first).
  void AddNeighborSource(NeighborSource* source) { neighbors_.push_back(source); }
  void AddPublisher(Publisher* publisher) { publishers_.push_back(publisher); }
  void RemovePublisher(Publisher* publisher);
  // The policy the next publish uses; call Rescan with policy_changed to apply it.
  void SetPolicy(const v1::SelectionPolicy& policy) { policy_ = policy; }

  // The first full scan, published; its failure ends start-up.
  absl::Status First();
  // Builds and publishes a snapshot when the host, the policy or the agent's findings changed.
  // `drift_of`: a safety-net rescan ("rescan (periodic)"): the served inventory is what events
  // kept up to date, so each change it finds is one no event announced, or a targeted refresh
  // gone wrong; logged as such and counted. The full result wins.
  void Publish(std::optional<RefreshedHost> host, bool policy_changed,
               const std::string& drift_of = "");
  // Publish(std::nullopt, false): the host is the same, what the agent says of itself (health,
  // its sources, its publishers, neighbours) may not be.
  void Republish() { Publish(std::nullopt, false); }
  // A full rescan.
  void Rescan(const std::string& why, RescanKind kind = {});
  // What the events in `scope` changed: a targeted refresh, nothing for unrelated netdevs, or a
  // full rescan when the scope or the plan says so.
  void RefreshFor(const ChangeScope& scope, const std::string& why);
  // The kernel writes a netdev's GIDs from a work queue after the address or link event that
  // caused them, so the refresh for that event can come first. A refresh for netdev events that
  // found its RDMA devices' GID tables as they were reads them again after each of
  // kGidFollowUps, until they change: bounded, a few targeted reads per event batch.
  static constexpr absl::Duration kGidFollowUps[] = {absl::Milliseconds(200), absl::Seconds(1),
                                                     absl::Seconds(5)};
  // When the next follow-up is due (InfiniteFuture when none is).
  absl::Time gid_follow_up_at() const { return gid_follow_up_.at; }
  // Runs the follow-up when `now` is past gid_follow_up_at().
  void FollowUpGids(absl::Time now);

  // When an untrusted rescan is retried (InfiniteFuture when none is due).
  absl::Time stale_retry_at() const { return stale_retry_at_; }
  SnapshotStore& store() { return store_; }
  const SnapshotStore& store() const { return store_; }

 private:
  // A scan's result, full or targeted: published when trusted; else the last good one stays.
  // The policy's NCCL topology file onto a freshly discovered host (nccl_topo.h).
  void LayNcclTopology(v1::Host* host) const;
  void Accept(absl::StatusOr<RefreshedHost> host, const std::string& why, bool policy_changed,
              bool check_drift = false);
  std::vector<v1::Finding> AgentFindings(absl::Time now) const;
  // RefreshFor's work; `follow_up`: the index into kGidFollowUps to arm next, none past its end.
  void Targeted(const ChangeScope& scope, const std::string& why, size_t follow_up);
  void RepublishIfPublishersChanged(const std::string& before, absl::Time now);
  std::string PublisherFindingsKey(absl::Time now) const;

  const HostFs* sysfs_;
  const HostFs* procfs_;
  const CycleOptions opt_;
  AgentCounters* counters_;
  std::vector<NeighborSource*> neighbors_;
  std::vector<Publisher*> publishers_;
  v1::SelectionPolicy policy_;

  SnapshotStore store_;
  // The first inventory, for "GID table changed since start"; refreshed hosts share its devices.
  std::shared_ptr<const v1::Host> start_host_;
  EventLog events_;  // Each snapshot gets a copy.
  absl::Status last_scan_;
  // While rescans are not trusted (transient read failures): since when, how many retries so
  // far, when the next one runs, and the finding that says so.
  absl::Time stale_since_ = absl::InfiniteFuture();
  int stale_retries_ = 0;
  absl::Time stale_retry_at_ = absl::InfiniteFuture();
  std::optional<v1::Finding> stale_finding_;
  bool republishing_ = false;
  struct GidFollowUp {
    ChangeScope scope;  // The netdev events', planned again (the inventory may have moved).
    size_t next = 0;    // Into kGidFollowUps.
    absl::Time at = absl::InfiniteFuture();
  } gid_follow_up_;
};

}  // namespace fabric
