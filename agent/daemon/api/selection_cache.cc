#include "agent/daemon/api/selection_cache.h"

#include <mutex>

namespace fabric {

std::shared_ptr<const std::string> SelectionCache::Find(const std::shared_ptr<const Snapshot>& s,
                                                        const std::string& key) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  // A live owner at the same address is the same snapshot.
  if (owner_.lock() != s) return nullptr;
  auto it = map_.find(key);
  return it == map_.end() ? nullptr : it->second;
}

void SelectionCache::Insert(const std::shared_ptr<const Snapshot>& s, const std::string& key,
                            std::shared_ptr<const std::string> serialized) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  // A new snapshot, or full: start over rather than track recency; a working set larger than
  // this is not the case the cache is for.
  if (owner_.lock() != s || map_.size() >= kMaxEntries) map_.clear();
  owner_ = s;
  map_.emplace(key, std::move(serialized));
}

}  // namespace fabric
