// The neighbours heard on each netdev, kept from LLDP frames: what each one said last, when it was
// first and last heard, and when it expires (its TTL). Pure (no OS calls, no protobuf): the agent
// feeds it frames and the clock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "agent/common/token_bucket.h"
#include "agent/fabric/neighbors/lldp.h"

namespace fabric::neighbors {

class NeighborTable {
 public:
  struct Options {
    // Frames taken per netdev: a switch sends one every 30 s (1 s at the fastest); more is a
    // flood or a loop, dropped and counted.
    double frames_per_second = 2;
    double burst = 5;
  };
  struct Entry {
    LldpNeighbor neighbor;
    absl::Time first_seen;  // Of this chassis and port on this netdev.
    absl::Time last_seen;
    absl::Time expires;
    uint64_t changes = 0;  // Times what it said changed while it was heard.
    // Of those, another chassis or port: a cable moved without the neighbour expiring first.
    uint64_t moves = 0;
  };
  enum class Seen {
    kDropped,  // Over the netdev's rate: not looked at.
    kSame,     // What it said before (its expiry moves on).
    kNew,      // Nothing was heard on this netdev before (or it had expired).
    kChanged,  // Another chassis, port or name than before.
    kGone,     // A shutdown LLDPDU (TTL 0): forgotten now.
  };

  NeighborTable() : NeighborTable(Options()) {}
  explicit NeighborTable(Options o) : opt_(o) {}

  Seen Observe(const std::string& netdev, const LldpNeighbor& n, absl::Time now);
  // Removes the neighbours whose TTL ran out at `now`; returns their netdevs.
  std::vector<std::string> Expire(absl::Time now);
  // The earliest expiry; InfiniteFuture when the table is empty.
  absl::Time NextExpiry() const;
  // The netdev is gone: its neighbour and rate state with it. Whether it had a neighbour.
  bool Forget(const std::string& netdev);

  const Entry* Find(const std::string& netdev) const;
  const absl::flat_hash_map<std::string, Entry>& entries() const { return entries_; }
  uint64_t dropped() const { return dropped_; }

 private:
  Options opt_;
  absl::flat_hash_map<std::string, Entry> entries_;
  // Kept for netdevs being listened on, so that a flood cannot skip the bound by expiring.
  absl::flat_hash_map<std::string, TokenBucket> rates_;
  uint64_t dropped_ = 0;
};

// Whether two neighbours say the same (chassis, port, names, addresses, VLAN), TTL aside.
bool SameNeighbor(const LldpNeighbor& a, const LldpNeighbor& b);

}  // namespace fabric::neighbors
