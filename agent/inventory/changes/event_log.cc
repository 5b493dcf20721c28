#include "agent/inventory/changes/event_log.h"

#include "google/protobuf/util/time_util.h"

namespace fabric {
namespace {

google::protobuf::Timestamp Ts(absl::Time t) {
  return google::protobuf::util::TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(t));
}

}  // namespace

void EventLog::Record(const v1::Host& before, const std::vector<v1::InventoryChange>& changes,
                      absl::Time now) {
  for (const v1::InventoryChange& c : changes) {
    switch (c.kind()) {
      case v1::InventoryChange::KIND_PORT_STATE:
        // A port that appears with its device has an empty old value: not a flap.
        if (c.old_value() == "ACTIVE" && c.new_value() != "ACTIVE" && !c.new_value().empty()) {
          Port& p = ports_[c.subject()];
          ++p.link_flaps;
          p.last_flap = now;
        }
        break;
      case v1::InventoryChange::KIND_GID_TABLE: {
        Port& p = ports_[c.subject()];
        ++p.gid_changes;
        p.last_gid_change = now;
        break;
      }
      case v1::InventoryChange::KIND_DEVICE_REMOVED: {
        Absent a;
        a.since = now;
        for (const v1::RdmaDevice& d : before.rdma_devices()) {
          if (d.name() != c.subject()) continue;
          if (d.has_pci()) a.pci_address = d.pci().address();
          for (const v1::Port& p : d.ports()) a.ports.push_back(p.number());
        }
        absent_[c.subject()] = std::move(a);
        break;
      }
      case v1::InventoryChange::KIND_DEVICE_ADDED:
        absent_.erase(c.subject());
        break;
      default:
        break;
    }
  }
}

void EventLog::Expire(absl::Time now, absl::Duration window) {
  std::erase_if(absent_, [&](const auto& kv) { return now - kv.second.since > window; });
}

void EventLog::Fill(absl::Time now, absl::Duration window, v1::Inventory* out) const {
  for (const auto& [name, a] : absent_) {
    if (now - a.since > window) continue;
    v1::AbsentDevice* d = out->add_absent_devices();
    d->set_name(name);
    d->set_pci_address(a.pci_address);
    *d->mutable_since() = Ts(a.since);
    for (uint32_t p : a.ports) d->add_ports(p);
  }
  for (const auto& [port, p] : ports_) {
    v1::PortEvents* e = out->add_port_events();
    e->set_port(port);
    e->set_link_flaps(p.link_flaps);
    e->set_gid_changes(p.gid_changes);
    if (p.link_flaps > 0) *e->mutable_last_flap() = Ts(p.last_flap);
    if (p.gid_changes > 0) *e->mutable_last_gid_change() = Ts(p.last_gid_change);
  }
}

void EventLog::SetCount(v1::InventoryChange* change) const {
  auto it = ports_.find(change->subject());
  if (it == ports_.end()) return;
  if (change->kind() == v1::InventoryChange::KIND_PORT_STATE) {
    change->set_count(it->second.link_flaps);
  } else if (change->kind() == v1::InventoryChange::KIND_GID_TABLE) {
    change->set_count(it->second.gid_changes);
  }
}

}  // namespace fabric
