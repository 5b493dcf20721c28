#include "agent/daemon/snapshot.h"

#include <chrono>

namespace fabric {

std::shared_ptr<const Snapshot> SnapshotStore::Current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return current_;
}

void SnapshotStore::Publish(std::shared_ptr<const Snapshot> snapshot) {
  std::shared_ptr<const Snapshot> old;  // Released outside the lock: freeing a host takes time.
  {
    std::lock_guard<std::mutex> lock(mu_);
    old = std::move(current_);
    current_ = std::move(snapshot);
  }
  cv_.notify_all();
}

std::shared_ptr<const Snapshot> SnapshotStore::WaitNewer(uint64_t generation,
                                                         absl::Duration timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [&] {
    return shutdown_ || (current_ != nullptr && current_->generation > generation);
  });
  return current_;
}

void SnapshotStore::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutdown_ = true;
  }
  cv_.notify_all();
}

bool SnapshotStore::shutting_down() const {
  std::lock_guard<std::mutex> lock(mu_);
  return shutdown_;
}

}  // namespace fabric
