#include "agent/fabric/neighbors/neighbor_table.h"

#include <algorithm>

namespace fabric::neighbors {

bool SameNeighbor(const LldpNeighbor& a, const LldpNeighbor& b) {
  return a.chassis_id_subtype == b.chassis_id_subtype && a.chassis_id_raw == b.chassis_id_raw &&
         a.port_id_subtype == b.port_id_subtype && a.port_id == b.port_id &&
         a.system_name == b.system_name && a.port_description == b.port_description &&
         a.management_address == b.management_address && a.port_vlan == b.port_vlan;
}

NeighborTable::Seen NeighborTable::Observe(const std::string& netdev, const LldpNeighbor& n,
                                           absl::Time now) {
  auto [rate, fresh_rate] =
      rates_.try_emplace(netdev, TokenBucket(opt_.frames_per_second, opt_.burst));
  (void)fresh_rate;
  if (!rate->second.Take(now)) {
    ++dropped_;
    return Seen::kDropped;
  }
  auto it = entries_.find(netdev);
  if (n.ttl_s == 0) {
    if (it == entries_.end()) return Seen::kSame;  // Nothing to forget.
    entries_.erase(it);
    return Seen::kGone;
  }
  const absl::Time expires = now + absl::Seconds(n.ttl_s);
  if (it == entries_.end() || it->second.expires <= now) {
    Entry& e = entries_[netdev];
    e = Entry{n, now, now, expires, 0, 0};
    return Seen::kNew;
  }
  Entry& e = it->second;
  const bool same_port = e.neighbor.chassis_id_raw == n.chassis_id_raw &&
                         e.neighbor.chassis_id_subtype == n.chassis_id_subtype &&
                         e.neighbor.port_id == n.port_id;
  const bool same = SameNeighbor(e.neighbor, n);
  if (!same_port) {
    e.first_seen = now;
    ++e.moves;
  }
  if (!same) ++e.changes;
  e.neighbor = n;
  e.last_seen = now;
  e.expires = expires;
  return same ? Seen::kSame : Seen::kChanged;
}

std::vector<std::string> NeighborTable::Expire(absl::Time now) {
  std::vector<std::string> out;
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->second.expires <= now) {
      out.push_back(it->first);
      entries_.erase(it++);
    } else {
      ++it;
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

absl::Time NeighborTable::NextExpiry() const {
  absl::Time next = absl::InfiniteFuture();
  for (const auto& [name, e] : entries_) next = std::min(next, e.expires);
  return next;
}

bool NeighborTable::Forget(const std::string& netdev) {
  rates_.erase(netdev);
  auto it = entries_.find(netdev);
  if (it == entries_.end()) return false;
  entries_.erase(it);
  return true;
}

const NeighborTable::Entry* NeighborTable::Find(const std::string& netdev) const {
  auto it = entries_.find(netdev);
  return it == entries_.end() ? nullptr : &it->second;
}

}  // namespace fabric::neighbors
