#include "agent/policy/select/candidates.h"

#include <algorithm>
#include <set>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "agent/common/cidr.h"
#include "agent/common/ip.h"
#include "agent/common/natural_order.h"
#include "agent/common/strings.h"
#include "agent/inventory/discovery/parse.h"
#include "agent/inventory/query/host_query.h"
#include "agent/rdma/gid_choice.h"

namespace fabric::select_internal {

using namespace ::fabric::v1;  // NOLINT: enum values of the model

namespace {

std::string State(PortState s) { return std::string(PortStateWord(s)); }

// An unspecified link layer (attribute unreadable) with RoCE GIDs is still RoCE: treating it as
// InfiniBand would leave the GID index out of the environment.
bool IsRoce(const Port& port) {
  if (port.link_layer() == LINK_LAYER_ETHERNET) return true;
  if (port.link_layer() != LINK_LAYER_UNSPECIFIED) return false;
  return std::any_of(port.gids().begin(), port.gids().end(), [](const Gid& g) {
    return g.type() == GID_TYPE_ROCE_V1 || g.type() == GID_TYPE_ROCE_V2;
  });
}

// The port's usable GID by the one rule (agent/rdma/gid_choice.h), over its own netdev's GIDs, and
// whether it holds an IPv6 address. A port without a netdev of its own has none: another netdev's
// address may not route to it.
std::pair<const Gid*, bool> ChooseGid(const Port& port) {
  if (port.netdev().empty()) return {nullptr, false};
  std::vector<rdma::GidSlot> table;
  table.reserve(port.gids_size());
  for (const Gid& g : port.gids()) {
    // The model's ipv4 and ipv6 fields are the GID's routable address (discovery fills them from
    // the GID; ipv6 only for a global one).
    rdma::GidSlot s;
    if (absl::StatusOr<uint32_t> ipv4 = ParseIpv4(g.ipv4()); ipv4.ok()) {
      s.gid =
          rdma::Ipv4MappedGid({static_cast<uint8_t>(*ipv4 >> 24), static_cast<uint8_t>(*ipv4 >> 16),
                               static_cast<uint8_t>(*ipv4 >> 8), static_cast<uint8_t>(*ipv4)});
    } else if (!g.ipv6().empty()) {
      absl::StatusOr<IpAddress> ipv6 = ParseIp(g.ipv6());
      if (!ipv6.ok() || ipv6->family != AF_INET6) continue;
      std::copy(std::begin(ipv6->addr.s6_addr), std::end(ipv6->addr.s6_addr), s.gid.begin());
    } else {
      continue;
    }
    s.index = static_cast<int>(g.index());
    if (g.type() == GID_TYPE_ROCE_V2) s.kind = rdma::GidKind::kRoceV2;
    s.netdev = g.netdev();
    table.push_back(std::move(s));
  }
  std::optional<rdma::GidChoice> choice =
      rdma::ChooseRoceV2Gid(table, {.netdev = port.netdev(), .ipv4 = {}, .ipv6 = {}});
  if (!choice) return {nullptr, false};
  for (const Gid& g : port.gids()) {
    if (static_cast<int>(g.index()) == choice->index) {
      return {&g, choice->family == rdma::GidFamily::kIpv6};
    }
  }
  return {nullptr, false};
}

using NetdevIndex = absl::flat_hash_map<std::string_view, const Netdev*>;

// The most specific connected subnet of `netdev` that holds `ipv4`; empty when none is known.
std::string SubnetOf(const NetdevIndex& netdevs, std::string_view netdev, std::string_view ipv4) {
  auto it = netdevs.find(netdev);
  absl::StatusOr<uint32_t> addr = ParseIpv4(ipv4);
  if (it == netdevs.end() || !addr.ok()) return "";
  std::optional<Ipv4Net> best;
  for (const std::string& s : it->second->ipv4_subnets()) {
    absl::StatusOr<Ipv4Net> net = ParseIpv4Cidr(s);
    if (!net.ok() || !net->Contains(*addr)) continue;
    if (!best || net->len > best->len) best = *net;
  }
  return best ? best->ToString() : "";
}

}  // namespace

std::string Candidate::NoGidText() const {
  if (port->netdev().empty()) {
    return "no routable RoCE v2 GID (IPv4-mapped or global IPv6) on its own netdev (the port's "
           "netdev is unknown)";
  }
  return absl::StrCat("no routable RoCE v2 GID (IPv4-mapped or global IPv6) on its own netdev ",
                      port->netdev());
}

std::string Candidate::GidText() const {
  if (!roce) return "InfiniBand";
  if (gid == nullptr) return NoGidText();
  return absl::StrFormat("GID %d = %s (RoCE v2 on %s)", gid->index(),
                         gid_ipv6 ? gid->ipv6() : gid->ipv4(), port->netdev());
}

std::string CanonicalPci(std::string_view addr) {
  absl::StatusOr<std::string> c = ParsePciAddress(addr);
  return c.ok() ? *c : std::string(addr);
}

std::optional<int> GpuNuma(const Accelerator& acc) {
  if (acc.has_pci() && acc.pci().has_numa_node()) return acc.pci().numa_node();
  return std::nullopt;
}

std::vector<Candidate> PortCandidates(const Host& host, const SelectionPolicy& policy,
                                      const PortFilter& only) {
  std::set<std::string> default_route(host.default_route_netdevs().begin(),
                                      host.default_route_netdevs().end());
  NetdevIndex netdevs(static_cast<size_t>(host.netdevs_size()));  // First of a name, as before.
  for (const Netdev& n : host.netdevs()) {
    if (n.default_route()) default_route.insert(n.name());
    netdevs.emplace(n.name(), &n);
  }
  std::vector<Candidate> cands;
  for (const RdmaDevice& dev : host.rdma_devices()) {
    for (const Port& port : dev.ports()) {
      if (only && !only(dev, port)) continue;
      Candidate c;
      c.dev = &dev;
      c.port = &port;
      c.name = absl::StrCat(dev.name(), ":", port.number());
      c.roce = IsRoce(port);
      if (c.roce) {
        const auto [gid, ipv6] = ChooseGid(port);
        c.gid = gid;
        c.gid_ipv6 = ipv6;
        if (c.gid != nullptr && !c.gid_ipv6) {
          c.subnet = SubnetOf(netdevs, port.netdev(), c.gid->ipv4());
        }
      }
      c.is_vf = dev.has_pci() && dev.pci().sriov().role() == SRIOV_ROLE_VF;
      if (dev.has_pci() && dev.pci().has_numa_node()) c.numa = dev.pci().numa_node();
      if (port.has_rate_gbps()) c.rate = port.rate_gbps();

      // A software device has no netdev of its own port besides its parent.
      std::vector<std::string> own;
      for (const std::string& n : {port.netdev(), dev.parent_netdev()}) {
        if (!n.empty() && std::find(own.begin(), own.end(), n) == own.end()) own.push_back(n);
      }
      c.front_end = DeniedBy(policy, dev, port);
      for (const std::string& n : own) {
        if (c.front_end.empty() && default_route.count(n)) {
          c.front_end = absl::StrCat("front-end: carries the default route on ", n);
        }
      }
      if (port.state() != PORT_STATE_ACTIVE) {
        c.excluded = absl::StrCat("port ", State(port.state()));
      }
      cands.push_back(std::move(c));
    }
  }
  return cands;
}

absl::StatusOr<Candidates> BuildCandidates(const Host& host, const SelectionPolicy& policy) {
  if (host.rdma_devices().empty()) {
    return absl::FailedPreconditionError("no RDMA device on this host");
  }
  // Every (device, port), in natural name order so that rejections read in a stable order.
  Candidates out;
  std::vector<Candidate>& cands = out.all;
  cands = PortCandidates(host, policy, nullptr);
  std::vector<std::string> portless;
  for (const RdmaDevice& dev : host.rdma_devices()) {
    if (dev.ports().empty()) portless.push_back(dev.name());
  }
  std::stable_sort(cands.begin(), cands.end(), [](const Candidate& a, const Candidate& b) {
    if (a.dev->name() != b.dev->name()) return NaturalLess(a.dev->name(), b.dev->name());
    return a.port->number() < b.port->number();
  });

  bool any_active = false, any_back_end = false;
  for (const Candidate& c : cands) {
    if (!c.excluded.empty()) continue;
    any_active = true;
    if (c.front_end.empty()) any_back_end = true;
  }
  if (!any_active) {
    std::vector<std::string> states;
    for (const Candidate& c : cands) {
      states.push_back(absl::StrCat(c.name, " ", State(c.port->state())));
    }
    for (const std::string& d : portless) states.push_back(absl::StrCat(d, " has no ports"));
    return absl::FailedPreconditionError(
        absl::StrCat("no active RDMA port: ", absl::StrJoin(states, ", ")));
  }

  if (any_back_end) {
    for (Candidate& c : cands) {
      if (c.excluded.empty() && !c.front_end.empty()) c.excluded = c.front_end;
    }
  } else {
    std::vector<std::string> used;
    for (const Candidate& c : cands) {
      if (c.excluded.empty()) used.push_back(absl::StrCat(c.name, " (", c.front_end, ")"));
    }
    out.notes.push_back(absl::StrCat("no back-end RDMA port is active; using front-end ports: ",
                                     absl::StrJoin(used, ", ")));
  }
  for (const Candidate& c : cands) {
    if (c.excluded.empty() && c.no_gid()) {
      out.notes.push_back(absl::StrCat(c.name, " has ", c.NoGidText()));
    }
  }
  return out;
}

PairIndex IndexTopology(const Host& host) {
  PairIndex pairs(static_cast<size_t>(host.topology_size()));
  // A host has a few GPUs and many pairs: each GPU's address is parsed once.
  absl::flat_hash_map<std::string_view, std::string> canonical;
  for (const TopologyPair& p : host.topology()) {
    auto [it, fresh] = canonical.try_emplace(p.accelerator());
    if (fresh) it->second = CanonicalPci(p.accelerator());
    pairs.insert_or_assign(absl::StrCat(it->second, "|", p.rdma_device()), &p);
  }
  return pairs;
}

std::vector<Scored> ScoreFor(const Candidates& cands, const PairIndex& pairs,
                             const std::string& gpu, std::optional<int> gpu_numa,
                             const SelectionPolicy& policy) {
  std::vector<Scored> eligible;
  for (const Candidate& c : cands.all) {
    if (!c.excluded.empty()) continue;
    Scored s;
    s.c = &c;
    s.fn_tier = policy.prefer_vfs() ? !c.is_vf : c.is_vf;
    auto it = pairs.find(absl::StrCat(gpu, "|", c.dev->name()));
    if (it == pairs.end()) {
      s.distance = DISTANCE_CLASS_SYS;
      s.distance_reason = "no PCI path";
    } else {
      // An unclassified pair is as far as it gets: nothing shows it is closer.
      s.distance = it->second->distance() == DISTANCE_CLASS_UNSPECIFIED ? DISTANCE_CLASS_SYS
                                                                        : it->second->distance();
      s.distance_reason = it->second->reason();
    }
    s.same_numa = c.numa && gpu_numa && *c.numa == *gpu_numa;
    eligible.push_back(std::move(s));
  }
  return eligible;
}

std::pair<Criterion, bool> Compare(const Scored& a, const Scored& b) {
  if (a.c->no_gid() != b.c->no_gid()) return {Criterion::kGid, !a.c->no_gid()};
  if (a.fn_tier != b.fn_tier) return {Criterion::kFunction, a.fn_tier < b.fn_tier};
  if (a.distance != b.distance) return {Criterion::kDistance, a.distance < b.distance};
  if (a.same_numa != b.same_numa) return {Criterion::kNuma, a.same_numa};
  // An unknown rate ranks below any known one.
  double ra = a.c->rate.value_or(-1), rb = b.c->rate.value_or(-1);
  if (ra != rb) return {Criterion::kRate, ra > rb};
  if (a.paired != b.paired) return {Criterion::kPaired, a.paired};
  if (a.load != b.load) return {Criterion::kSpread, a.load < b.load};
  const std::string& na = a.c->dev->name();
  const std::string& nb = b.c->dev->name();
  if (na != nb) return {Criterion::kName, NaturalLess(na, nb)};
  if (a.c->port->number() != b.c->port->number()) {
    return {Criterion::kPort, a.c->port->number() < b.c->port->number()};
  }
  return {Criterion::kTie, false};
}

void Rank(std::vector<Scored>* scored) {
  std::stable_sort(scored->begin(), scored->end(), [](const Scored& a, const Scored& b) {
    auto [k, a_wins] = Compare(a, b);
    return k != Criterion::kTie && a_wins;
  });
}

void FillPort(const Candidate& c, v1::GpuAssignment* a) {
  a->set_rdma_device(c.dev->name());
  a->set_port(c.port->number());
  a->set_netdev(c.port->netdev());
  if (c.gid != nullptr) {
    a->set_gid_index(c.gid->index());
    if (c.gid_ipv6) {
      a->set_ipv6(c.gid->ipv6());
    } else {
      a->set_ipv4(c.gid->ipv4());
      a->set_ipv4_subnet(c.subnet);
    }
  }
  a->set_link_layer(c.roce ? v1::LINK_LAYER_ETHERNET : c.port->link_layer());
}

}  // namespace fabric::select_internal
