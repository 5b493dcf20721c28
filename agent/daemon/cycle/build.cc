#include "agent/daemon/cycle/build.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/inventory/changes/changes.h"
#include "agent/policy/health/health.h"
#include "agent/policy/rails/rails.h"
#include "agent/policy/select/pairing.h"

namespace fabric {
namespace {

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

std::string FindingsKey(const std::vector<v1::Finding>& findings) {
  std::string key;
  for (const auto& f : findings) absl::StrAppend(&key, f.severity(), f.check(), f.message(), "\n");
  return key;
}

Built BuildSnapshot(const Snapshot* cur, BuildInput in) {
  Built out;
  out.host_changed = cur == nullptr;
  std::optional<RefreshedHost>& host = in.host;
  if (host) LayRails(host->host.get(), *in.policy);
  if (cur != nullptr && host) {
    out.changes = DiffHosts(*cur->host, *host->host);
    out.host_changed = !out.changes.empty();
    in.events.Record(*cur->host, out.changes, in.now);
  }
  in.events.Expire(in.now, in.event_window);
  std::string key = FindingsKey(in.agent_findings);
  if (!out.host_changed && !in.policy_changed && cur != nullptr && key == cur->agent_findings_key) {
    out.events = std::move(in.events);
    return out;
  }

  auto snap = std::make_shared<Snapshot>();
  snap->policy = *in.policy;
  snap->agent_findings_key = std::move(key);
  const bool same_ranking = SameRanking(cur, out.host_changed, in.policy_changed, out.changes,
                                        host ? host->host.get() : nullptr, snap->policy);
  if (out.host_changed) {
    snap->generation = (cur != nullptr ? cur->generation : 0) + 1;
    snap->discovered_at = in.now;
    // Once per snapshot, not per request; kept while the ranking reads the same.
    *host->host->mutable_pairing() =
        same_ranking ? cur->host->pairing() : PairGpus(*host->host, snap->policy);
    snap->host = std::move(host->host);
    if (cur != nullptr) {
      snap->changes_since = cur->generation;
      snap->changes = out.changes;
    }
  } else {
    snap->generation = cur->generation;
    snap->discovered_at = cur->discovered_at;
    if (in.policy_changed) {
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
  if (cur != nullptr && !in.policy_changed && snap->host == cur->host) {
    snap->host_health = cur->host_health;  // Only the agent's findings changed.
  } else {
    snap->host_health = EvaluateHealth(*snap->host, snap->policy);
    const v1::Host& start = in.start_host != nullptr ? *in.start_host : *snap->host;
    for (v1::Finding& f : GidChangeFindings(start, *snap->host)) {
      AddFinding(&snap->host_health, std::move(f));
    }
  }
  snap->health = snap->host_health;
  for (v1::Finding& f : in.agent_findings) AddFinding(&snap->health, std::move(f));
  snap->events = in.events;
  out.events = std::move(in.events);
  snap->event_window = in.event_window;
  out.labels_same = !out.host_changed && !in.policy_changed ? true : same_ranking;
  out.snapshot = std::move(snap);
  return out;
}

}  // namespace fabric
