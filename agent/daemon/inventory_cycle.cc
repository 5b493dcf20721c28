// The inventory's cycle: full rescans, targeted refreshes, the trust check between them and the
// published snapshot, and what the agent says of itself in health.
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/common/log.h"
#include "agent/daemon/agent_state.h"
#include "agent/daemon/scan_trust.h"
#include "agent/inventory/discovery/discovery.h"
#include "agent/policy/health/health.h"
#include "agent/policy/rails/rails.h"
#include "agent/policy/select/pairing.h"
#include "agent/publish/nfd/nfd.h"

namespace fabric {
namespace {

// The agent's own findings: what degrades its answers without being the host's fault.
std::vector<v1::Finding> AgentFindings(const AgentState& st) {
  std::vector<v1::Finding> out;
  auto add = [&](v1::Severity sev, const std::string& msg) {
    v1::Finding f;
    f.set_severity(sev);
    f.set_check("agent");
    f.set_message(msg);
    out.push_back(std::move(f));
  };
  if (!st.counters.route_events.load()) {
    add(v1::SEVERITY_WARNING,
        absl::StrCat("route netlink events unavailable: changes are seen only by the periodic "
                     "rescan (every ",
                     absl::FormatDuration(st.opt.rescan_interval), ")"));
  }
  if (!st.last_scan.ok()) {
    add(v1::SEVERITY_UNKNOWN, absl::StrCat("the last rescan failed (", st.last_scan.message(),
                                           "); serving the previous inventory"));
  }
  if (st.stale_finding) out.push_back(*st.stale_finding);
  if (st.lldp != nullptr) LldpFindings(*st.lldp, absl::Now(), &out);
  if (st.ib != nullptr) IbNeighborFindings(*st.ib, &out);
  return out;
}

std::string FindingsKey(const std::vector<v1::Finding>& fs) {
  std::string key;
  for (const auto& f : fs) absl::StrAppend(&key, f.severity(), f.check(), f.message(), "\n");
  return key;
}

// A scan's result, full or targeted: published when trusted; else the last good one stays.
// `check_drift`: a safety-net rescan, whose differences from the served inventory are changes the
// events did not bring.
void Accept(AgentState& st, absl::StatusOr<RefreshedHost> host, const std::string& why,
            bool policy_changed, bool check_drift = false) {
  st.stale_retry_at = absl::InfiniteFuture();  // Only an untrusted scan schedules a retry.
  if (!host.ok()) {
    if (st.last_scan.ok()) Log(LogLevel::kWarning, "rescan failed: ", host.status().message());
    ++st.counters.rescan_errors;
    st.last_scan = host.status();
    Publish(st, std::nullopt, policy_changed);
    return;
  }
  st.last_scan = absl::OkStatus();
  const auto cur = st.store.Current();
  const ScanTrust trust = cur != nullptr ? JudgeScan(*cur->host, *host->host) : ScanTrust{};
  const absl::Time now = absl::Now();
  if (!trust.trusted) {
    // A hole from a read that may succeed next time is no evidence that anything is gone: keep
    // the last good inventory (no new generation, no NFD labels or health from this scan).
    ++st.counters.stale_scans;
    if (st.stale_since == absl::InfiniteFuture()) {
      st.stale_since = now;
      st.counters.stale_since_unix_ns = absl::ToUnixNanos(now);
      const v1::FieldProblem& p = trust.new_transient.front();
      Log(LogLevel::kWarning, "rescan (", why, ") not published: ", trust.new_transient.size(),
          " reads failed for now, first ", p.path(), ": ", p.reason(),
          "; serving the last good inventory and retrying");
    }
    st.stale_finding = StaleFinding(st.stale_since, trust);
    st.stale_retry_at = now + StaleRetryDelay(++st.stale_retries, st.opt.rescan_interval);
    Publish(st, std::nullopt, policy_changed);
    return;
  }
  if (st.stale_finding) {
    Log(LogLevel::kInfo, "inventory no longer stale (stale since ",
        absl::FormatTime(absl::RFC3339_sec, st.stale_since, absl::UTCTimeZone()), ", ",
        st.stale_retries, " rescans not published)");
    st.stale_finding.reset();
    st.stale_since = absl::InfiniteFuture();
    st.stale_retries = 0;
    st.counters.stale_since_unix_ns = 0;
  }
  st.counters.last_scan_ok_unix_ns = absl::ToUnixNanos(now);
  Publish(st, *std::move(host), policy_changed,
          check_drift ? absl::StrCat("rescan (", why, ")") : std::string());
}

// Whether the pairing and the NFD labels of `cur` hold for `next`: only GID tables or addresses
// changed (DiffHosts names every difference), under the same policy, and what the ranking reads
// of the ports they belong to (RankingInputs) is as it was. A GID that is not a port's chosen
// one, on a host with hundreds of them, then costs no pairing and no labels.
bool SameRanking(const Snapshot* cur, bool host_changed, bool policy_changed,
                 const std::vector<v1::InventoryChange>& changes, const v1::Host* next,
                 const v1::SelectionPolicy& policy) {
  if (cur == nullptr || policy_changed) return false;
  if (!host_changed) return true;
  std::set<std::string> subjects;  // Ports ("mlx5_1:1") and netdevs.
  for (const v1::InventoryChange& c : changes) {
    if (c.kind() != v1::InventoryChange::KIND_GID_TABLE &&
        c.kind() != v1::InventoryChange::KIND_NETDEV_ADDRESSES) {
      return false;
    }
    subjects.insert(c.subject());
  }
  return RankingInputs(*cur->host, cur->policy, subjects) == RankingInputs(*next, policy, subjects);
}

// Each neighbour names the configured rail it is heard on (or none): a view of the policy laid
// with the neighbours, so that the API and `fabricctl neighbors` show it.
void LayRails(v1::Host* host, const v1::SelectionPolicy& policy) {
  for (const auto& [i, rail] : RailChanges(*host, policy)) {
    MutableNetdev(host, i)->mutable_neighbor()->set_rail(rail);
  }
}

}  // namespace

void CountSources(AgentState& st) {
  bool route = false, uevent = false;
  for (const auto& s : st.sources) {
    route = route || std::string(s->name()) == "route netlink";
    uevent = uevent || std::string(s->name()) == "uevent";
  }
  st.counters.route_events = route;
  st.counters.uevents = uevent;
}

void Publish(AgentState& st, std::optional<RefreshedHost> host, bool policy_changed,
             const std::string& drift_of) {
  auto cur = st.store.Current();
  std::vector<v1::InventoryChange> changes;
  bool host_changed = cur == nullptr;
  const absl::Time now = absl::Now();
  // Neighbours are the agent's, not discovery's: laid onto every host it publishes, and a
  // change of them alone is a new host sharing everything else. InfiniBand ports are followed
  // on the host being published (those gone or down lose their neighbour now).
  if (st.ib != nullptr && host) st.ib->Sync(*host->host, now);
  if (!host && cur != nullptr &&
      ((st.lldp != nullptr && !st.lldp->Shows(*cur->host)) ||
       (st.ib != nullptr && !st.ib->Shows(*cur->host)))) {
    host = ShareHost(cur->host);
  }
  if (host && st.lldp != nullptr) st.lldp->Lay(host->host.get());
  if (host && st.ib != nullptr) st.ib->Lay(host->host.get());
  if (host) LayRails(host->host.get(), st.config.selection());
  if (cur != nullptr && host) {
    changes = DiffHosts(*cur->host, *host->host);
    host_changed = !changes.empty();
    st.events.Record(*cur->host, changes, now);
  }
  st.events.Expire(now, st.opt.event_window);
  std::vector<v1::Finding> agent = AgentFindings(st);
  std::string key = FindingsKey(agent);
  if (!host_changed && !policy_changed && key == st.agent_findings_key) return;
  st.agent_findings_key = key;

  auto snap = std::make_shared<Snapshot>();
  snap->policy = st.config.selection();
  const bool same_ranking = SameRanking(cur.get(), host_changed, policy_changed, changes,
                                        host ? host->host.get() : nullptr, snap->policy);
  if (host_changed) {
    snap->generation = ++st.generation;
    snap->discovered_at = now;
    // Once per snapshot, not per request; kept while the ranking reads the same.
    *host->host->mutable_pairing() =
        same_ranking ? cur->host->pairing() : PairGpus(*host->host, snap->policy);
    snap->host = std::move(host->host);
    if (cur != nullptr) {
      snap->changes_since = cur->generation;
      snap->changes = changes;
    }
  } else {
    snap->generation = cur->generation;
    snap->discovered_at = cur->discovered_at;
    if (policy_changed) {
      auto h = std::make_shared<v1::Host>(*cur->host);
      *h->mutable_pairing() = PairGpus(*h, snap->policy);
      LayRails(h.get(), snap->policy);
      snap->host = std::move(h);
    } else {
      snap->host = cur->host;  // The very same host: nothing in it changed.
    }
    snap->changes_since = cur->changes_since;
    snap->changes = cur->changes;
  }
  if (cur != nullptr && !policy_changed && snap->host == cur->host) {
    snap->host_health = cur->host_health;  // Only the agent's findings changed.
  } else {
    snap->host_health = EvaluateHealth(*snap->host, snap->policy);
    for (v1::Finding& f : GidChangeFindings(*st.start_host, *snap->host)) {
      AddFinding(&snap->host_health, std::move(f));
    }
  }
  snap->health = snap->host_health;
  for (v1::Finding& f : agent) AddFinding(&snap->health, std::move(f));
  snap->events = st.events;
  snap->event_window = st.opt.event_window;
  for (const v1::InventoryChange& c : changes) {
    Log(LogLevel::kInfo, "change: ", v1::InventoryChange::Kind_Name(c.kind()), " ", c.subject(),
        c.old_value().empty() && c.new_value().empty() ? "" : " ", c.old_value(),
        c.old_value().empty() ? "" : " -> ", c.new_value(),
        drift_of.empty() ? "" : absl::StrCat(" (", drift_of, " found what no event announced)"));
  }
  if (!drift_of.empty()) st.counters.refresh_drift.fetch_add(changes.size());
  const v1::Host& h = *snap->host;
  const bool labels_same = !host_changed && !policy_changed ? true : same_ranking;
  st.store.Publish(snap);
  if (st.lldp != nullptr && host_changed) {
    bool netdevs_changed = cur == nullptr;
    for (const v1::InventoryChange& c : changes) {
      netdevs_changed = netdevs_changed || c.kind() == v1::InventoryChange::KIND_NETDEV_ADDED ||
                        c.kind() == v1::InventoryChange::KIND_NETDEV_REMOVED ||
                        c.kind() == v1::InventoryChange::KIND_DEVICE_ADDED ||
                        c.kind() == v1::InventoryChange::KIND_DEVICE_REMOVED ||
                        c.kind() == v1::InventoryChange::KIND_OTHER;
    }
    if (netdevs_changed) st.lldp->Sync(h, now);  // Sockets for new physical netdevs, none for gone.
  }
  if (!st.opt.nfd_features_dir.empty() && !(labels_same && !st.nfd_written.empty())) {
    // Most changes (a GID, a link state) leave the labels as they were: no rewrite, no NFD event.
    std::string features = RenderNfdFeatures(h, snap->policy);
    if (features != st.nfd_written) {
      auto wrote = WriteNfdFeatures(st.opt.nfd_features_dir, features);
      if (wrote.ok()) {
        st.nfd_written = std::move(features);
      } else {
        st.nfd_written.clear();  // Rendered and written again at the next publish.
        Log(LogLevel::kWarning, "NFD feature file: ", wrote.status().message());
      }
    }
  }
}

void Rescan(AgentState& st, const std::string& why, bool policy_changed, bool safety_net) {
  ++st.counters.rescans;
  const absl::Time start = absl::Now();
  auto host = Discover(st.sysfs, st.procfs);
  const absl::Duration took = absl::Now() - start;
  Log(LogLevel::kDebug, "rescan (", why, ") took ", absl::FormatDuration(took));
  st.counters.refreshes_full.fetch_add(1);
  st.counters.refresh_full_ns.fetch_add(absl::ToInt64Nanoseconds(took));
  // Drift only against a good served inventory (not one kept while rescans were untrusted).
  absl::StatusOr<RefreshedHost> scanned =
      host.ok() ? absl::StatusOr<RefreshedHost>(ScannedHost(*std::move(host))) : host.status();
  Accept(st, std::move(scanned), why, policy_changed,
         safety_net && st.last_scan.ok() && !st.stale_finding);
}

void RefreshFor(AgentState& st, const ChangeScope& scope, const std::string& why) {
  const auto cur = st.store.Current();
  // Targeted refreshes splice into a good inventory; anything else reads it all.
  if (cur == nullptr || scope.full() || !st.last_scan.ok() || st.stale_finding) {
    return Rescan(st, scope.full() ? absl::StrCat(why, ": ", scope.full_why()) : why);
  }
  const absl::Time start = absl::Now();
  const RefreshPlan plan = PlanRefresh(
      *cur->host, scope, [&](const std::string& name) { return LookUpNetdev(st.sysfs, name); });
  if (plan.full) return Rescan(st, absl::StrCat(why, ": ", plan.why));
  if (plan.empty()) {
    st.counters.refreshes_skipped.fetch_add(1);
    Log(LogLevel::kDebug, "nothing in the inventory depends on it (", why, ")");
    return;
  }
  auto host = Refresh(st.sysfs, st.procfs, cur->host, plan);
  if (absl::IsFailedPrecondition(host.status())) {
    return Rescan(st, absl::StrCat(why, ": ", host.status().message()));
  }
  const absl::Duration took = absl::Now() - start;
  Log(LogLevel::kDebug, "targeted refresh of ", plan.why, " (", why, ") took ",
      absl::FormatDuration(took));
  st.counters.refreshes_targeted.fetch_add(1);
  st.counters.refresh_targeted_ns.fetch_add(absl::ToInt64Nanoseconds(took));
  Accept(st, std::move(host), why, false);
}

}  // namespace fabric
