#include "agent/daemon/snapshot.h"

#include <chrono>

namespace fabric {

std::shared_ptr<const std::string> SelectionCache::Find(const std::string& key) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  auto it = map_.find(key);
  return it == map_.end() ? nullptr : it->second;
}

void SelectionCache::Insert(const std::string& key,
                            std::shared_ptr<const std::string> serialized) const {
  std::unique_lock<std::shared_mutex> lock(mu_);
  // Full: start over rather than track recency; a working set larger than this is not the case
  // the cache is for.
  if (map_.size() >= kMaxEntries) map_.clear();
  map_.emplace(key, std::move(serialized));
}

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
