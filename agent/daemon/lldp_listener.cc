#include "agent/daemon/lldp_listener.h"

#include <google/protobuf/util/message_differencer.h>

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/common/log.h"
#include "agent/fabric/neighbors/lldp.h"
#include "agent/inventory/discovery/refresh.h"

namespace fabric {

namespace {

// Frames read per socket per Drain: a switch sends one every few seconds; more waits its turn.
constexpr int kFramesPerDrain = 8;

}  // namespace

LldpListener::LldpListener(Opener open) : open_(std::move(open)) {
  if (!open_) {
    open_ =
        [](const std::string& netdev) -> absl::StatusOr<std::unique_ptr<neighbors::LldpReceiver>> {
      auto s = neighbors::LldpSocketImpl::Open(netdev);
      if (!s.ok()) return s.status();
      return std::unique_ptr<neighbors::LldpReceiver>(std::move(*s));
    };
  }
}

std::vector<std::string> LldpListener::PhysicalNetdevs(const v1::Host& host) {
  std::set<std::string> vfs;  // PCI addresses of virtual functions.
  for (const v1::RdmaDevice& d : host.rdma_devices()) {
    if (!d.pci().sriov().pf_pci_address().empty()) vfs.insert(d.pci().address());
  }
  std::vector<std::string> out;
  for (const v1::Netdev& nd : host.netdevs()) {
    if (nd.pci_address().empty() || nd.upper() || vfs.count(nd.pci_address())) continue;
    out.push_back(nd.name());
  }
  return out;
}

bool LldpListener::Sync(const v1::Host& host) {
  const std::vector<std::string> want = PhysicalNetdevs(host);
  const std::set<std::string> wanted(want.begin(), want.end());
  bool lost = false;
  for (auto it = receivers_.begin(); it != receivers_.end();) {
    if (wanted.count(it->first)) {
      ++it;
      continue;
    }
    lost = table_.Forget(it->first) || lost;
    it = receivers_.erase(it);
  }
  for (auto it = open_errors_.begin(); it != open_errors_.end();) {
    it = wanted.count(it->first) ? std::next(it) : open_errors_.erase(it);
  }
  for (const std::string& name : want) {
    if (receivers_.count(name) || open_errors_.count(name)) continue;
    auto r = open_(name);
    if (!r.ok()) {
      ++counters_.open_failures;
      open_errors_[name] = std::string(r.status().message());
      Log(LogLevel::kWarning, "LLDP: not listening on ", name, ": ", r.status().message());
      continue;
    }
    receivers_[name] = std::move(*r);
  }
  return lost;
}

void LldpListener::AppendFds(std::vector<pollfd>* fds) const {
  for (const auto& [name, r] : receivers_) fds->push_back({r->fd(), POLLIN, 0});
}

bool LldpListener::Drain(absl::Time now) {
  bool changed = false;
  for (auto it = receivers_.begin(); it != receivers_.end();) {
    const std::string& name = it->first;
    bool gone = false;
    for (int i = 0; i < kFramesPerDrain; ++i) {
      auto frame = it->second->Receive();
      if (!frame.ok()) {
        // NotFound: the netdev went away under the socket (the next Sync would drop it too).
        // Unavailable: it went down; frames resume when it is up again.
        gone = absl::IsNotFound(frame.status());
        break;
      }
      if (!frame->has_value()) break;
      ++counters_.frames;
      if ((*frame)->truncated()) {
        ++counters_.truncated;
        continue;
      }
      auto n = neighbors::ParseLldpFrame((*frame)->bytes);
      if (!n.ok()) {
        ++counters_.malformed;
        Log(LogLevel::kDebug, "LLDP on ", name, ": ", n.status().message());
        continue;
      }
      switch (table_.Observe(name, *n, now)) {
        case neighbors::NeighborTable::Seen::kNew:
        case neighbors::NeighborTable::Seen::kChanged:
        case neighbors::NeighborTable::Seen::kGone:
          changed = true;
          break;
        case neighbors::NeighborTable::Seen::kSame:
        case neighbors::NeighborTable::Seen::kDropped:
          break;
      }
    }
    if (gone) {
      changed = table_.Forget(name) || changed;
      it = receivers_.erase(it);
    } else {
      ++it;
    }
  }
  return changed;
}

bool LldpListener::Expire(absl::Time now) {
  std::vector<std::string> gone = table_.Expire(now);
  for (const std::string& n : gone) Log(LogLevel::kInfo, "LLDP: the neighbour of ", n, " expired");
  return !gone.empty();
}

v1::Neighbor NeighborProto(const neighbors::NeighborTable::Entry& e) {
  const neighbors::LldpNeighbor& n = e.neighbor;
  v1::Neighbor out;
  out.set_source(v1::Neighbor::SOURCE_LLDP);
  out.set_chassis_id_subtype(static_cast<uint32_t>(n.chassis_id_subtype));
  out.set_chassis_id(n.chassis_id);
  out.set_port_id_subtype(static_cast<uint32_t>(n.port_id_subtype));
  out.set_port_id(n.port_id);
  out.set_system_name(n.system_name);
  out.set_port_description(n.port_description);
  out.set_management_address(n.management_address);
  if (n.port_vlan) out.set_port_vlan(*n.port_vlan);
  out.set_ttl_seconds(n.ttl_s);
  out.set_first_seen_unix_ms(absl::ToUnixMillis(e.first_seen));
  out.set_switch_label(neighbors::SwitchLabelValue(n));
  return out;
}

std::optional<v1::Neighbor> LldpListener::Want(const std::string& netdev) const {
  const neighbors::NeighborTable::Entry* e = table_.Find(netdev);
  if (e == nullptr) return std::nullopt;
  return NeighborProto(*e);
}

void LldpListener::Lay(v1::Host* host) const {
  for (int i = 0; i < host->netdevs_size(); ++i) {
    const v1::Netdev& nd = host->netdevs(i);
    std::optional<v1::Neighbor> want = Want(nd.name());
    if (!want) {
      if (nd.has_neighbor()) MutableNetdev(host, i)->clear_neighbor();
      continue;
    }
    if (nd.has_neighbor() &&
        google::protobuf::util::MessageDifferencer::Equals(nd.neighbor(), *want)) {
      continue;
    }
    *MutableNetdev(host, i)->mutable_neighbor() = std::move(*want);
  }
}

bool LldpListener::Shows(const v1::Host& host) const {
  for (const v1::Netdev& nd : host.netdevs()) {
    std::optional<v1::Neighbor> want = Want(nd.name());
    if (want.has_value() != nd.has_neighbor()) return false;
    if (want && !google::protobuf::util::MessageDifferencer::Equals(nd.neighbor(), *want)) {
      return false;
    }
  }
  return true;
}

}  // namespace fabric
