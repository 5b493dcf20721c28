#include "agent/daemon/cycle/inventory_cycle.h"

#include <algorithm>
#include <iterator>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/common/log.h"
#include "agent/daemon/cycle/build.h"
#include "agent/daemon/cycle/scan_trust.h"
#include "agent/inventory/changes/changes.h"
#include "agent/inventory/discovery/discovery.h"
#include "agent/inventory/topology/nccl_topo.h"

namespace fabric {
namespace {

// Whether `devices` have the same GID tables in `a` and `b` (one in neither counts as same).
bool DevicesKeepGids(const v1::Host& a, const v1::Host& b, const std::set<std::string>& devices) {
  auto find = [](const v1::Host& h, const std::string& name) -> const v1::RdmaDevice* {
    for (const v1::RdmaDevice& d : h.rdma_devices()) {
      if (d.name() == name) return &d;
    }
    return nullptr;
  };
  for (const std::string& name : devices) {
    const v1::RdmaDevice* da = find(a, name);
    const v1::RdmaDevice* db = find(b, name);
    if (da == nullptr || db == nullptr ? da != db : !SameGidTables(*da, *db)) return false;
  }
  return true;
}

}  // namespace

InventoryCycle::InventoryCycle(const HostFs* sysfs, const HostFs* procfs, CycleOptions options,
                               AgentCounters* counters)
    : sysfs_(sysfs), procfs_(procfs), opt_(options), counters_(counters) {}

void InventoryCycle::RemovePublisher(Publisher* publisher) {
  publishers_.erase(std::remove(publishers_.begin(), publishers_.end(), publisher),
                    publishers_.end());
}

// The agent's own findings: what degrades its answers without being the host's fault.
std::vector<v1::Finding> InventoryCycle::AgentFindings(absl::Time now) const {
  std::vector<v1::Finding> out;
  auto add = [&](v1::Severity sev, const std::string& msg) {
    v1::Finding f;
    f.set_severity(sev);
    f.set_check("agent");
    f.set_message(msg);
    out.push_back(std::move(f));
  };
  if (!counters_->route_events.load()) {
    add(v1::SEVERITY_WARNING,
        absl::StrCat("route netlink events unavailable: changes are seen only by the periodic "
                     "rescan (every ",
                     absl::FormatDuration(opt_.rescan_interval), ")"));
  }
  if (!last_scan_.ok()) {
    add(v1::SEVERITY_UNKNOWN, absl::StrCat("the last rescan failed (", last_scan_.message(),
                                           "); serving the previous inventory"));
  }
  if (stale_finding_) out.push_back(*stale_finding_);
  for (const NeighborSource* n : neighbors_) n->Findings(now, &out);
  for (const Publisher* p : publishers_) p->Findings(now, &out);
  return out;
}

absl::Status InventoryCycle::First() {
  auto host = Discover(*sysfs_, *procfs_);
  if (!host.ok()) return host.status();
  LayNcclTopology(&*host);
  ++counters_->rescans;
  counters_->last_scan_ok_unix_ns = absl::ToUnixNanos(absl::Now());
  Log(LogLevel::kInfo, "inventory: ", host->rdma_devices_size(), " RDMA devices, ",
      host->netdevs_size(), " netdevs, ", host->accelerators_size(), " accelerators, ",
      host->problems_size(), " discovery problems (", sysfs_->root(), ")");
  RefreshedHost first = ScannedHost(*std::move(host));
  start_host_ = first.host;  // Refreshed hosts share its devices: unchanged ones are skipped.
  Publish(std::move(first), true);
  return absl::OkStatus();
}

void InventoryCycle::Publish(std::optional<RefreshedHost> host, bool policy_changed,
                             const std::string& drift_of) {
  const auto cur = store_.Current();
  const absl::Time now = absl::Now();
  // Neighbours are the agent's, not discovery's: laid onto every host it publishes, and a
  // change of them alone is a new host sharing everything else.
  if (host) {
    for (NeighborSource* n : neighbors_) n->Follow(*host->host, now);
  } else if (cur != nullptr &&
             std::any_of(neighbors_.begin(), neighbors_.end(),
                         [&](const NeighborSource* n) { return !n->Shows(*cur->host); })) {
    host = ShareHost(cur->host);
  }
  if (host) {
    for (const NeighborSource* n : neighbors_) n->Lay(host->host.get());
  }
  BuildInput in;
  in.host = std::move(host);
  in.policy = &policy_;
  in.policy_changed = policy_changed;
  in.agent_findings = AgentFindings(now);
  in.start_host = start_host_;
  in.events = std::move(events_);
  in.event_window = opt_.event_window;
  in.now = now;
  Built built = BuildSnapshot(cur.get(), std::move(in));
  events_ = std::move(built.events);
  // What the publishers say of themselves before they act: a change after is published at once.
  const std::string publishers_before = PublisherFindingsKey(now);
  if (built.snapshot == nullptr) {
    if (cur == nullptr) return;
    for (Publisher* pub : publishers_) pub->Retry(*cur, now);
    RepublishIfPublishersChanged(publishers_before, now);
    return;
  }
  for (const v1::InventoryChange& c : built.changes) {
    Log(LogLevel::kInfo, "change: ", v1::InventoryChange::Kind_Name(c.kind()), " ", c.subject(),
        c.old_value().empty() && c.new_value().empty() ? "" : " ", c.old_value(),
        c.old_value().empty() ? "" : " -> ", c.new_value(),
        drift_of.empty() ? "" : absl::StrCat(" (", drift_of, " found what no event announced)"));
  }
  if (!drift_of.empty()) counters_->refresh_drift.fetch_add(built.changes.size());
  store_.Publish(built.snapshot);
  const Publication p{*built.snapshot, cur.get(), built, now};
  for (Publisher* pub : publishers_) pub->Publish(p);
  RepublishIfPublishersChanged(publishers_before, now);
}

// A publisher that just failed (or recovered) changes what health says: publish that now, not
// at the next event. Once: the publish it makes does not come back here.
void InventoryCycle::RepublishIfPublishersChanged(const std::string& before, absl::Time now) {
  if (republishing_ || PublisherFindingsKey(now) == before) return;
  republishing_ = true;
  Republish();
  republishing_ = false;
}

std::string InventoryCycle::PublisherFindingsKey(absl::Time now) const {
  std::vector<v1::Finding> out;
  for (const Publisher* p : publishers_) p->Findings(now, &out);
  return FindingsKey(out);
}

void InventoryCycle::Accept(absl::StatusOr<RefreshedHost> host, const std::string& why,
                            bool policy_changed, bool check_drift) {
  stale_retry_at_ = absl::InfiniteFuture();  // Only an untrusted scan schedules a retry.
  if (!host.ok()) {
    if (last_scan_.ok()) Log(LogLevel::kWarning, "rescan failed: ", host.status().message());
    ++counters_->rescan_errors;
    last_scan_ = host.status();
    Publish(std::nullopt, policy_changed);
    return;
  }
  last_scan_ = absl::OkStatus();
  const auto cur = store_.Current();
  const ScanTrust trust = cur != nullptr ? JudgeScan(*cur->host, *host->host) : ScanTrust{};
  const absl::Time now = absl::Now();
  if (!trust.trusted) {
    // A hole from a read that may succeed next time is no evidence that anything is gone: keep
    // the last good inventory (no new generation, no NFD labels or health from this scan).
    ++counters_->stale_scans;
    if (stale_since_ == absl::InfiniteFuture()) {
      stale_since_ = now;
      counters_->stale_since_unix_ns = absl::ToUnixNanos(now);
      const v1::FieldProblem& p = trust.new_transient.front();
      Log(LogLevel::kWarning, "rescan (", why, ") not published: ", trust.new_transient.size(),
          " reads failed for now, first ", p.path(), ": ", p.reason(),
          "; serving the last good inventory and retrying");
    }
    stale_finding_ = StaleFinding(stale_since_, trust);
    stale_retry_at_ = now + StaleRetryDelay(++stale_retries_, opt_.rescan_interval);
    Publish(std::nullopt, policy_changed);
    return;
  }
  if (stale_finding_) {
    Log(LogLevel::kInfo, "inventory no longer stale (stale since ",
        absl::FormatTime(absl::RFC3339_sec, stale_since_, absl::UTCTimeZone()), ", ",
        stale_retries_, " rescans not published)");
    stale_finding_.reset();
    stale_since_ = absl::InfiniteFuture();
    stale_retries_ = 0;
    counters_->stale_since_unix_ns = 0;
  }
  counters_->last_scan_ok_unix_ns = absl::ToUnixNanos(now);
  Publish(*std::move(host), policy_changed,
          check_drift ? absl::StrCat("rescan (", why, ")") : std::string());
}

void InventoryCycle::Rescan(const std::string& why, RescanKind kind) {
  ++counters_->rescans;
  const absl::Time start = absl::Now();
  auto host = Discover(*sysfs_, *procfs_);
  if (host.ok()) LayNcclTopology(&*host);
  const absl::Duration took = absl::Now() - start;
  Log(LogLevel::kDebug, "rescan (", why, ") took ", absl::FormatDuration(took));
  counters_->refreshes_full.fetch_add(1);
  counters_->refresh_full_ns.fetch_add(absl::ToInt64Nanoseconds(took));
  // Drift only against a good served inventory (not one kept while rescans were untrusted).
  absl::StatusOr<RefreshedHost> scanned =
      host.ok() ? absl::StatusOr<RefreshedHost>(ScannedHost(*std::move(host))) : host.status();
  Accept(std::move(scanned), why, kind.policy_changed,
         kind.safety_net && last_scan_.ok() && !stale_finding_);
}

void InventoryCycle::LayNcclTopology(v1::Host* host) const {
  const auto cur = store_.Current();
  ApplyNcclTopology(
      policy_.nccl_topo_file(),
      cur != nullptr && cur->host->has_nccl_topology() ? &cur->host->nccl_topology() : nullptr,
      host);
}

void InventoryCycle::RefreshFor(const ChangeScope& scope, const std::string& why) {
  const bool netdevs = !scope.netdevs().empty() || !scope.ifindexes().empty();
  Targeted(scope, why, netdevs ? 0 : std::size(kGidFollowUps));
}

void InventoryCycle::FollowUpGids(absl::Time now) {
  if (now < gid_follow_up_.at) return;
  GidFollowUp f = std::exchange(gid_follow_up_, GidFollowUp{});
  Targeted(f.scope, "GID tables read again after netdev events", f.next);
}

void InventoryCycle::Targeted(const ChangeScope& scope, const std::string& why, size_t follow_up) {
  const auto cur = store_.Current();
  // Targeted refreshes splice into a good inventory; anything else reads it all.
  if (cur == nullptr || scope.full() || !last_scan_.ok() || stale_finding_) {
    return Rescan(scope.full() ? absl::StrCat(why, ": ", scope.full_why()) : why);
  }
  const absl::Time start = absl::Now();
  const RefreshPlan plan = PlanRefresh(
      *cur->host, scope, [&](const std::string& name) { return LookUpNetdev(*sysfs_, name); });
  if (plan.full) return Rescan(absl::StrCat(why, ": ", plan.why));
  if (plan.empty()) {
    counters_->refreshes_skipped.fetch_add(1);
    Log(LogLevel::kDebug, "nothing in the inventory depends on it (", why, ")");
    return;
  }
  auto host = Refresh(*sysfs_, *procfs_, cur->host, plan);
  if (absl::IsFailedPrecondition(host.status())) {
    return Rescan(absl::StrCat(why, ": ", host.status().message()));
  }
  const absl::Duration took = absl::Now() - start;
  Log(LogLevel::kDebug, "targeted refresh of ", plan.why, " (", why, ") took ",
      absl::FormatDuration(took));
  counters_->refreshes_targeted.fetch_add(1);
  counters_->refresh_targeted_ns.fetch_add(absl::ToInt64Nanoseconds(took));
  if (follow_up < std::size(kGidFollowUps) && host.ok() &&
      DevicesKeepGids(*cur->host, *host->host, plan.devices)) {
    gid_follow_up_.scope.Merge(scope);
    gid_follow_up_.next = follow_up + 1;
    gid_follow_up_.at = absl::Now() + kGidFollowUps[follow_up];
  }
  Accept(std::move(host), why, false);
}

}  // namespace fabric
