#include "agent/inventory/discovery/refresh.h"

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string_view>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "agent/common/natural_order.h"
#include "agent/inventory/discovery/discovery_internal.h"
#include "agent/inventory/topology/topology.h"

namespace fabric {

using namespace ::fabric::v1;  // NOLINT: the model's messages and enum values
namespace di = discovery_internal;

// ---- Refreshing ----

namespace {

// Sorts the pointers, not the messages: no contents swapped, and shared ones (RefreshedHost)
// left as they are.
template <typename Msg>
bool ByName(const Msg* a, const Msg* b) {
  return NaturalLess(a->name(), b->name());
}

template <typename Msg>
void SortByName(google::protobuf::RepeatedPtrField<Msg>* items) {
  std::sort(items->pointer_begin(), items->pointer_end(), ByName<Msg>);
}

// Sorts `items` whose first `mid` are sorted already (kept from a host, which discovery sorts)
// and the rest few (read again): in linear time for those kept.
template <typename Msg>
void SortAfter(google::protobuf::RepeatedPtrField<Msg>* items, int mid) {
  std::sort(items->pointer_begin() + mid, items->pointer_end(), ByName<Msg>);
  std::inplace_merge(items->pointer_begin(), items->pointer_begin() + mid, items->pointer_end(),
                     ByName<Msg>);
}

// Element `i` of `items`, made the refreshed host's own (a copy on `arena`) if it is shared with
// an older host, which must never be written.
template <typename Msg>
Msg* Writable(google::protobuf::RepeatedPtrField<Msg>* items, int i,
              google::protobuf::Arena* arena) {
  Msg*& slot = *(items->pointer_begin() + i);
  if (slot->GetArena() != arena) {
    Msg* copy = google::protobuf::Arena::CreateMessage<Msg>(arena);
    *copy = *slot;
    slot = copy;  // The field is on `arena` too: it frees neither.
  }
  return slot;
}

// Host-level problems: drops those `stale` says the refresh has read again, then adds `fresh`.
void SpliceProblems(const std::function<bool(const FieldProblem&)>& stale,
                    const di::Problems& fresh, Host* host) {
  di::Problems kept;
  for (FieldProblem& p : *host->mutable_problems()) {
    if (!stale(p)) *kept.Add() = std::move(p);
  }
  for (const FieldProblem& p : fresh) *kept.Add() = p;
  host->mutable_problems()->Swap(&kept);
}

// The netdevs a device's entry names: its ports' netdevs, GID entries' and parent netdev.
void NamedNetdevs(const v1::RdmaDevice& d, std::set<std::string>* out) {
  if (!d.parent_netdev().empty()) out->insert(d.parent_netdev());
  for (const Port& p : d.ports()) {
    if (!p.netdev().empty()) out->insert(p.netdev());
    for (const Gid& g : p.gids()) {
      if (!g.netdev().empty()) out->insert(g.netdev());
    }
  }
}

// The ARP sysctls of the netdevs read now (ReadArpSysctls reads those with an RDMA device);
// the others keep theirs. Host-level problems go to `part`.
void RefreshArpSysctls(const HostFs& proc, const std::set<std::string>& touched,
                       const std::set<std::string>& devices, Host* host, Host* part) {
  google::protobuf::Arena* arena = host->GetArena();
  Host arp;
  for (const v1::Netdev& nd : host->netdevs()) {
    if (touched.count(nd.name()) || devices.count(nd.rdma_device())) *arp.add_netdevs() = nd;
  }
  if (arp.netdevs().empty()) return;
  for (v1::Netdev& nd : *arp.mutable_netdevs()) {
    nd.clear_arp_ignore();
    nd.clear_arp_announce();
    di::Problems kept;
    for (FieldProblem& p : *nd.mutable_problems()) {
      if (p.field() != "arp_ignore" && p.field() != "arp_announce") *kept.Add() = std::move(p);
    }
    nd.mutable_problems()->Swap(&kept);
  }
  di::ReadArpSysctls(proc, &arp);
  auto* netdevs = host->mutable_netdevs();
  for (int i = 0, j = 0; i < netdevs->size() && j < arp.netdevs_size(); ++i) {
    if (arp.netdevs(j).name() == netdevs->Get(i).name()) {
      *Writable(netdevs, i, arena) = std::move(*arp.mutable_netdevs(j++));
    }
  }
  for (const FieldProblem& p : arp.problems()) *part->add_problems() = p;
}

// The PCI addresses of the PFs (RDMA devices of `old`) one of whose VFs among `names` has other
// netdevs on its function now than the PF's SR-IOV entry lists.
std::set<std::string> PfsWithOtherVfNetdevs(
    const HostFs& sys, const absl::flat_hash_map<std::string_view, const v1::RdmaDevice*>& old,
    const std::set<std::string>& names) {
  std::set<std::string> out;
  for (const std::string& n : names) {
    auto it = old.find(n);
    if (it == old.end()) continue;
    const v1::PciFunction& vf = it->second->pci();
    const std::string& pf = vf.sriov().pf_pci_address();
    if (pf.empty() || out.count(pf)) continue;
    std::optional<std::vector<std::string>> before;
    for (const auto& [name, d] : old) {
      if (d->pci().address() != pf) continue;
      for (const v1::VirtualFunction& e : d->pci().sriov().vfs()) {
        if (e.pci_address() == vf.address()) before.emplace(e.netdevs().begin(), e.netdevs().end());
      }
      break;
    }
    if (!before) continue;  // Its PF is no RDMA device of ours, or does not list it.
    auto listed = sys.ListDir(absl::StrCat("bus/pci/devices/", vf.address(), "/net"));
    std::vector<std::string> now = listed.ok() ? *std::move(listed) : std::vector<std::string>();
    std::sort(now.begin(), now.end());
    std::sort(before->begin(), before->end());
    if (now != *before) out.insert(pf);
  }
  return out;
}

// What a refreshed host owns: its arena (the host and what the refresh read), and what holds the
// objects it shares with older hosts, by their arena (null: a scanned host's heap). An older
// arena is kept, not the older host's owners: the shared objects are whole on their arena.
struct ArenaHost {
  std::shared_ptr<google::protobuf::Arena> arena = std::make_shared<google::protobuf::Arena>();
  absl::flat_hash_map<const google::protobuf::Arena*, std::shared_ptr<const void>> owners;
};

// A refreshed host's deleter: the host dies with its arena, so it keeps the ArenaHost, and the
// next refresh finds the owners there (std::get_deleter).
struct KeepArenaHost {
  std::shared_ptr<ArenaHost> owner;
  void operator()(Host*) const {}
};

// Adds what keeps `item` of `current` alive to `owner`; false when that is not known (a host
// put together elsewhere), and then nothing is shared.
bool AddOwner(const google::protobuf::MessageLite& item, const std::shared_ptr<const Host>& current,
              const ArenaHost* cur_owner, ArenaHost* owner) {
  const google::protobuf::Arena* arena = item.GetArena();
  if (owner->owners.contains(arena)) return true;
  if (cur_owner == nullptr) {  // A scanned host: its objects are on its heap.
    if (arena != nullptr) return false;
    owner->owners.emplace(arena, current);
    return true;
  }
  if (arena == cur_owner->arena.get()) {
    owner->owners.emplace(arena, cur_owner->arena);
    return true;
  }
  auto it = cur_owner->owners.find(arena);
  if (it == cur_owner->owners.end()) return false;
  owner->owners.emplace(arena, it->second);
  return true;
}

// Adds `item` to `field` (on an arena) as the very object when `share`, else as a copy.
template <typename Msg>
void AddItem(google::protobuf::RepeatedPtrField<Msg>* field, const Msg& item, bool share) {
  if (share) {
    field->UnsafeArenaAddAllocated(const_cast<Msg*>(&item));  // Never written: see RefreshedHost.
  } else {
    *field->Add() = item;
  }
}

// The host-level fields of `cur` that a refresh keeps as they were (RDMA devices, netdevs,
// topology and the pairing it puts together itself). RefreshTest.CopiesEveryHostField fails when
// Host gains a field, so that it is added here.
void CopyHostFields(const Host& cur, Host* host) {
  host->set_hostname(cur.hostname());
  host->set_kernel_release(cur.kernel_release());
  host->set_sysfs_root(cur.sysfs_root());
  host->set_procfs_root(cur.procfs_root());
  *host->mutable_accelerators() = cur.accelerators();
  if (cur.has_gpudirect()) *host->mutable_gpudirect() = cur.gpudirect();
  // The agent's, not discovery's: read with each full scan, kept by targeted refreshes.
  if (cur.has_nccl_topology()) *host->mutable_nccl_topology() = cur.nccl_topology();
  *host->mutable_default_route_netdevs() = cur.default_route_netdevs();
  *host->mutable_numa_nodes() = cur.numa_nodes();
  *host->mutable_problems() = cur.problems();
}

using DeviceIndex = absl::flat_hash_map<std::string_view, const v1::RdmaDevice*>;

// The RDMA devices a refresh reads again, with their netdevs.
struct DevicesRead {
  std::set<std::string> names;  // Read again, or gone: the devices of the host not kept.
  Host* part = nullptr;         // What was read (devices, their netdevs, problems).
  bool added = false;           // A device came ...
  bool removed = false;         // ... or went: routes, GPUDirect and topology are read again.
};

// Reads the planned devices (and, when the list may have changed, the new and gone ones; a VF's
// PF whose SR-IOV entry changed) as a whole scan would, into a Host on `arena`. Host-level facts
// read on the way go to `fresh`, and the fields they belong to to `reread`.
absl::StatusOr<DevicesRead> ReadDevices(const HostFs& sys, const DeviceIndex& old,
                                        const RefreshPlan& plan, google::protobuf::Arena* arena,
                                        Host* fresh, std::set<std::string>* reread) {
  DevicesRead r;
  r.names = plan.devices;
  std::set<std::string>& names = r.names;
  std::set<std::string> listed;
  if (plan.device_list) {
    auto ls = sys.ListDir("class/infiniband");
    if (!ls.ok() && !absl::IsNotFound(ls.status())) {
      return absl::FailedPreconditionError(
          absl::StrCat("class/infiniband: ", ls.status().message()));
    }
    if (ls.ok()) listed.insert(ls->begin(), ls->end());
    for (const std::string& n : listed) {
      if (!old.count(n)) names.insert(n);
    }
    for (const auto& [n, d] : old) {
      if (!listed.count(std::string(n))) names.insert(std::string(n));
    }
    reread->insert("rdma_devices");
  }
  for (const std::string& n : names) r.added = r.added || !old.count(n);
  di::RdmaNodes nodes;
  const bool reread_nodes = plan.uverbs || r.added;
  if (reread_nodes) {
    nodes = di::ReadRdmaNodes(sys, fresh);
    reread->insert("uverbs_device");
    reread->insert("umad_device");
  }
  // Else the devices read keep theirs (only theirs are looked up).
  auto keep_nodes = [&](const std::set<std::string>& which) {
    if (reread_nodes) return;
    for (const std::string& n : which) {
      auto it = old.find(n);
      if (it == old.end()) continue;
      if (!it->second->uverbs_device().empty()) nodes.uverbs[n] = it->second->uverbs_device();
      for (const v1::Port& p : it->second->ports()) {
        if (!p.umad_device().empty()) nodes.umad[{n, p.number()}] = p.umad_device();
      }
    }
  };
  // On the new host's arena, which points at its devices.
  r.part = google::protobuf::Arena::CreateMessage<Host>(arena);
  Host& part = *r.part;
  // A VF's netdevs are its PF's facts too (sriov.vfs[].netdevs): when those on a re-read VF's
  // function changed (renamed, moved into a pod's namespace or back), the PF's device is read
  // again, its PCI facts included.
  const std::set<std::string> stale_pfs = PfsWithOtherVfNetdevs(sys, old, names);
  for (const auto& [n, d] : old) {
    if (stale_pfs.count(d->pci().address())) names.insert(std::string(n));
  }
  di::PciReader pci(sys);
  if (!plan.device_list) {
    // Netdev events change no other PCI facts; devices coming or going change their PF's
    // SR-IOV set.
    for (const std::string& n : names) {
      auto it = old.find(n);
      const v1::PciFunction& f =
          it != old.end() ? it->second->pci() : v1::PciFunction::default_instance();
      if (!f.address().empty() && !stale_pfs.count(f.address())) pci.Reuse(f);
    }
  }
  di::RdmaScan scan;
  auto read = [&](const std::set<std::string>& which) {
    keep_nodes(which);
    std::vector<std::string> ordered(which.begin(), which.end());
    std::sort(ordered.begin(), ordered.end(), NaturalLess);
    for (const std::string& n : ordered) {
      const bool present =
          plan.device_list ? listed.count(n) > 0 : sys.Exists(absl::StrCat("class/infiniband/", n));
      if (present) di::ReadRdmaDevice(sys, n, nodes, &pci, &part, &scan);  // Else it is gone.
    }
  };
  read(names);
  // A VF's device that came or went changes its PF's SR-IOV entry: re-read the PF's device too.
  std::set<std::string> pfs;
  std::set<std::string> now;
  for (const v1::RdmaDevice& d : part.rdma_devices()) {
    now.insert(d.name());
    if (!old.count(d.name())) pfs.insert(d.pci().sriov().pf_pci_address());
  }
  for (const std::string& n : names) {
    if (auto it = old.find(n); it != old.end() && !now.count(n)) {
      pfs.insert(it->second->pci().sriov().pf_pci_address());
      r.removed = true;
    }
  }
  pfs.erase("");
  std::set<std::string> relatives;
  for (const auto& [n, d] : old) {
    if (pfs.empty()) break;
    if (pfs.count(d->pci().address()) && !names.count(std::string(n))) {
      relatives.insert(std::string(n));
    }
  }
  read(relatives);
  names.insert(relatives.begin(), relatives.end());
  di::ReadGidTables(std::move(scan.port_dirs), &part);
  SortByName(part.mutable_rdma_devices());  // The port directories are read: safe to move.
  di::ReadNetdevs(sys, scan.pci_dirs, {}, &part);
  return r;
}

// Whether the devices, netdevs and topology pairs `cur` keeps can be shared: unless that would
// keep more than kMaxKeptAlive older hosts alive (or their owners are not known); then they are
// copied, and the older hosts freed. What keeps the shared ones alive goes to `owner`.
template <typename DeviceKept, typename NetdevKept>
bool ShareKept(const std::shared_ptr<const Host>& current, DeviceKept device_kept,
               NetdevKept netdev_kept, ArenaHost* owner) {
  const Host& cur = *current;
  const KeepArenaHost* keep = std::get_deleter<KeepArenaHost>(current);
  const ArenaHost* cur_owner = keep != nullptr ? keep->owner.get() : nullptr;
  bool share = true;
  for (const v1::RdmaDevice& d : cur.rdma_devices()) {
    if (!share) break;
    if (device_kept(d)) share = AddOwner(d, current, cur_owner, owner);
  }
  for (const v1::Netdev& nd : cur.netdevs()) {
    if (!share) break;
    if (netdev_kept(nd)) share = AddOwner(nd, current, cur_owner, owner);
  }
  for (const v1::TopologyPair& p : cur.topology()) {
    if (!share) break;
    share = AddOwner(p, current, cur_owner, owner);
  }
  share = share && owner->owners.size() <= static_cast<size_t>(kMaxKeptAlive);
  if (!share) owner->owners.clear();
  return share;
}

// Default-route netdevs that no netdev of `host` holds any more (renamed, gone, or of no
// device read), read on their own into `netdevs`; their names go to `touched` and `read`.
void ReadLoneDefaultRouteNetdevs(const HostFs& sys, const Host& host,
                                 google::protobuf::RepeatedPtrField<v1::Netdev>* netdevs,
                                 std::set<std::string>* touched, std::set<std::string>* read,
                                 Host* part) {
  Host alone;
  for (const std::string& n : host.default_route_netdevs()) {
    bool have = false;
    for (const v1::Netdev& nd : *netdevs) have = have || nd.name() == n;
    if (!have) alone.add_default_route_netdevs(n);
  }
  if (alone.default_route_netdevs().empty()) return;
  // Their problems are read again too (a renamed or gone netdev's among them).
  touched->insert(alone.default_route_netdevs().begin(), alone.default_route_netdevs().end());
  di::ReadNetdevs(sys, {}, {}, &alone);
  for (v1::Netdev& nd : *alone.mutable_netdevs()) {
    touched->insert(nd.name());
    read->insert(nd.name());
    *netdevs->Add() = std::move(nd);
  }
  for (const FieldProblem& p : alone.problems()) *part->add_problems() = p;
}

// Routes give the read netdevs' subnets and default-route flags: read again when a route
// changed or a netdev is new, else those of the netdev before. Devices that came or went also
// change GPUDirect readiness, which needs the rest of procfs. FailedPrecondition when the
// default-route netdevs changed (a full rescan's to read).
absl::Status RefreshRoutes(const HostFs& sys, const HostFs& proc, const Host& cur,
                           const RefreshPlan& plan, const DevicesRead& devices,
                           const std::set<std::string>& read_netdevs,
                           google::protobuf::Arena* arena, Host* fresh,
                           std::set<std::string>* reread, Host* host) {
  absl::flat_hash_map<std::string_view, const v1::Netdev*> old_netdevs(
      static_cast<size_t>(cur.netdevs_size()));
  for (const v1::Netdev& nd : cur.netdevs()) old_netdevs[nd.name()] = &nd;
  bool new_netdev = false;
  for (const std::string& n : read_netdevs) new_netdev = new_netdev || !old_netdevs.count(n);
  std::optional<std::vector<Ipv4Route>> routes;
  std::set<std::string> modules;
  const bool devices_changed = devices.added || devices.removed;
  if (devices_changed) {
    di::ProcfsScan ps = di::ReadProcfs(sys, proc, fresh);
    routes = std::move(ps.routes);
    modules = std::move(ps.modules);
    host->set_hostname(fresh->hostname());
    host->set_kernel_release(fresh->kernel_release());
    reread->insert({"hostname", "kernel_release", "routes", "gpudirect"});
  } else if (plan.routes || new_netdev) {
    routes = di::ReadRoutes(proc, fresh);
    reread->insert("routes");
  }
  auto* netdevs = host->mutable_netdevs();
  if (routes) {
    const std::set<std::string> was(cur.default_route_netdevs().begin(),
                                    cur.default_route_netdevs().end());
    const std::set<std::string> now(fresh->default_route_netdevs().begin(),
                                    fresh->default_route_netdevs().end());
    if (was != now) return absl::FailedPreconditionError("the default-route netdevs changed");
    const di::RouteFacts facts(*routes, *host);
    for (int i = 0; i < netdevs->size(); ++i) {
      if (!facts.Holds(netdevs->Get(i))) facts.Apply(Writable(netdevs, i, arena));
    }
  } else {
    for (int i = 0; i < netdevs->size(); ++i) {
      if (!read_netdevs.count(netdevs->Get(i).name())) continue;
      v1::Netdev* nd = Writable(netdevs, i, arena);
      const v1::Netdev& before = *old_netdevs.at(nd->name());
      nd->set_default_route(before.default_route());
      *nd->mutable_ipv4_subnets() = before.ipv4_subnets();
    }
  }
  if (devices_changed) {
    host->clear_gpudirect();
    di::ReadGpuDirect(proc, modules, host);
  }
  return absl::OkStatus();
}

}  // namespace

// Reads what the plan names, then puts the new host together: the devices, netdevs and topology
// pairs kept (shared with `current`, or copied), those read, the routes, ARP sysctls and
// problems read again.
absl::StatusOr<RefreshedHost> Refresh(const HostFs& sys, const HostFs& proc,
                                      std::shared_ptr<const Host> current,
                                      const RefreshPlan& plan) {
  if (plan.full) return absl::FailedPreconditionError(plan.why);
  if (current == nullptr) return absl::FailedPreconditionError("no inventory to refresh");
  const Host& cur = *current;
  auto owner = std::make_shared<ArenaHost>();
  google::protobuf::Arena* arena = owner->arena.get();
  // The served host carries the snapshot's pairing; discovery does not: it is not copied.
  Host& host = *google::protobuf::Arena::CreateMessage<Host>(arena);
  CopyHostFields(cur, &host);
  Host fresh;                           // Host-level facts and problems read now.
  std::set<std::string> reread_fields;  // The host problems' fields read again.

  DeviceIndex old(static_cast<size_t>(cur.rdma_devices_size()));
  for (const v1::RdmaDevice& d : cur.rdma_devices()) old[d.name()] = &d;
  absl::StatusOr<DevicesRead> read = ReadDevices(sys, old, plan, arena, &fresh, &reread_fields);
  if (!read.ok()) return read.status();
  const std::set<std::string>& names = read->names;
  Host& part = *read->part;

  std::set<std::string> touched = plan.netdevs;  // Netdevs whose host problems are re-read.
  bool topology = read->added || read->removed;
  for (const v1::RdmaDevice& d : part.rdma_devices()) {
    NamedNetdevs(d, &touched);
    auto it = old.find(d.name());
    topology = topology || (it != old.end() && it->second->pci().address() != d.pci().address());
  }
  for (const std::string& n : names) {
    if (auto it = old.find(n); it != old.end()) NamedNetdevs(*it->second, &touched);
  }
  // Netdevs: those of the re-read devices are replaced; default-route netdevs that no device
  // holds any more, and the planned ones, are read on their own.
  std::set<std::string> read_netdevs;
  for (const v1::Netdev& nd : part.netdevs()) read_netdevs.insert(nd.name());
  auto device_kept = [&](const v1::RdmaDevice& d) { return !names.count(d.name()); };
  auto netdev_kept = [&](const v1::Netdev& nd) {
    return !names.count(nd.rdma_device()) && !read_netdevs.count(nd.name()) &&
           !plan.netdevs.count(nd.name());
  };
  const bool share = ShareKept(current, device_kept, netdev_kept, owner.get());
  {
    auto* devices = host.mutable_rdma_devices();
    for (const v1::RdmaDevice& d : cur.rdma_devices()) {
      if (device_kept(d)) AddItem(devices, d, share);
    }
    const int kept = devices->size();
    for (v1::RdmaDevice& d : *part.mutable_rdma_devices()) devices->UnsafeArenaAddAllocated(&d);
    SortAfter(devices, kept);
  }
  {
    // Shared as the devices are: routes and sysctls below write only through Writable.
    auto& netdevs = *host.mutable_netdevs();
    for (const v1::Netdev& nd : cur.netdevs()) {
      if (netdev_kept(nd)) AddItem(&netdevs, nd, share);
    }
    const int kept = netdevs.size();
    for (v1::Netdev& nd : *part.mutable_netdevs()) netdevs.UnsafeArenaAddAllocated(&nd);
    ReadLoneDefaultRouteNetdevs(sys, host, &netdevs, &touched, &read_netdevs, &part);
    SortAfter(&netdevs, kept);
  }
  RefreshArpSysctls(proc, touched, names, &host, &part);
  if (absl::Status s = RefreshRoutes(sys, proc, cur, plan, *read, read_netdevs, arena, &fresh,
                                     &reread_fields, &host);
      !s.ok()) {
    return s;
  }
  if (topology) {
    BuildTopology(&host);
  } else {
    for (const v1::TopologyPair& p : cur.topology()) AddItem(host.mutable_topology(), p, share);
  }

  SpliceProblems(
      [&](const FieldProblem& p) {
        if (reread_fields.count(p.field())) return true;
        if (p.field() == "netdevs" || p.field() == "arp_ignore" || p.field() == "arp_announce") {
          return touched.count(di::Basename(p.path())) > 0 ||
                 touched.count(di::Basename(di::Dirname(p.path()))) > 0 ||
                 (p.path().find("/all/") != std::string::npos && !touched.empty());
        }
        return false;
      },
      fresh.problems(), &host);
  for (const FieldProblem& p : part.problems()) *host.add_problems() = p;
  const int kept = static_cast<int>(owner->owners.size());
  return RefreshedHost{std::shared_ptr<Host>(&host, KeepArenaHost{std::move(owner)}), kept};
}

RefreshedHost ShareHost(std::shared_ptr<const Host> current) {
  auto owner = std::make_shared<ArenaHost>();
  Host& host = *google::protobuf::Arena::CreateMessage<Host>(owner->arena.get());
  const Host& cur = *current;
  CopyHostFields(cur, &host);
  bool share = true;
  {
    const KeepArenaHost* keep = std::get_deleter<KeepArenaHost>(current);
    const ArenaHost* cur_owner = keep != nullptr ? keep->owner.get() : nullptr;
    auto add_owners = [&](const auto& items) {
      for (const auto& item : items) {
        if (!share) return;
        share = AddOwner(item, current, cur_owner, owner.get());
      }
    };
    add_owners(cur.rdma_devices());
    add_owners(cur.netdevs());
    add_owners(cur.topology());
    share = share && owner->owners.size() <= static_cast<size_t>(kMaxKeptAlive);
    if (!share) owner->owners.clear();
  }
  for (const v1::RdmaDevice& d : cur.rdma_devices()) AddItem(host.mutable_rdma_devices(), d, share);
  for (const v1::Netdev& nd : cur.netdevs()) AddItem(host.mutable_netdevs(), nd, share);
  for (const v1::TopologyPair& p : cur.topology()) AddItem(host.mutable_topology(), p, share);
  const int kept = static_cast<int>(owner->owners.size());
  return RefreshedHost{std::shared_ptr<Host>(&host, KeepArenaHost{std::move(owner)}), kept};
}

v1::Netdev* MutableNetdev(v1::Host* host, int i) {
  return Writable(host->mutable_netdevs(), i, host->GetArena());
}

}  // namespace fabric
