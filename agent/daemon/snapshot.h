// Immutable inventory snapshots, swapped atomically: a query holds a shared_ptr to one snapshot
// and never sees a half-built inventory, however long it runs.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>

#include "absl/time/time.h"
#include "fabric/v1/health.pb.h"
#include "fabric/v1/host.pb.h"
#include "fabric/v1/select.pb.h"

namespace fabric {

struct Snapshot {
  // Bumped only when the host changes (not when only the policy does), so watch streams wake
  // for inventory changes alone.
  uint64_t generation = 0;
  absl::Time discovered_at;
  v1::Host host;
  v1::SelectionPolicy policy;
  v1::Health health;  // Evaluated when the snapshot was built.
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

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::shared_ptr<const Snapshot> current_;
  bool shutdown_ = false;
};

}  // namespace fabric
