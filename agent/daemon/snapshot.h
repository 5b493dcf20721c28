// Immutable inventory snapshots, swapped atomically: a query holds a shared_ptr to one snapshot
// and never sees a half-built inventory, however long it runs.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/time/time.h"
#include "agent/inventory/changes/event_log.h"
#include "fabric/v1/agent.pb.h"
#include "fabric/v1/health.pb.h"
#include "fabric/v1/host.pb.h"
#include "fabric/v1/select.pb.h"

namespace fabric {

// Selections already computed for this snapshot, by request. A launcher fleet asks for the same
// few GPU sets over and over; the snapshot and its policy are immutable, so an answer stays right
// for the snapshot's life and a new snapshot starts empty. Bounded; thread-safe.
class SelectionCache {
 public:
  static constexpr size_t kMaxEntries = 256;
  // Entries are serialized Selection messages: a hit is sent as it is, without copying or
  // serializing a message again.
  std::shared_ptr<const std::string> Find(const std::string& key) const;
  void Insert(const std::string& key, std::shared_ptr<const std::string> serialized) const;

 private:
  mutable std::shared_mutex mu_;  // Hits only read: many callers at once do not queue.
  mutable std::unordered_map<std::string, std::shared_ptr<const std::string>> map_;
};

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
  // Flaps, GID changes and absent devices since the agent started; their health findings depend
  // on the time of the question, so readers evaluate them (EventLog::Findings).
  EventLog events;
  absl::Duration event_window = absl::Hours(1);
  SelectionCache selections;
  // DiffHosts from generation `changes_since` to this one, computed once when it was published
  // (watch streams that saw that generation send these).
  uint64_t changes_since = 0;
  std::vector<v1::InventoryChange> changes;
  // The first watch event built for this snapshot, kept with where its host's bytes and each
  // RDMA device's, netdev's and topology pair's field lie in it. Other streams' events copy the
  // host's bytes whole; the next snapshot's event copies the bytes of the objects it shares with
  // this one (RefreshedHost), in runs, instead of serializing them again. `objects` are objects
  // of `host`, alive as long as this snapshot.
  struct ElementBytes {
    struct Span {
      size_t offset = 0;
      size_t size = 0;
    };
    std::mutex mu;
    std::shared_ptr<const std::string> event;  // Null until the first event is built.
    Span host;
    // The devices, netdevs and topology pairs in the order the event holds them, and where each
    // one's field (tag, length, bytes) starts in `event`; `starts` ends with the last one's end.
    std::vector<const void*> objects;
    std::vector<size_t> starts;
  };
  mutable ElementBytes element_bytes;
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
