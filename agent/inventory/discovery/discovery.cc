#include "agent/inventory/discovery/discovery.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "agent/common/natural_order.h"
#include "agent/common/strings.h"
#include "agent/inventory/discovery/discovery_internal.h"
#include "agent/inventory/discovery/parse.h"
#include "agent/inventory/topology/topology.h"

namespace fabric {
namespace discovery_internal {

void AddProblem(Problems* problems, std::string_view field, std::string_view path,
                absl::string_view reason) {
  v1::FieldProblem* p = problems->Add();
  p->set_field(std::string(field));
  p->set_path(std::string(path));
  p->set_reason(std::string(reason));
}

void AddProblem(Problems* problems, std::string_view field, std::string_view path,
                const absl::Status& why) {
  AddProblem(problems, field, path, why.message());
  if (IsTransientReadError(why)) problems->rbegin()->set_transient(true);
}

void NoteTransient(Problems* problems, std::string_view field, std::string_view path,
                   const absl::Status& why) {
  if (IsTransientReadError(why)) AddProblem(problems, field, path, why);
}

bool NoAttributes(const absl::Status& s) {
  return absl::IsInvalidArgument(s) || absl::IsNotFound(s);
}

}  // namespace discovery_internal

namespace {

using namespace ::fabric::v1;                  // NOLINT: the model's messages and enum values
using namespace ::fabric::discovery_internal;  // NOLINT: the parts of the scan

class Discovery {
 public:
  Discovery(const HostFs& sys, const HostFs& proc) : sys_(sys), proc_(proc) {}

  absl::StatusOr<Host> Run() {
    if (!sys_.Exists("")) {
      return absl::NotFoundError(absl::StrCat("sysfs root ", sys_.root(), " does not exist"));
    }
    if (!sys_.Exists("devices") && !sys_.Exists("class")) {
      return absl::FailedPreconditionError(
          absl::StrCat(sys_.root(), " is not a sysfs root: it has no class/ or devices/"));
    }
    host_.set_sysfs_root(sys_.root());
    host_.set_procfs_root(proc_.root());
    ReadProcfs();
    ReadNumaNodes();
    ReadUverbs();
    ReadRdmaDevices();
    ReadGidTables();
    ReadNetdevs(sys_, device_pci_dir_, routes_, &host_);
    ReadAccelerators(sys_, &pci_, &host_);
    ReadGpuDirect(proc_, modules_, &host_);
    BuildTopology(&host_);
    return std::move(host_);
  }

 private:
  // --- procfs: identity, routes, modules -------------------------------------------------
  void ReadProcfs() {
    if (auto name = proc_.ReadFile("sys/kernel/hostname"); name.ok()) {
      host_.set_hostname(std::string(Trim(*name)));
    } else {
      AddProblem(host_.mutable_problems(), "hostname", "sys/kernel/hostname", name.status());
    }
    if (auto rel = proc_.ReadFile("sys/kernel/osrelease"); rel.ok()) {
      host_.set_kernel_release(std::string(Trim(*rel)));
    } else {
      AddProblem(host_.mutable_problems(), "kernel_release", "sys/kernel/osrelease", rel.status());
    }
    std::set<std::string> defaults;
    if (auto text = proc_.ReadFile("net/route"); text.ok()) {
      std::vector<std::string> bad;
      auto routes = ParseProcNetRoute(*text, &bad);
      for (const std::string& b : bad)
        AddProblem(host_.mutable_problems(), "routes", "net/route", b);
      if (routes.ok()) {
        routes_ = *std::move(routes);
        for (const Ipv4Route& r : routes_) {
          if (r.destination == 0 && r.mask == 0) defaults.insert(r.iface);
        }
      } else {
        AddProblem(host_.mutable_problems(), "routes", "net/route", routes.status());
      }
    } else {
      AddProblem(host_.mutable_problems(), "routes", "net/route", text.status());
    }
    // IPv6 may be disabled: a missing file is no problem.
    if (auto text = proc_.ReadFile("net/ipv6_route"); text.ok()) {
      std::vector<std::string> bad;
      auto ifaces = ParseIpv6DefaultRouteIfaces(*text, &bad);
      for (const std::string& b : bad) {
        AddProblem(host_.mutable_problems(), "routes", "net/ipv6_route", b);
      }
      if (ifaces.ok()) defaults.insert(ifaces->begin(), ifaces->end());
    } else {
      NoteTransient(host_.mutable_problems(), "routes", "net/ipv6_route", text.status());
    }
    for (const std::string& d : defaults) host_.add_default_route_netdevs(d);

    if (auto list = sys_.ListDir("module"); list.ok()) {
      modules_.insert(list->begin(), list->end());
    } else {
      NoteTransient(host_.mutable_problems(), "gpudirect", "module", list.status());
    }
    if (auto text = proc_.ReadFile("modules"); text.ok()) {
      if (auto names = ParseProcModules(*text); names.ok()) {
        modules_.insert(names->begin(), names->end());
      } else {
        AddProblem(host_.mutable_problems(), "gpudirect", "modules", names.status());
      }
    } else {
      NoteTransient(host_.mutable_problems(), "gpudirect", "modules", text.status());
    }
  }

  void ReadNumaNodes() {
    auto text = sys_.ReadFile("devices/system/node/online");
    if (!text.ok()) {
      AddProblem(host_.mutable_problems(), "numa_nodes", "devices/system/node/online",
                 text.status());
      return;
    }
    auto ids = ParseIdList(*text);
    if (!ids.ok()) {
      AddProblem(host_.mutable_problems(), "numa_nodes", "devices/system/node/online",
                 ids.status());
      return;
    }
    for (int32_t id : *ids) host_.add_numa_nodes(id);
  }

  void ReadUverbs() {
    auto names = sys_.ListDir("class/infiniband_verbs");
    if (!names.ok()) {  // no uverbs module: devices simply have no uverbs node
      NoteTransient(host_.mutable_problems(), "uverbs_device", "class/infiniband_verbs",
                    names.status());
      return;
    }
    for (const std::string& n : *names) {
      if (!absl::StartsWith(n, "uverbs")) continue;
      const std::string path = absl::StrCat("class/infiniband_verbs/", n, "/ibdev");
      if (auto ibdev = sys_.ReadFile(path); ibdev.ok()) {
        uverbs_[std::string(Trim(*ibdev))] = n;
      } else {
        NoteTransient(host_.mutable_problems(), "uverbs_device", path, ibdev.status());
      }
    }
  }

  // --- RDMA devices ------------------------------------------------------------------
  void ReadRdmaDevices() {
    auto names = sys_.ListDir("class/infiniband");
    if (!names.ok()) {
      // No ib_core loaded: a host without RDMA, which callers report; not a discovery failure.
      if (!absl::IsNotFound(names.status())) {
        AddProblem(host_.mutable_problems(), "rdma_devices", "class/infiniband", names.status());
      }
      return;
    }
    std::sort(names->begin(), names->end(), NaturalLess);
    for (const std::string& name : *names) ReadRdmaDevice(name);
  }

  void ReadRdmaDevice(const std::string& name) {
    RdmaDevice* dev = host_.add_rdma_devices();
    dev->set_name(name);
    Problems* problems = dev->mutable_problems();
    const std::string link = absl::StrCat("class/infiniband/", name);
    auto real = sys_.RealPath(link);
    if (!real.ok()) {
      AddProblem(problems, "name", link, real.status());
      return;
    }
    auto d = sys_.OpenDir(*real);
    if (!d.ok()) {
      AddProblem(problems, "name", *real, d.status());
      return;
    }
    const HostDir& dd = **d;
    if (auto v = ReadField(dd, "node_guid", "node_guid", problems, ParseGuid)) {
      dev->set_node_guid(*v);
    }
    // Software devices (rxe, siw) have no hca_type and an empty fw_ver: not a problem there.
    const bool software = !dd.Exists("device");
    if (software) {
      if (auto v = dd.ReadFile("fw_ver"); v.ok()) {
        dev->set_fw_ver(std::string(Trim(*v)));
      } else {
        NoteTransient(problems, "fw_ver", JoinPath(*real, "fw_ver"), v.status());
      }
      if (auto v = dd.ReadFile("hca_type"); v.ok()) {
        dev->set_hca_type(std::string(Trim(*v)));
      } else {
        NoteTransient(problems, "hca_type", JoinPath(*real, "hca_type"), v.status());
      }
    } else {
      if (auto v = ReadField(dd, "fw_ver", "fw_ver", problems, ParseText)) dev->set_fw_ver(*v);
      if (auto v = ReadField(dd, "hca_type", "hca_type", problems, ParseText)) {
        dev->set_hca_type(*v);
      }
    }
    if (auto v = ReadField(dd, "node_type", "node_type", problems, ParseNodeType)) {
      dev->set_node_type(*v);
    }
    if (auto it = uverbs_.find(name); it != uverbs_.end()) dev->set_uverbs_device(it->second);

    // The PCI function, or for a software device (rxe, siw) the netdev it runs on.
    std::string pci_dir;
    const std::string device_link = JoinPath(*real, "device");
    if (auto pci = sys_.RealPath(device_link); pci.ok()) {
      if (ParsePciAddress(Basename(*pci)).ok()) {
        pci_dir = *pci;
        *dev->mutable_pci() = pci_.Read(pci_dir);
      }
    } else if (IsTransientReadError(pci.status()) || sys_.ReadLink(device_link).ok()) {
      AddProblem(problems, "pci", device_link, pci.status());  // dangling, or unreadable now
    }
    if (pci_dir.empty()) {
      if (auto parent = dd.ReadFile("parent"); parent.ok()) {
        dev->set_parent_netdev(std::string(Trim(*parent)));
      } else {
        NoteTransient(problems, "parent_netdev", JoinPath(*real, "parent"), parent.status());
      }
    }
    device_pci_dir_[name] = pci_dir;

    auto ports = dd.ListDir("ports");
    if (!ports.ok()) {
      AddProblem(problems, "ports", JoinPath(*real, "ports"), ports.status());
      return;
    }
    std::vector<uint32_t> numbers;
    for (const std::string& p : *ports) {
      uint32_t n;
      if (absl::SimpleAtoi(p, &n)) numbers.push_back(n);
    }
    std::sort(numbers.begin(), numbers.end());
    for (uint32_t n : numbers) ReadPort(*real, n, dev->add_ports());
  }

  // GID tables are most of discovery's reads and independent per port, so they are read in
  // parallel, one port per task. Each task writes only its own Port; HostFs reads are plain
  // system calls and safe to share.
  void ReadGidTables() {
    std::vector<Port*> ports;
    for (RdmaDevice& dev : *host_.mutable_rdma_devices()) {
      for (Port& p : *dev.mutable_ports()) {
        if (gid_dirs_.count(&p)) ports.push_back(&p);
      }
    }
    auto work = [&](std::atomic<size_t>* next) {
      for (size_t i; (i = next->fetch_add(1)) < ports.size();) {
        const auto& [dir, pd] = gid_dirs_.at(ports[i]);
        ReadGids(*pd, dir, ports[i]);
      }
    };
    std::atomic<size_t> next{0};
    const size_t threads =
        std::min<size_t>({ports.size(), std::max(1u, std::thread::hardware_concurrency()), 8});
    std::vector<std::thread> pool;
    for (size_t t = 1; t < threads; ++t) pool.emplace_back(work, &next);
    work(&next);
    for (std::thread& t : pool) t.join();
    gid_dirs_.clear();
  }

  void ReadPort(const std::string& dev_dir, uint32_t number, Port* port) {
    port->set_number(number);
    Problems* problems = port->mutable_problems();
    const std::string dir = absl::StrCat(dev_dir, "/ports/", number);
    auto d = sys_.OpenDir(dir);
    if (!d.ok()) {
      AddProblem(problems, "number", dir, d.status());
      return;
    }
    const HostDir& pd = **d;
    if (auto v = ReadField(pd, "state", "state", problems, ParsePortState)) port->set_state(*v);
    if (auto v = ReadField(pd, "phys_state", "phys_state", problems, ParsePhysState)) {
      port->set_phys_state(*v);
    }
    if (auto text = pd.ReadFile("rate"); text.ok()) {
      port->set_rate(std::string(Trim(*text)));
      if (auto v = ParseRateGbps(*text); v.ok()) {
        port->set_rate_gbps(*v);
      } else {
        AddProblem(problems, "rate_gbps", JoinPath(dir, "rate"), v.status());
      }
    } else {
      AddProblem(problems, "rate", JoinPath(dir, "rate"), text.status());
    }
    if (auto v = ReadField(pd, "link_layer", "link_layer", problems, ParseLinkLayer)) {
      port->set_link_layer(*v);
    }
    auto u32 = [](std::string_view s) -> absl::StatusOr<uint32_t> {
      auto v = ParseHex(s);
      if (!v.ok()) return v.status();
      if (*v > 0xffffffffu) return absl::InvalidArgumentError("out of range");
      return static_cast<uint32_t>(*v);
    };
    if (auto v = ReadField(pd, "lid", "lid", problems, u32)) port->set_lid(*v);
    if (auto v = ReadField(pd, "sm_lid", "sm_lid", problems, u32)) port->set_sm_lid(*v);
    gid_dirs_.emplace(port, std::make_pair(dir, std::move(*d)));  // read by ReadGidTables
  }

  void ReadGids(const HostDir& pd, const std::string& dir, Port* port) {
    Problems* problems = port->mutable_problems();
    // Every slot of a GID table is a file, most of them zero: the hot loop of discovery. Read
    // each relative to the open gids/ directory into a stack buffer.
    auto gids = pd.OpenDir("gids");
    absl::StatusOr<std::vector<std::string>> entries =
        gids.ok() ? (*gids)->ListDir("") : absl::StatusOr<std::vector<std::string>>(gids.status());
    if (!entries.ok()) {
      AddProblem(problems, "gids", JoinPath(dir, "gids"), entries.status());
      return;
    }
    std::vector<uint32_t> indices;
    indices.reserve(entries->size());
    for (const std::string& e : *entries) {
      uint32_t i;
      if (absl::SimpleAtoi(e, &i)) indices.push_back(i);
    }
    std::sort(indices.begin(), indices.end());
    // Absent in some containers; then entries simply have no attributes.
    auto types = pd.OpenDir("gid_attrs/types");
    auto ndevs = pd.OpenDir("gid_attrs/ndevs");
    if (!types.ok())
      NoteTransient(problems, "gids.type", JoinPath(dir, "gid_attrs/types"), types.status());
    if (!ndevs.ok())
      NoteTransient(problems, "gids.netdev", JoinPath(dir, "gid_attrs/ndevs"), ndevs.status());
    char buf[64];
    char name[16];
    for (uint32_t i : indices) {
      const size_t name_len = static_cast<size_t>(std::snprintf(name, sizeof(name), "%u", i));
      const std::string_view index(name, name_len);
      auto len = (*gids)->ReadSmall(index, buf, sizeof(buf));
      if (!len.ok()) {
        AddProblem(problems, "gids", absl::StrCat(dir, "/gids/", i), len.status());
        continue;
      }
      const std::string_view text(buf, *len);
      auto gid = ParseGid(text);
      if (!gid.ok()) {
        AddProblem(problems, "gids", absl::StrCat(dir, "/gids/", i), gid.status());
        continue;
      }
      if (IsZeroGid(*gid)) continue;
      Gid* g = port->add_gids();
      g->set_index(i);
      g->set_gid(absl::AsciiStrToLower(Av(Trim(text))));
      if (auto v4 = GidIpv4(*gid)) g->set_ipv4(*v4);
      if (types.ok()) {
        if (auto type = (*types)->ReadFile(index); type.ok()) {
          if (auto t = ParseGidType(*type, port->link_layer()); t.ok()) {
            g->set_type(*t);
          } else {
            AddProblem(problems, "gids.type", absl::StrCat(dir, "/gid_attrs/types/", i),
                       t.status());
          }
        } else if (!NoAttributes(type.status())) {
          AddProblem(problems, "gids.type", absl::StrCat(dir, "/gid_attrs/types/", i),
                     type.status());
        }
      }
      if (ndevs.ok()) {
        if (auto ndev = (*ndevs)->ReadFile(index); ndev.ok()) {
          g->set_netdev(std::string(Trim(*ndev)));
        } else if (!NoAttributes(ndev.status())) {
          AddProblem(problems, "gids.netdev", absl::StrCat(dir, "/gid_attrs/ndevs/", i),
                     ndev.status());
        }
      }
    }
  }

  const HostFs& sys_;
  const HostFs& proc_;
  Host host_;
  PciReader pci_{sys_};
  std::map<const Port*, std::pair<std::string, std::unique_ptr<HostDir>>> gid_dirs_;
  std::map<std::string, std::string> device_pci_dir_;
  std::map<std::string, std::string> uverbs_;
  std::set<std::string> modules_;
  std::vector<Ipv4Route> routes_;
};

}  // namespace

absl::StatusOr<Host> Discover(const HostFs& sysfs, const HostFs& procfs) {
  return Discovery(sysfs, procfs).Run();
}

void ForEachProblem(const Host& host,
                    const std::function<void(const std::string&, const FieldProblem&)>& fn) {
  auto each = [&](const std::string& where, const Problems& problems) {
    for (const FieldProblem& p : problems) fn(where, p);
  };
  each("host", host.problems());
  for (const RdmaDevice& d : host.rdma_devices()) {
    each(d.name(), d.problems());
    each(d.name() + " pci", d.pci().problems());
    for (const Port& p : d.ports()) each(absl::StrCat(d.name(), ":", p.number()), p.problems());
  }
  for (const Netdev& n : host.netdevs()) each(n.name(), n.problems());
  for (const Accelerator& a : host.accelerators()) each(a.pci_address(), a.pci().problems());
}

}  // namespace fabric
