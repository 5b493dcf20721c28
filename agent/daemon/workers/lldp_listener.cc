#include "agent/daemon/workers/lldp_listener.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/common/log.h"
#include "agent/daemon/workers/neighbor_lay.h"
#include "agent/fabric/neighbors/lldp.h"
#include "agent/inventory/discovery/refresh.h"
#include "agent/inventory/query/host_query.h"

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

bool LldpListener::Sync(const v1::Host& host, absl::Time now) {
  // InfiniBand ports carry no LLDP: their neighbours come from SMPs (IbNeighbors).
  std::set<std::string> infiniband;
  for (const v1::RdmaDevice& d : host.rdma_devices()) {
    for (const v1::Port& p : d.ports()) {
      if (p.link_layer() == v1::LINK_LAYER_INFINIBAND && !p.netdev().empty()) {
        infiniband.insert(p.netdev());
      }
    }
  }
  std::vector<std::string> want;
  for (std::string& n : PhysicalNetdevs(host)) {
    if (!infiniband.count(n)) want.push_back(std::move(n));
  }
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
  for (auto it = missing_.begin(); it != missing_.end();) {
    it = wanted.count(*it) ? std::next(it) : missing_.erase(it);
  }
  for (const std::string& name : want) {
    if (receivers_.count(name) || open_errors_.count(name) || missing_.count(name)) continue;
    auto r = open_(name);
    if (!r.ok()) {
      ++counters_.open_failures;
      // Missing here: sysfs lists a netdev of another network namespace (a tree given with
      // --sysfs); nothing to hear.
      const bool missing = absl::IsNotFound(r.status());
      Log(missing ? LogLevel::kDebug : LogLevel::kWarning, "LLDP: not listening on ", name, ": ",
          r.status().message());
      if (missing) {
        missing_.insert(name);
      } else {
        open_errors_[name] = std::string(r.status().message());
      }
      continue;
    }
    receivers_[name] = Receiver{std::move(*r), now};
  }
  return lost;
}

void LldpListener::AppendFds(std::vector<pollfd>* fds) const {
  for (const auto& [name, r] : receivers_) fds->push_back({r.socket->fd(), POLLIN, 0});
}

bool LldpListener::Drain(absl::Time now) {
  bool changed = false;
  for (auto it = receivers_.begin(); it != receivers_.end();) {
    const std::string& name = it->first;
    bool gone = false;
    for (int i = 0; i < kFramesPerDrain; ++i) {
      auto frame = it->second.socket->Receive();
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

std::vector<std::string> LldpListener::Silent(absl::Time now) const {
  std::vector<std::string> out;
  for (const auto& [name, r] : receivers_) {
    if (now - r.since >= kSilence && table_.Find(name) == nullptr) out.push_back(name);
  }
  return out;
}

absl::Time LldpListener::NextSilence(absl::Time now) const {
  absl::Time next = absl::InfiniteFuture();
  for (const auto& [name, r] : receivers_) {
    if (r.since + kSilence > now) next = std::min(next, r.since + kSilence);
  }
  return next;
}

bool LldpListener::Expire(absl::Time now) {
  std::vector<std::string> gone = table_.Expire(now);
  for (const std::string& n : gone) Log(LogLevel::kInfo, "LLDP: the neighbour of ", n, " expired");
  return !gone.empty();
}

void LldpFindings(const LldpListener& l, absl::Time now, std::vector<v1::Finding>* out) {
  auto add = [&](v1::Severity sev, const std::string& subject, std::string msg) {
    v1::Finding f;
    f.set_severity(sev);
    f.set_check("lldp");
    f.set_subject(subject);
    f.set_message(std::move(msg));
    out->push_back(std::move(f));
  };
  for (const auto& [netdev, why] : l.open_errors()) {
    add(v1::SEVERITY_WARNING, netdev,
        absl::StrCat("not listening for LLDP (", why, "): its switch port is unknown"));
  }
  for (const std::string& netdev : l.Silent(now)) {
    // A note, not a fault: many fabrics do not run LLDP.
    add(v1::SEVERITY_OK, netdev,
        absl::StrCat("no LLDP frame for ", absl::FormatDuration(LldpListener::kSilence),
                     ": the switch may not send LLDP, or the NIC's own LLDP agent takes the frames "
                     "before the host (ConnectX: mlxconfig LLDP_NB_RX_MODE; Intel E810/X710: "
                     "ethtool --set-priv-flags ",
                     netdev, " fw-lldp-agent off)"));
  }
  for (const auto& [netdev, e] : l.table().entries()) {
    if (e.moves == 0) continue;
    add(v1::SEVERITY_WARNING, netdev,
        absl::StrCat("the switch port at the other end changed ", e.moves,
                     " time(s) while the link stayed up (now ",
                     neighbors::SwitchLabelValue(e.neighbor), " port ", e.neighbor.port_id,
                     "): recabled, or LLDP from more than one switch"));
  }
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
  LayNeighbors(host, v1::Neighbor::SOURCE_LLDP,
               [this](const v1::Netdev& nd) { return Want(nd.name()); });
}

bool LldpListener::Shows(const v1::Host& host) const {
  return ShowsNeighbors(host, v1::Neighbor::SOURCE_LLDP,
                        [this](const v1::Netdev& nd) { return Want(nd.name()); });
}

void LldpListener::Findings(absl::Time now, std::vector<v1::Finding>* out) const {
  LldpFindings(*this, now, out);
}

void LldpListener::Publish(const Publication& p) {
  if (!p.built.host_changed) return;
  bool netdevs_changed = p.previous == nullptr;
  for (const v1::InventoryChange& c : p.built.changes) {
    netdevs_changed = netdevs_changed || c.kind() == v1::InventoryChange::KIND_NETDEV_ADDED ||
                      c.kind() == v1::InventoryChange::KIND_NETDEV_REMOVED ||
                      c.kind() == v1::InventoryChange::KIND_DEVICE_ADDED ||
                      c.kind() == v1::InventoryChange::KIND_DEVICE_REMOVED ||
                      c.kind() == v1::InventoryChange::KIND_OTHER;
  }
  if (netdevs_changed) Sync(*p.snapshot.host, p.now);  // Sockets for new netdevs, none for gone.
}

}  // namespace fabric
