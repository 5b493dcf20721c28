// Netdevs: each RDMA device's own netdevs matched to its ports, the upper devices (macvlan, VLAN)
// its GID entries name, and the default-route netdevs, with their connected IPv4 subnets.
#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "agent/common/natural_order.h"
#include "agent/inventory/discovery/discovery_internal.h"
#include "agent/inventory/discovery/parse.h"
#include "agent/rdma/mtu.h"

namespace fabric::discovery_internal {

using namespace ::fabric::v1;  // NOLINT: the model's messages and enum values

namespace {

// "virtio<N>": a device on the virtio bus, below the PCI function of virtio-pci.
bool IsVirtioDevice(std::string_view name) {
  constexpr std::string_view kPrefix = "virtio";
  if (name.size() <= kPrefix.size() || name.substr(0, kPrefix.size()) != kPrefix) return false;
  return std::all_of(name.begin() + kPrefix.size(), name.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

struct NetdevInfo {
  Netdev nd;
  std::optional<int64_t> dev_port;
};

// Reads each netdev once, however many devices and GID entries lead to it.
class NetdevReader {
 public:
  NetdevReader(const HostFs& sys, Host* host) : sys_(sys), host_(host) {}

  NetdevInfo& ReadNetdev(const std::string& name, const std::string& dir) {
    auto [it, inserted] = netdevs_.try_emplace(name);
    NetdevInfo& info = it->second;
    if (!inserted) return info;
    Netdev& nd = info.nd;
    nd.set_name(name);
    Problems* problems = nd.mutable_problems();
    auto d = sys_.OpenDir(dir);
    if (!d.ok()) {
      AddProblem(problems, "name", dir, d.status());
      return info;
    }
    const HostDir& nd_dir = **d;
    if (auto v = ReadField(nd_dir, "address", "mac", problems, ParseMac)) nd.set_mac(*v);
    if (auto v = ReadField(nd_dir, "mtu", "mtu", problems, ParseInt)) {
      nd.set_mtu(static_cast<uint32_t>(*v));
    }
    if (auto v = ReadField(nd_dir, "operstate", "operstate", problems, ParseText)) {
      nd.set_operstate(*v);
    }
    // speed fails with EINVAL while the link is down and reads -1 on some drivers: unknown.
    if (auto speed = nd_dir.ReadFile("speed"); speed.ok()) {
      if (auto v = ParseInt(*speed); v.ok() && *v > 0) {
        nd.set_speed_mbps(*v);
      } else if (!v.ok()) {
        AddProblem(problems, "speed_mbps", JoinPath(dir, "speed"), v.status());
      }
    } else if (!NoAttributes(speed.status())) {
      AddProblem(problems, "speed_mbps", JoinPath(dir, "speed"), speed.status());
    }
    if (auto v = ReadField(nd_dir, "ifindex", "ifindex", problems, ParseInt)) {
      nd.set_ifindex(static_cast<int32_t>(*v));
    }
    if (auto dp = nd_dir.ReadFile("dev_port"); dp.ok()) {
      if (auto v = ParseInt(*dp); v.ok()) info.dev_port = *v;
    } else {
      NoteTransient(problems, "rdma_port", JoinPath(dir, "dev_port"), dp.status());
    }
    return info;
  }

  // Finds the netdev named `name` through class/net, inside the root.
  NetdevInfo* ReadNetdevByName(const std::string& name) {
    if (auto it = netdevs_.find(name); it != netdevs_.end()) return &it->second;
    const std::string link = absl::StrCat("class/net/", name);
    auto real = sys_.RealPath(link);
    if (!real.ok()) {
      AddProblem(host_->mutable_problems(), "netdevs", link, real.status());
      return nullptr;
    }
    NetdevInfo& info = ReadNetdev(name, *real);
    // .../<BDF>/net/<name>: the PCI function it belongs to; virtio-net has the virtio bus
    // device in between (.../<BDF>/virtio<N>/net/<name>), as in a VM.
    std::string parent = Dirname(Dirname(*real));
    if (IsVirtioDevice(Basename(parent))) parent = Dirname(parent);
    if (auto a = ParsePciAddress(Basename(parent)); a.ok()) info.nd.set_pci_address(*a);
    return &info;
  }

  std::map<std::string, NetdevInfo>& netdevs() { return netdevs_; }

 private:
  const HostFs& sys_;
  Host* host_;
  std::map<std::string, NetdevInfo> netdevs_;
};

}  // namespace

void ReadNetdevs(const HostFs& sys, const std::map<std::string, std::string>& device_pci_dirs,
                 const std::vector<Ipv4Route>& routes, Host* host) {
  NetdevReader reader(sys, host);
  for (RdmaDevice& dev : *host->mutable_rdma_devices()) {
    auto pci_it = device_pci_dirs.find(dev.name());
    const std::string pci_dir = pci_it == device_pci_dirs.end() ? "" : pci_it->second;
    std::vector<NetdevInfo*> own;
    if (!pci_dir.empty()) {
      if (auto names = sys.ListDir(JoinPath(pci_dir, "net")); names.ok()) {
        for (const std::string& n : *names) {
          NetdevInfo& info = reader.ReadNetdev(n, absl::StrCat(pci_dir, "/net/", n));
          info.nd.set_pci_address(dev.pci().address());
          info.nd.set_rdma_device(dev.name());
          own.push_back(&info);
        }
      } else {
        NoteTransient(dev.mutable_problems(), "netdevs", JoinPath(pci_dir, "net"), names.status());
      }
    } else if (!dev.parent_netdev().empty()) {
      if (NetdevInfo* info = reader.ReadNetdevByName(dev.parent_netdev())) {
        info->nd.set_rdma_device(dev.name());
        own.push_back(info);
      }
    }
    for (Port& port : *dev.mutable_ports()) {
      // The port's own netdev: by dev_port, else the only one, else the default GID's.
      NetdevInfo* mine = nullptr;
      for (NetdevInfo* info : own) {
        if (info->dev_port && *info->dev_port + 1 == port.number()) mine = info;
      }
      if (mine == nullptr && own.size() == 1) mine = own[0];
      port.clear_active_mtu();
      if (mine != nullptr) {
        port.set_netdev(mine->nd.name());
        mine->nd.set_rdma_port(port.number());
        if (port.link_layer() == LINK_LAYER_ETHERNET && mine->nd.has_mtu()) {
          if (auto mtu = rdma::RoceActiveMtu(mine->nd.mtu())) port.set_active_mtu(*mtu);
        }
      } else {
        for (const Gid& g : port.gids()) {
          if (g.index() == 0 && !g.netdev().empty()) port.set_netdev(g.netdev());
        }
      }
      // Netdevs named only by GID entries: macvlan, VLAN and other upper devices.
      for (const Gid& g : port.gids()) {
        if (g.netdev().empty() || g.netdev() == port.netdev()) continue;
        NetdevInfo* upper = reader.ReadNetdevByName(g.netdev());
        if (upper == nullptr || !upper->nd.rdma_device().empty()) continue;
        upper->nd.set_upper(true);
        upper->nd.set_rdma_device(dev.name());
        upper->nd.set_rdma_port(port.number());
      }
    }
  }
  for (const std::string& name : host->default_route_netdevs()) reader.ReadNetdevByName(name);

  std::map<std::string, NetdevInfo>& netdevs = reader.netdevs();
  std::vector<std::string> names;
  for (const auto& [name, info] : netdevs) names.push_back(name);
  std::sort(names.begin(), names.end(), NaturalLess);
  for (const std::string& name : names) *host->add_netdevs() = std::move(netdevs[name].nd);
  ApplyRoutes(routes, host);
}

RouteFacts::RouteFacts(const std::vector<Ipv4Route>& routes, const Host& host)
    : defaults_(host.default_route_netdevs().begin(), host.default_route_netdevs().end()) {
  // Connected routes (no gateway) give the interface's subnets; grouped once, not scanned per
  // netdev (hundreds of each on an SR-IOV host).
  for (const Ipv4Route& r : routes) {
    if (r.gateway != 0 || r.mask == 0 || (r.flags & 0x2)) continue;
    if (auto len = MaskToPrefixLen(r.mask); len.ok()) {
      connected_[r.iface].push_back(FormatCidr(r.destination, *len));
    }
  }
}

const std::vector<std::string>& RouteFacts::Subnets(const Netdev& nd) const {
  static const std::vector<std::string> kNone;
  auto it = connected_.find(nd.name());
  return it == connected_.end() ? kNone : it->second;
}

bool RouteFacts::Holds(const Netdev& nd) const {
  if (nd.default_route() != defaults_.contains(nd.name())) return false;
  const std::vector<std::string>& subnets = Subnets(nd);
  return std::equal(nd.ipv4_subnets().begin(), nd.ipv4_subnets().end(), subnets.begin(),
                    subnets.end());
}

void RouteFacts::Apply(Netdev* nd) const {
  nd->set_default_route(defaults_.contains(nd->name()));
  nd->clear_ipv4_subnets();
  for (const std::string& s : Subnets(*nd)) nd->add_ipv4_subnets(s);
}

void ApplyRoutes(const std::vector<Ipv4Route>& routes, Host* host) {
  const RouteFacts facts(routes, *host);
  for (Netdev& nd : *host->mutable_netdevs()) facts.Apply(&nd);
}

}  // namespace fabric::discovery_internal
