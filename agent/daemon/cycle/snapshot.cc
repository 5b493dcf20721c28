#include "agent/daemon/cycle/snapshot.h"

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
  Notify();
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
  Notify();
}

int SnapshotStore::Subscribe(std::function<void()> wake) const {
  std::lock_guard<std::mutex> lock(subscribers_mu_);
  subscribers_.emplace(next_subscriber_, std::move(wake));
  return next_subscriber_++;
}

void SnapshotStore::Unsubscribe(int id) const {
  std::lock_guard<std::mutex> lock(subscribers_mu_);
  subscribers_.erase(id);
}

void SnapshotStore::Notify() const {
  std::lock_guard<std::mutex> lock(subscribers_mu_);
  for (const auto& [id, wake] : subscribers_) wake();
}

bool SnapshotStore::shutting_down() const {
  std::lock_guard<std::mutex> lock(mu_);
  return shutdown_;
}

}  // namespace fabric
