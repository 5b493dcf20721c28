// Immutable inventory snapshots, swapped atomically: a query holds a shared_ptr to one snapshot
// and never sees a half-built inventory, however long it runs. A snapshot holds no cache of its
// readers' (the watch hub keeps its event bytes, the service its selections).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "agent/inventory/changes/event_log.h"
#include "fabric/v1/agent.pb.h"
#include "fabric/v1/health.pb.h"
#include "fabric/v1/host.pb.h"
#include "fabric/v1/select.pb.h"

namespace fabric {

struct Snapshot {
  // Bumped only when the host changes (not when only the policy does), so watch streams wake
  // for inventory changes alone.
  uint64_t generation = 0;
  absl::Time discovered_at;
  // Never null. Shared with the snapshots before it: whole when only the policy or the agent's
  // findings changed, else the RDMA devices a targeted refresh did not read (RefreshedHost).
  std::shared_ptr<const v1::Host> host = std::make_shared<const v1::Host>();
  v1::SelectionPolicy policy;
  v1::Health health;  // Evaluated when the snapshot was built.
  // `health` without the agent's own findings: evaluated again only when the host or the policy
  // changed.
  v1::Health host_health;
  // Flaps, GID changes and absent devices since the agent started, as facts (Inventory's
  // port_events and absent_devices, metrics); the health monitor judges them.
  EventLog events;
  absl::Duration event_window = absl::Hours(1);
  // DiffHosts from generation `changes_since` to this one, computed once when it was published
  // (watch streams that saw that generation send these).
  uint64_t changes_since = 0;
  std::vector<v1::InventoryChange> changes;
  // FindingsKey of the agent's findings in `health`: the same findings again publish nothing.
  std::string agent_findings_key;
};

class SnapshotStore {
 public:
  // Null until the first Publish.
  std::shared_ptr<const Snapshot> Current() const;
  void Publish(std::shared_ptr<const Snapshot> snapshot);
  // Waits until the generation exceeds `generation`, Shutdown, or `timeout`; returns Current().
  std::shared_ptr<const Snapshot> WaitNewer(uint64_t generation, absl::Duration timeout) const;
  // Wakes every waiter for good (server shutdown).
  void Shutdown();
  bool shutting_down() const;
  // `wake` runs after every Publish and at Shutdown, on that caller's thread and outside the
  // store's lock (it may call Current()); it must be quick. Returns the id for Unsubscribe, after
  // which `wake` is not running and never runs again.
  int Subscribe(std::function<void()> wake) const;
  void Unsubscribe(int id) const;

 private:
  void Notify() const;
  mutable std::mutex subscribers_mu_;
  mutable std::map<int, std::function<void()>> subscribers_;
  mutable int next_subscriber_ = 0;

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::shared_ptr<const Snapshot> current_;
  bool shutdown_ = false;
};

}  // namespace fabric
