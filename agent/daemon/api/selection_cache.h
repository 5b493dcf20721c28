// Selections already computed for the current snapshot, by request. A launcher fleet asks for the
// same few GPU sets over and over; a snapshot and its policy are immutable, so an answer stays
// right for the snapshot's life. The cache follows the snapshot it is asked about: a newer one
// starts it empty. It holds its snapshot weakly (an old host is not kept alive for it). Bounded;
// thread-safe.
#pragma once

#include <memory>
#include <shared_mutex>
#include <string>
#include <unordered_map>

#include "agent/daemon/cycle/snapshot.h"

namespace fabric {

class SelectionCache {
 public:
  static constexpr size_t kMaxEntries = 256;
  // Entries are serialized Selection messages: a hit is sent as it is, without copying or
  // serializing a message again. Null: not cached for `s`.
  std::shared_ptr<const std::string> Find(const std::shared_ptr<const Snapshot>& s,
                                          const std::string& key) const;
  // Starts over when `s` is not the snapshot the entries belong to.
  void Insert(const std::shared_ptr<const Snapshot>& s, const std::string& key,
              std::shared_ptr<const std::string> serialized);

 private:
  mutable std::shared_mutex mu_;  // Hits only read: many callers at once do not queue.
  std::weak_ptr<const Snapshot> owner_;
  std::unordered_map<std::string, std::shared_ptr<const std::string>> map_;
};

}  // namespace fabric
