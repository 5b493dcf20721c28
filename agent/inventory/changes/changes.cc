#include "agent/inventory/changes/changes.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/common/natural_order.h"
#include "agent/inventory/discovery/parse.h"
#include "google/protobuf/repeated_field.h"

namespace fabric {
namespace {

using namespace ::fabric::v1;  // NOLINT
using ::google::protobuf::RepeatedPtrField;

// ---------------------------------------------------------------------------------------------
// Equality of the model's messages through the generated accessors: reflection (or
// MessageDifferencer) costs several times more, and DiffHosts runs on every rescan.
// changes_test changes every field of the model in turn and checks that DiffHosts sees it, so a
// field added to host.proto and not compared here fails that test.

bool SameDouble(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

// An `optional` scalar: same presence, and the same value when present.
#define FABRIC_SAME_OPT(a, b, field) \
  ((a).has_##field() == (b).has_##field() && (!(a).has_##field() || (a).field() == (b).field()))

template <typename T>
bool SameList(const google::protobuf::RepeatedField<T>& a,
              const google::protobuf::RepeatedField<T>& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
}

bool SameList(const RepeatedPtrField<std::string>& a, const RepeatedPtrField<std::string>& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
}

template <typename T>
bool SameList(const RepeatedPtrField<T>& a, const RepeatedPtrField<T>& b);

bool Same(const FieldProblem& a, const FieldProblem& b);
bool Same(const PciLink& a, const PciLink& b);
bool Same(const Sriov& a, const Sriov& b);
bool Same(const PciFunction& a, const PciFunction& b);
bool Same(const GpuDirect& a, const GpuDirect& b);
bool Same(const NcclTopoDevice& a, const NcclTopoDevice& b);
bool Same(const NcclTopology& a, const NcclTopology& b);

// A singular message field: same presence, and equal when present.
template <typename T>
bool SameMsg(bool has_a, const T& a, bool has_b, const T& b) {
  return has_a == has_b && (!has_a || Same(a, b));
}

bool Same(const FieldProblem& a, const FieldProblem& b) {
  return a.field() == b.field() && a.path() == b.path() && a.reason() == b.reason() &&
         a.transient() == b.transient();
}

bool Same(const NcclTopoDevice& a, const NcclTopoDevice& b) {
  return a.bus_id() == b.bus_id() && SameList(a.path(), b.path()) &&
         FABRIC_SAME_OPT(a, b, numa_node);
}

bool Same(const NcclTopology& a, const NcclTopology& b) {
  return a.path() == b.path() && a.error() == b.error() && a.stale() == b.stale() &&
         SameList(a.devices(), b.devices());
}

bool Same(const PciLink& a, const PciLink& b) {
  return a.has_speed_gts() == b.has_speed_gts() &&
         (!a.has_speed_gts() || SameDouble(a.speed_gts(), b.speed_gts())) &&
         FABRIC_SAME_OPT(a, b, width);
}

bool Same(const VirtualFunction& a, const VirtualFunction& b) {
  return a.index() == b.index() && a.pci_address() == b.pci_address() &&
         SameList(a.netdevs(), b.netdevs()) && SameList(a.rdma_devices(), b.rdma_devices());
}

bool Same(const Sriov& a, const Sriov& b) {
  return a.role() == b.role() && FABRIC_SAME_OPT(a, b, total_vfs) &&
         FABRIC_SAME_OPT(a, b, num_vfs) && SameList(a.vfs(), b.vfs()) &&
         a.pf_pci_address() == b.pf_pci_address() && FABRIC_SAME_OPT(a, b, vf_index);
}

bool Same(const PciFunction& a, const PciFunction& b) {
  return a.address() == b.address() && a.vendor_id() == b.vendor_id() &&
         a.device_id() == b.device_id() && FABRIC_SAME_OPT(a, b, class_code) &&
         FABRIC_SAME_OPT(a, b, numa_node) && a.driver() == b.driver() &&
         SameMsg(a.has_current_link(), a.current_link(), b.has_current_link(), b.current_link()) &&
         SameMsg(a.has_max_link(), a.max_link(), b.has_max_link(), b.max_link()) &&
         SameList(a.path(), b.path()) &&
         SameMsg(a.has_sriov(), a.sriov(), b.has_sriov(), b.sriov()) &&
         SameList(a.problems(), b.problems()) && a.vendor_name() == b.vendor_name() &&
         a.device_name() == b.device_name();
}

bool Same(const Gid& a, const Gid& b) {
  return a.index() == b.index() && a.gid() == b.gid() && a.type() == b.type() &&
         a.netdev() == b.netdev() && a.ipv4() == b.ipv4() && a.ipv6() == b.ipv6();
}

bool Same(const Accelerator& a, const Accelerator& b) {
  return a.pci_address() == b.pci_address() && a.vendor() == b.vendor() &&
         a.vendor_name() == b.vendor_name() && a.kind() == b.kind() &&
         SameMsg(a.has_pci(), a.pci(), b.has_pci(), b.pci()) &&
         a.management_display() == b.management_display() && a.uuid() == b.uuid() &&
         a.has_index() == b.has_index() && a.index() == b.index();
}

bool Same(const GpuDirectPath& a, const GpuDirectPath& b) {
  return a.mechanism() == b.mechanism() && a.detail() == b.detail();
}

bool Same(const GpuDirect& a, const GpuDirect& b) {
  return a.available() == b.available() && SameList(a.paths(), b.paths()) &&
         a.reason() == b.reason();
}

bool Same(const TopologyPair& a, const TopologyPair& b) {
  return a.accelerator() == b.accelerator() && a.rdma_device() == b.rdma_device() &&
         a.distance() == b.distance() && a.reason() == b.reason();
}

template <typename T>
bool SameList(const RepeatedPtrField<T>& a, const RepeatedPtrField<T>& b) {
  if (a.size() != b.size()) return false;
  for (int i = 0; i < a.size(); ++i) {
    if (&a[i] != &b[i] && !Same(a[i], b[i])) return false;  // Shared objects are equal.
  }
  return true;
}

// A device's own fields: all but name (the key) and ports.
bool SameDeviceRest(const RdmaDevice& a, const RdmaDevice& b) {
  return a.node_guid() == b.node_guid() && a.sys_image_guid() == b.sys_image_guid() &&
         a.fw_ver() == b.fw_ver() && a.hca_type() == b.hca_type() &&
         a.node_type() == b.node_type() && SameMsg(a.has_pci(), a.pci(), b.has_pci(), b.pci()) &&
         a.uverbs_device() == b.uverbs_device() && a.parent_netdev() == b.parent_netdev() &&
         SameList(a.problems(), b.problems());
}

// A port's fields but number (the key), state, rate_gbps and gids (reported as their own kinds);
// phys_state is covered when the state changed with it, the rate text when the rate did.
bool SamePortRest(const Port& a, const Port& b, bool state_changed, bool rate_changed) {
  return (state_changed || a.phys_state() == b.phys_state()) &&
         (rate_changed || a.rate() == b.rate()) && a.link_layer() == b.link_layer() &&
         FABRIC_SAME_OPT(a, b, lid) && FABRIC_SAME_OPT(a, b, sm_lid) && a.netdev() == b.netdev() &&
         SameList(a.problems(), b.problems()) && FABRIC_SAME_OPT(a, b, active_mtu) &&
         a.port_guid() == b.port_guid() && a.umad_device() == b.umad_device();
}

// What KIND_NEIGHBOR names of a netdev's neighbour: its switch and port; "" when none.
std::string NeighborText(const Netdev& n) {
  if (!n.has_neighbor()) return "";
  return absl::StrCat(n.neighbor().switch_label(), " ", n.neighbor().port_id(),
                      n.neighbor().rail().empty() ? "" : " rail ", n.neighbor().rail());
}

// A netdev's fields but name (the key), ipv4_subnets (KIND_NETDEV_ADDRESSES) and neighbor
// (KIND_NEIGHBOR).
bool SameNetdevRest(const Netdev& a, const Netdev& b) {
  return a.mac() == b.mac() && FABRIC_SAME_OPT(a, b, mtu) && a.operstate() == b.operstate() &&
         FABRIC_SAME_OPT(a, b, speed_mbps) && FABRIC_SAME_OPT(a, b, ifindex) &&
         a.pci_address() == b.pci_address() && a.rdma_device() == b.rdma_device() &&
         FABRIC_SAME_OPT(a, b, rdma_port) && a.upper() == b.upper() &&
         a.default_route() == b.default_route() && FABRIC_SAME_OPT(a, b, arp_ignore) &&
         FABRIC_SAME_OPT(a, b, arp_announce) && SameList(a.problems(), b.problems());
}

#undef FABRIC_SAME_OPT

// ---------------------------------------------------------------------------------------------
// Matching the elements of two repeated fields by key.

template <typename T>
struct Pairing {
  std::vector<std::pair<const T*, const T*>> both;  // (before, after), in `after` order.
  std::vector<const T*> removed;                    // In `before` order.
  std::vector<const T*> added;                      // In `after` order.
};

template <typename T, typename KeyFn>
Pairing<T> Pair(const RepeatedPtrField<T>& a, const RepeatedPtrField<T>& b, KeyFn key) {
  Pairing<T> p;
  // The usual case: the same elements in the same order.
  bool aligned = a.size() == b.size();
  for (int i = 0; aligned && i < a.size(); ++i) aligned = key(a[i]) == key(b[i]);
  if (aligned) {
    p.both.reserve(a.size());
    for (int i = 0; i < a.size(); ++i) p.both.emplace_back(&a[i], &b[i]);
    return p;
  }
  using Key = decltype(key(a[0]));
  std::unordered_map<Key, int> index;  // First element of `a` with each key.
  for (int i = 0; i < a.size(); ++i) index.emplace(key(a[i]), i);
  std::vector<bool> used(a.size(), false);
  for (const T& e : b) {
    auto it = index.find(key(e));
    if (it != index.end() && !used[it->second]) {
      used[it->second] = true;
      p.both.emplace_back(&a[it->second], &e);
    } else {
      p.added.push_back(&e);
    }
  }
  for (int i = 0; i < a.size(); ++i) {
    if (!used[i]) p.removed.push_back(&a[i]);
  }
  return p;
}

std::string_view DeviceKey(const RdmaDevice& d) { return d.name(); }
uint32_t PortKey(const Port& p) { return p.number(); }
std::string_view NetdevKey(const Netdev& n) { return n.name(); }
std::string_view AcceleratorKey(const Accelerator& a) { return a.pci_address(); }

// ---------------------------------------------------------------------------------------------

std::string PortName(const RdmaDevice& dev, const Port& port) {
  return absl::StrCat(dev.name(), ":", port.number());
}

std::string RateValue(const Port& port) {
  return port.has_rate_gbps() ? absl::StrFormat("%g", port.rate_gbps()) : std::string();
}

bool SameRate(const Port& a, const Port& b) {
  if (a.has_rate_gbps() != b.has_rate_gbps()) return false;
  return !a.has_rate_gbps() || SameDouble(a.rate_gbps(), b.rate_gbps());
}

const Gid* RoceV2Ipv4Gid(const RdmaDevice& dev, const Port& port) {
  const std::string& own = port.netdev().empty() ? dev.parent_netdev() : port.netdev();
  const Gid* best = nullptr;
  for (const Gid& g : port.gids()) {
    if (g.type() != GID_TYPE_ROCE_V2 || g.ipv4().empty()) continue;
    if (!own.empty() && g.netdev() != own) continue;
    if (best == nullptr || g.index() < best->index()) best = &g;
  }
  return best;
}

std::string GidValue(const Gid* g) {
  return g == nullptr ? std::string() : absl::StrCat(g->index(), " (", g->ipv4(), ")");
}

// IPv4 addresses per netdev, from the GID entries that name it.
using AddressMap = std::map<std::string_view, std::vector<std::string_view>>;

AddressMap GidAddresses(const Host& host) {
  AddressMap out;
  for (const RdmaDevice& d : host.rdma_devices()) {
    for (const Port& p : d.ports()) {
      for (const Gid& g : p.gids()) {
        if (!g.ipv4().empty() && !g.netdev().empty()) out[g.netdev()].push_back(g.ipv4());
      }
    }
  }
  return out;
}

const std::vector<std::string_view>& GidAddressesOf(const AddressMap& m, std::string_view netdev) {
  static const std::vector<std::string_view> kNone;
  auto it = m.find(netdev);
  return it == m.end() ? kNone : it->second;
}

std::string Addresses(const Netdev& n, const AddressMap* gid_addresses) {
  std::vector<std::string_view> all(n.ipv4_subnets().begin(), n.ipv4_subnets().end());
  if (gid_addresses != nullptr) {
    auto it = gid_addresses->find(n.name());
    if (it != gid_addresses->end()) all.insert(all.end(), it->second.begin(), it->second.end());
  }
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  std::string out;
  for (std::string_view s : all) {
    if (!out.empty()) out += ',';
    out.append(s.data(), s.size());
  }
  return out;
}

InventoryChange Change(InventoryChange::Kind kind, std::string subject, std::string old_value = "",
                       std::string new_value = "") {
  InventoryChange c;
  c.set_kind(kind);
  c.set_subject(std::move(subject));
  c.set_old_value(std::move(old_value));
  c.set_new_value(std::move(new_value));
  return c;
}

// Natural order for names; PCI addresses (fixed-width hex) sort as plain strings.
void SortBySubject(std::vector<InventoryChange>& v, bool natural) {
  std::stable_sort(
      v.begin(), v.end(), [natural](const InventoryChange& a, const InventoryChange& b) {
        return natural ? NaturalLess(a.subject(), b.subject()) : a.subject() < b.subject();
      });
}

}  // namespace

std::optional<uint32_t> RoceV2Ipv4GidIndex(const RdmaDevice& dev, const Port& port) {
  const Gid* g = RoceV2Ipv4Gid(dev, port);
  if (g == nullptr) return std::nullopt;
  return g->index();
}

bool SameGidTables(const RdmaDevice& a, const RdmaDevice& b) {
  Pairing<Port> ports = Pair(a.ports(), b.ports(), PortKey);
  if (!ports.removed.empty() || !ports.added.empty()) return false;
  for (const auto& [pa, pb] : ports.both) {
    if (!SameList(pa->gids(), pb->gids())) return false;
  }
  return true;
}

std::vector<InventoryChange> DiffHosts(const Host& before, const Host& after) {
  std::vector<InventoryChange> dev_removed, dev_added, port_state, port_rate, gid_table;
  bool other_rdma = false;
  bool gids_changed = false;  // Whether addresses taken from GID entries may differ.

  Pairing<RdmaDevice> devs = Pair(before.rdma_devices(), after.rdma_devices(), DeviceKey);
  for (const RdmaDevice* d : devs.removed) {
    dev_removed.push_back(Change(InventoryChange::KIND_DEVICE_REMOVED, d->name()));
  }
  for (const RdmaDevice* d : devs.added) {
    dev_added.push_back(Change(InventoryChange::KIND_DEVICE_ADDED, d->name()));
  }
  gids_changed = !devs.removed.empty() || !devs.added.empty();

  for (const auto& [a, b] : devs.both) {
    if (a == b) continue;  // One object in both hosts (a refresh shares what it did not read).
    if (!SameDeviceRest(*a, *b)) other_rdma = true;
    Pairing<Port> ports = Pair(a->ports(), b->ports(), PortKey);
    for (const Port* p : ports.removed) {
      port_state.push_back(Change(InventoryChange::KIND_PORT_STATE, PortName(*a, *p),
                                  std::string(PortStateWord(p->state())), ""));
    }
    for (const Port* p : ports.added) {
      port_state.push_back(Change(InventoryChange::KIND_PORT_STATE, PortName(*b, *p), "",
                                  std::string(PortStateWord(p->state()))));
    }
    gids_changed |= !ports.removed.empty() || !ports.added.empty();

    for (const auto& [pa, pb] : ports.both) {
      const bool state_changed = pa->state() != pb->state();
      const bool rate_changed = !SameRate(*pa, *pb);
      const bool gids_differ = !SameList(pa->gids(), pb->gids());
      if (state_changed) {
        port_state.push_back(Change(InventoryChange::KIND_PORT_STATE, PortName(*b, *pb),
                                    std::string(PortStateWord(pa->state())),
                                    std::string(PortStateWord(pb->state()))));
      }
      if (rate_changed) {
        port_rate.push_back(Change(InventoryChange::KIND_PORT_RATE, PortName(*b, *pb),
                                   RateValue(*pa), RateValue(*pb)));
      }
      if (gids_differ) {
        gids_changed = true;
        const Gid* ga = RoceV2Ipv4Gid(*a, *pa);
        const Gid* gb = RoceV2Ipv4Gid(*b, *pb);
        InventoryChange c =
            Change(InventoryChange::KIND_GID_TABLE, PortName(*b, *pb), GidValue(ga), GidValue(gb));
        if (ga != nullptr) c.set_old_roce_v2_ipv4_gid_index(ga->index());
        if (gb != nullptr) c.set_new_roce_v2_ipv4_gid_index(gb->index());
        gid_table.push_back(std::move(c));
      }
      if (!SamePortRest(*pa, *pb, state_changed, rate_changed)) other_rdma = true;
    }
  }

  std::vector<InventoryChange> nd_removed, nd_added, nd_addresses, nd_neighbors;
  bool other_netdevs = false;
  Pairing<Netdev> nds = Pair(before.netdevs(), after.netdevs(), NetdevKey);
  for (const Netdev* n : nds.removed) {
    nd_removed.push_back(Change(InventoryChange::KIND_NETDEV_REMOVED, n->name()));
  }
  for (const Netdev* n : nds.added) {
    nd_added.push_back(Change(InventoryChange::KIND_NETDEV_ADDED, n->name()));
  }
  std::optional<AddressMap> addr_before, addr_after;  // Built only when GID tables changed.
  for (const auto& [a, b] : nds.both) {
    // The very object (RefreshedHost shares those it did not read) differs at most in the
    // addresses of the GID entries that name it.
    if (a != b) {
      if (!SameNetdevRest(*a, *b)) other_netdevs = true;
      if (std::string na = NeighborText(*a), nb = NeighborText(*b); na != nb) {
        nd_neighbors.push_back(
            Change(InventoryChange::KIND_NEIGHBOR, b->name(), std::move(na), std::move(nb)));
      } else if (a->has_neighbor() != b->has_neighbor() ||
                 a->neighbor().SerializeAsString() != b->neighbor().SerializeAsString()) {
        other_netdevs = true;  // The same switch port saying something else (a description).
      }
    }
    const bool same_subnets = a == b || SameList(a->ipv4_subnets(), b->ipv4_subnets());
    if (!gids_changed && same_subnets) continue;
    if (gids_changed && !addr_before) {
      addr_before = GidAddresses(before);
      addr_after = GidAddresses(after);
    }
    if (same_subnets &&
        GidAddressesOf(*addr_before, a->name()) == GidAddressesOf(*addr_after, b->name())) {
      continue;
    }
    std::string va = Addresses(*a, addr_before ? &*addr_before : nullptr);
    std::string vb = Addresses(*b, addr_after ? &*addr_after : nullptr);
    if (va != vb) {
      nd_addresses.push_back(
          Change(InventoryChange::KIND_NETDEV_ADDRESSES, b->name(), std::move(va), std::move(vb)));
    }
  }

  std::vector<InventoryChange> acc_removed, acc_added;
  bool other_accelerators = false;
  Pairing<Accelerator> accs = Pair(before.accelerators(), after.accelerators(), AcceleratorKey);
  for (const Accelerator* x : accs.removed) {
    acc_removed.push_back(Change(InventoryChange::KIND_ACCELERATOR_REMOVED, x->pci_address()));
  }
  for (const Accelerator* x : accs.added) {
    acc_added.push_back(Change(InventoryChange::KIND_ACCELERATOR_ADDED, x->pci_address()));
  }
  for (const auto& [a, b] : accs.both) {
    if (!Same(*a, *b)) other_accelerators = true;
  }

  // Everything else, by top-level field (in field number order).
  std::vector<std::string_view> other;
  auto other_if = [&](bool differs, std::string_view field) {
    if (differs) other.push_back(field);
  };
  other_if(before.hostname() != after.hostname(), "hostname");
  other_if(before.kernel_release() != after.kernel_release(), "kernel_release");
  other_if(before.sysfs_root() != after.sysfs_root(), "sysfs_root");
  other_if(before.procfs_root() != after.procfs_root(), "procfs_root");
  other_if(other_rdma, "rdma_devices");
  other_if(other_netdevs, "netdevs");
  other_if(other_accelerators, "accelerators");
  other_if(!SameMsg(before.has_gpudirect(), before.gpudirect(), after.has_gpudirect(),
                    after.gpudirect()),
           "gpudirect");
  other_if(!SameList(before.topology(), after.topology()), "topology");
  other_if(!SameList(before.default_route_netdevs(), after.default_route_netdevs()),
           "default_route_netdevs");
  other_if(!SameList(before.numa_nodes(), after.numa_nodes()), "numa_nodes");
  other_if(!SameList(before.problems(), after.problems()), "problems");
  other_if(!SameMsg(before.has_nccl_topology(), before.nccl_topology(), after.has_nccl_topology(),
                    after.nccl_topology()),
           "nccl_topology");

  std::vector<InventoryChange> out;
  for (auto* group : {&dev_removed, &dev_added, &port_state, &port_rate, &gid_table, &nd_removed,
                      &nd_added, &nd_addresses, &nd_neighbors}) {
    SortBySubject(*group, /*natural=*/true);
    std::move(group->begin(), group->end(), std::back_inserter(out));
  }
  for (auto* group : {&acc_removed, &acc_added}) {
    SortBySubject(*group, /*natural=*/false);
    std::move(group->begin(), group->end(), std::back_inserter(out));
  }
  if (!other.empty()) {
    std::string fields;
    for (std::string_view s : other) {
      if (!fields.empty()) fields += ',';
      fields.append(s.data(), s.size());
    }
    out.push_back(Change(InventoryChange::KIND_OTHER, "", "", std::move(fields)));
  }
  return out;
}

std::vector<Finding> GidChangeFindings(const Host& at_start, const Host& now) {
  std::vector<Finding> out;
  Pairing<RdmaDevice> devs = Pair(at_start.rdma_devices(), now.rdma_devices(), DeviceKey);
  for (const auto& [a, b] : devs.both) {
    if (a == b) continue;  // The very object (RefreshedHost shares those it did not read).
    Pairing<Port> ports = Pair(a->ports(), b->ports(), PortKey);
    for (const auto& [pa, pb] : ports.both) {
      const Gid* ga = RoceV2Ipv4Gid(*a, *pa);
      if (ga == nullptr) continue;  // Nothing a job could have picked up.
      const Gid* gb = RoceV2Ipv4Gid(*b, *pb);
      std::string what;
      if (gb == nullptr) {
        what = absl::StrCat("RoCE v2 IPv4 GID index ", ga->index(), " (", ga->ipv4(),
                            ") is gone (jobs started before use a stale NCCL_IB_GID_INDEX)");
      } else if (ga->index() != gb->index()) {
        what = absl::StrCat("RoCE v2 IPv4 GID moved from index ", ga->index(), " to ", gb->index(),
                            " (jobs started before use a stale NCCL_IB_GID_INDEX)");
      } else if (ga->ipv4() != gb->ipv4()) {
        what = absl::StrCat("RoCE v2 IPv4 GID index ", ga->index(), " changed address from ",
                            ga->ipv4(), " to ", gb->ipv4(),
                            " (connections made before use the old address)");
      } else {
        continue;
      }
      Finding fd;
      fd.set_severity(SEVERITY_WARNING);
      fd.set_check("gid_table");
      fd.set_subject(PortName(*b, *pb));
      fd.set_message(absl::StrCat("GID table changed since start: ", what));
      out.push_back(std::move(fd));
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const Finding& x, const Finding& y) {
    return NaturalLess(x.subject(), y.subject());
  });
  return out;
}

}  // namespace fabric
