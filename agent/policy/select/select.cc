#include "agent/policy/select/select.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "agent/common/cidr.h"
#include "agent/common/excerpt.h"
#include "agent/common/natural_order.h"
#include "agent/common/strings.h"
#include "agent/config/config.h"
#include "agent/inventory/discovery/parse.h"
#include "agent/inventory/topology/topology.h"
#include "agent/policy/select/env.h"
#include "agent/policy/select/gpu_names.h"
#include "agent/rdma/gid_choice.h"

namespace fabric {

using namespace ::fabric::v1;  // NOLINT: enum values of the model

namespace {

// absl::StrCat takes no std::string_view in Debian's abseil (agent/common/strings.h).
std::string State(PortState s) { return std::string(PortStateWord(s)); }

std::string PortName(std::string_view dev, uint32_t port) {
  return absl::StrCat(Av(dev), ":", port);
}

std::string RateText(std::optional<double> gbps) {
  return gbps ? absl::StrFormat("%g Gb/s", *gbps) : std::string("rate unknown");
}

std::string Plural(int n, std::string_view word) {
  return absl::StrCat(n, " ", Av(word), n == 1 ? "" : "s");
}

// A (device, port) pair with everything the ranking needs, computed once per request.
struct Candidate {
  const RdmaDevice* dev = nullptr;
  const Port* port = nullptr;
  std::string name;  // "mlx5_1:1".
  bool roce = false;
  const Gid* gid = nullptr;  // Lowest RoCE v2 IPv4 GID on the port's own netdev.
  std::string subnet;        // Connected subnet of the port's netdev holding gid->ipv4().
  bool is_vf = false;
  std::optional<int> numa;
  std::optional<double> rate;
  std::string front_end;  // Why this is a front-end (or denied) port; empty when not.
  std::string excluded;   // Why it cannot be chosen at all; empty when eligible.

  bool no_gid() const { return roce && gid == nullptr; }
  std::string NoGidText() const {
    if (port->netdev().empty()) {
      return "no RoCE v2 IPv4 GID on its own netdev (the port's netdev is unknown)";
    }
    return absl::StrCat("no RoCE v2 IPv4 GID on its own netdev ", port->netdev());
  }
  std::string GidText() const {
    if (!roce) return "InfiniBand";
    if (gid == nullptr) return NoGidText();
    return absl::StrFormat("GID %d = %s (RoCE v2 on %s)", gid->index(), gid->ipv4(),
                           port->netdev());
  }
};

// An unspecified link layer (attribute unreadable) with RoCE GIDs is still RoCE: treating it as
// InfiniBand would leave the GID index out of the environment.
bool IsRoce(const Port& port) {
  if (port.link_layer() == LINK_LAYER_ETHERNET) return true;
  if (port.link_layer() != LINK_LAYER_UNSPECIFIED) return false;
  return std::any_of(port.gids().begin(), port.gids().end(), [](const Gid& g) {
    return g.type() == GID_TYPE_ROCE_V1 || g.type() == GID_TYPE_ROCE_V2;
  });
}

// The port's usable GID by the one rule (agent/rdma/gid_choice.h), over its own netdev's GIDs. A
// port without a netdev of its own has none: another netdev's address may not route to it.
const Gid* ChooseGid(const Port& port) {
  if (port.netdev().empty()) return nullptr;
  std::vector<rdma::GidSlot> table;
  table.reserve(port.gids_size());
  for (const Gid& g : port.gids()) {
    // The model's ipv4 field is the GID's address (discovery fills it from the GID).
    absl::StatusOr<uint32_t> ipv4 = ParseIpv4(g.ipv4());
    if (!ipv4.ok()) continue;
    rdma::GidSlot& s = table.emplace_back();
    s.index = static_cast<int>(g.index());
    s.gid =
        rdma::Ipv4MappedGid({static_cast<uint8_t>(*ipv4 >> 24), static_cast<uint8_t>(*ipv4 >> 16),
                             static_cast<uint8_t>(*ipv4 >> 8), static_cast<uint8_t>(*ipv4)});
    if (g.type() == GID_TYPE_ROCE_V2) s.kind = rdma::GidKind::kRoceV2;
    s.netdev = g.netdev();
  }
  std::optional<int> index = rdma::ChooseRoceV2Gid(table, {.netdev = port.netdev(), .ipv4 = {}});
  if (!index) return nullptr;
  for (const Gid& g : port.gids()) {
    if (static_cast<int>(g.index()) == *index) return &g;
  }
  return nullptr;
}

const Netdev* FindNetdev(const Host& host, std::string_view name) {
  for (const Netdev& n : host.netdevs()) {
    if (n.name() == name) return &n;
  }
  return nullptr;
}

// The most specific connected subnet of `netdev` that holds `ipv4`; empty when none is known.
std::string SubnetOf(const Host& host, std::string_view netdev, std::string_view ipv4) {
  const Netdev* n = FindNetdev(host, netdev);
  absl::StatusOr<uint32_t> addr = ParseIpv4(ipv4);
  if (n == nullptr || !addr.ok()) return "";
  std::optional<Ipv4Net> best;
  for (const std::string& s : n->ipv4_subnets()) {
    absl::StatusOr<Ipv4Net> net = ParseIpv4Cidr(s);
    if (!net.ok() || !net->Contains(*addr)) continue;
    if (!best || net->len > best->len) best = *net;
  }
  return best ? best->ToString() : "";
}

std::string CanonicalPci(std::string_view addr) {
  absl::StatusOr<std::string> c = ParsePciAddress(addr);
  return c.ok() ? *c : std::string(addr);
}

// What the ranking compares, in order of precedence.
enum class Criterion { kGid, kFunction, kDistance, kNuma, kRate, kSpread, kName, kPort, kTie };

// One candidate as seen from one GPU.
struct Scored {
  const Candidate* c = nullptr;
  int fn_tier = 0;  // 0: preferred function type (PF by default).
  DistanceClass distance = DISTANCE_CLASS_SYS;
  std::string distance_reason;
  bool same_numa = false;
  int load = 0;  // GPUs of this request already assigned to the port.
};

// Which criterion first tells `a` and `b` apart, and whether `a` wins on it.
std::pair<Criterion, bool> Compare(const Scored& a, const Scored& b) {
  if (a.c->no_gid() != b.c->no_gid()) return {Criterion::kGid, !a.c->no_gid()};
  if (a.fn_tier != b.fn_tier) return {Criterion::kFunction, a.fn_tier < b.fn_tier};
  if (a.distance != b.distance) return {Criterion::kDistance, a.distance < b.distance};
  if (a.same_numa != b.same_numa) return {Criterion::kNuma, a.same_numa};
  // An unknown rate ranks below any known one.
  double ra = a.c->rate.value_or(-1), rb = b.c->rate.value_or(-1);
  if (ra != rb) return {Criterion::kRate, ra > rb};
  if (a.load != b.load) return {Criterion::kSpread, a.load < b.load};
  const std::string& na = a.c->dev->name();
  const std::string& nb = b.c->dev->name();
  if (na != nb) return {Criterion::kName, NaturalLess(na, nb)};
  if (a.c->port->number() != b.c->port->number()) {
    return {Criterion::kPort, a.c->port->number() < b.c->port->number()};
  }
  return {Criterion::kTie, false};
}

std::string NumaText(std::optional<int> nic, std::optional<int> gpu) {
  if (!nic) return "NUMA unknown";
  if (!gpu) return absl::StrFormat("NUMA %d, GPU NUMA unknown", *nic);
  if (*nic == *gpu) return absl::StrFormat("NUMA %d same as GPU", *nic);
  return absl::StrFormat("NUMA %d, GPU on NUMA %d", *nic, *gpu);
}

std::string FunctionText(const Candidate& c) {
  if (!c.is_vf) return "PF";
  const std::string& pf = c.dev->pci().sriov().pf_pci_address();
  return pf.empty() ? "VF" : absl::StrCat("VF of ", pf);
}

// The value of `s` on criterion `k`, as an operator reads it.
std::string ValueText(const Scored& s, Criterion k, std::optional<int> gpu_numa) {
  switch (k) {
    case Criterion::kGid:
      return s.c->no_gid() ? s.c->NoGidText() : s.c->GidText();
    case Criterion::kFunction:
      return s.c->is_vf ? "VF" : "PF";
    case Criterion::kDistance:
      return DistanceName(s.distance);
    case Criterion::kNuma:
      return NumaText(s.c->numa, gpu_numa);
    case Criterion::kRate:
      return RateText(s.c->rate);
    case Criterion::kSpread:
      return absl::StrCat("serves ", Plural(s.load, "GPU"), " of this request");
    case Criterion::kName:
    case Criterion::kPort:
    case Criterion::kTie:
      return s.c->name;
  }
  return "";
}

std::string FunctionPreference(bool prefer_vfs) {
  return prefer_vfs ? "VFs preferred by policy, ahead of distance"
                    : "PFs preferred, ahead of distance";
}

// Second reason line: the criterion that beat the runner-up.
std::string BeatText(const Scored& w, const Scored& r, Criterion k, std::optional<int> gpu_numa,
                     bool prefer_vfs) {
  const std::string& rn = r.c->name;
  switch (k) {
    case Criterion::kGid:
      return absl::StrCat("beat ", rn, " on GID: ", rn, " has ", r.c->NoGidText(),
                          " (a RoCE port without one ranks below every port with one)");
    case Criterion::kFunction:
      return absl::StrCat("beat ", rn, " on function type: ", ValueText(w, k, gpu_numa), " vs ",
                          ValueText(r, k, gpu_numa), " (", FunctionPreference(prefer_vfs), "; ", rn,
                          " is ", DistanceName(r.distance), ")");
    case Criterion::kName:
    case Criterion::kPort:
      return absl::StrCat("beat ", rn, k == Criterion::kName ? " on name order" : " on port order",
                          " (otherwise equal)");
    case Criterion::kTie:
      return absl::StrCat("tied with ", rn, " on every criterion; the host lists it first");
    default:
      return absl::StrCat("beat ", rn, " on ",
                          k == Criterion::kDistance ? "distance"
                          : k == Criterion::kNuma   ? "NUMA"
                          : k == Criterion::kRate   ? "rate"
                                                    : "spreading",
                          ": ", ValueText(w, k, gpu_numa), " vs ", ValueText(r, k, gpu_numa));
  }
}

// Why loser `l` lost to winner `w`.
std::string LostText(const Scored& l, const Scored& w, Criterion k, std::optional<int> gpu_numa,
                     bool prefer_vfs) {
  const std::string& wn = w.c->name;
  switch (k) {
    case Criterion::kGid:
      return absl::StrCat(l.c->NoGidText(), " (lost on GID: ", wn, " has ", w.c->GidText(), ")");
    case Criterion::kFunction:
      return absl::StrCat(l.c->is_vf ? "VF (" : "PF (", FunctionPreference(prefer_vfs), "; ", wn,
                          " is ", w.c->is_vf ? "a VF" : "a PF", ")");
    case Criterion::kDistance:
      return absl::StrCat(DistanceName(l.distance), " (lost on distance: ", wn, " is ",
                          DistanceName(w.distance), ")");
    case Criterion::kNuma:
      return absl::StrCat(ValueText(l, k, gpu_numa), " (lost on NUMA: ", wn, " is ",
                          ValueText(w, k, gpu_numa), ")");
    case Criterion::kRate:
      return absl::StrCat(RateText(l.c->rate), " (lost on rate: ", wn, " is ", RateText(w.c->rate),
                          ")");
    case Criterion::kSpread:
      return absl::StrCat("already serves ", Plural(l.load, "GPU"),
                          " of this request (lost on spreading: ", wn, " serves ", w.load, ")");
    case Criterion::kName:
      return absl::StrCat("lost on name order (", wn, " sorts first; otherwise equal)");
    case Criterion::kPort:
      return absl::StrCat("lost on port order (", wn, " sorts first; otherwise equal)");
    case Criterion::kTie:
      return absl::StrCat("tied with ", wn, " on every criterion; the host lists ", wn, " first");
  }
  return "";
}

std::string Summary(const Scored& s, const std::string& gpu, std::optional<int> gpu_numa) {
  const Candidate& c = *s.c;
  std::string out = absl::StrCat(c.name, " ", DistanceName(s.distance), " to ", gpu);
  if (!s.distance_reason.empty()) absl::StrAppend(&out, " (", s.distance_reason, ")");
  absl::StrAppend(&out, ", ", NumaText(c.numa, gpu_numa), ", ", RateText(c.rate), ", ",
                  c.GidText());
  if (c.is_vf) absl::StrAppend(&out, ", ", FunctionText(c));
  if (!c.front_end.empty()) {
    absl::StrAppend(&out, ", ", c.front_end, " (used because no other port is active)");
  }
  return out;
}

}  // namespace

absl::StatusOr<std::string> ParseGpuName(std::string_view given, std::string_view what) {
  constexpr size_t kLongest = 16;  // "00000000:17:00.0", nvidia-smi's form
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat(Av(what), " ", Excerpt(given), " is not a PCI address: ", Av(why)));
  };
  if (given.empty()) return bad("empty");
  if (given.size() > kLongest) {
    return bad(absl::StrCat(given.size(), " characters, at most ", kLongest));
  }
  // ParsePciAddress forgives the whitespace around sysfs values; a caller's name is exact.
  for (char ch : given) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(ch)) && ch != ':' && ch != '.') {
      return bad(absl::StrCat("unexpected ", Excerpt(std::string_view(&ch, 1)),
                              " ([domain:]bus:device.function, in hex)"));
    }
  }
  absl::StatusOr<std::string> canonical = ParsePciAddress(given);
  if (!canonical.ok()) return bad("[domain:]bus:device.function, in hex");
  return canonical;
}

namespace {

struct Request {
  std::string given;      // As the caller wrote it.
  std::string canonical;  // "0000:17:00.0".
  const Accelerator* acc = nullptr;
};

absl::StatusOr<std::vector<Request>> ResolveGpus(const Host& host,
                                                 const std::vector<std::string>& gpus) {
  if (gpus.empty()) return absl::InvalidArgumentError("no GPU given");
  if (gpus.size() > kMaxGpusPerRequest) {
    return absl::ResourceExhaustedError(absl::StrCat("gpus: ", gpus.size(), " given; at most ",
                                                     kMaxGpusPerRequest, " per request"));
  }
  std::vector<Request> out;
  for (const std::string& g : gpus) {
    // Every name form (gpu_names.h); MIG devices through the process's NVML, loaded on first use.
    absl::StatusOr<ResolvedGpu> gpu = ResolveGpu(host, g, ProcessMigResolver());
    if (!gpu.ok()) return gpu.status();
    const std::string* canonical = &gpu->pci_address;
    for (const Request& r : out) {
      if (r.canonical == *canonical) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "GPU %s given twice (as %s and %s)", *canonical, Excerpt(r.given), Excerpt(g)));
      }
    }
    const Accelerator* found = gpu->accelerator;
    out.push_back(Request{g, *canonical, found});
  }
  return out;
}

}  // namespace

std::string DeniedBy(const SelectionPolicy& policy, const RdmaDevice& dev, const Port& port) {
  const std::set<std::string> deny(policy.deny().begin(), policy.deny().end());
  if (deny.count(dev.name())) return absl::StrCat("denied by config (", dev.name(), ")");
  const std::string name = PortName(dev.name(), port.number());
  if (deny.count(name)) return absl::StrCat("denied by config (", name, ")");
  for (const std::string& n : {port.netdev(), dev.parent_netdev()}) {
    if (!n.empty() && deny.count(n)) return absl::StrCat("denied by config (netdev ", n, ")");
  }
  return "";
}

std::vector<std::string> ComputeGpus(const Host& host) {
  std::vector<std::string> out;
  for (const Accelerator& a : host.accelerators()) {
    if (!a.management_display()) out.push_back(a.pci_address());
  }
  return out;
}

std::vector<BackendPort> BackendPorts(const Host& host, const SelectionPolicy& policy) {
  std::set<std::string> default_route(host.default_route_netdevs().begin(),
                                      host.default_route_netdevs().end());
  for (const Netdev& n : host.netdevs()) {
    if (n.default_route()) default_route.insert(n.name());
  }
  std::vector<BackendPort> out;
  for (const RdmaDevice& dev : host.rdma_devices()) {
    if (dev.has_pci() && dev.pci().sriov().role() == SRIOV_ROLE_VF) continue;
    for (const Port& port : dev.ports()) {
      if (port.state() != PORT_STATE_ACTIVE || !DeniedBy(policy, dev, port).empty()) continue;
      bool front_end = false;
      for (const std::string* n : {&port.netdev(), &dev.parent_netdev()}) {
        front_end = front_end || (!n->empty() && default_route.count(*n) > 0);
      }
      if (!front_end) out.push_back({&dev, &port});
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const BackendPort& a, const BackendPort& b) {
    if (a.device->name() != b.device->name())
      return NaturalLess(a.device->name(), b.device->name());
    return a.port->number() < b.port->number();
  });
  return out;
}

absl::StatusOr<Selection> SelectNics(const Host& host, const std::vector<std::string>& gpus,
                                     const SelectionPolicy& policy) {
  if (absl::Status s = ValidatePolicy(policy); !s.ok()) return s;
  absl::StatusOr<std::vector<Request>> requests = ResolveGpus(host, gpus);
  if (!requests.ok()) return requests.status();
  if (host.rdma_devices().empty()) {
    return absl::FailedPreconditionError("no RDMA device on this host");
  }

  std::set<std::string> default_route(host.default_route_netdevs().begin(),
                                      host.default_route_netdevs().end());
  for (const Netdev& n : host.netdevs()) {
    if (n.default_route()) default_route.insert(n.name());
  }

  // Every (device, port), in natural name order so that rejections read in a stable order.
  std::vector<Candidate> cands;
  std::vector<std::string> portless;
  for (const RdmaDevice& dev : host.rdma_devices()) {
    if (dev.ports().empty()) portless.push_back(dev.name());
    for (const Port& port : dev.ports()) {
      Candidate c;
      c.dev = &dev;
      c.port = &port;
      c.name = PortName(dev.name(), port.number());
      c.roce = IsRoce(port);
      if (c.roce) {
        c.gid = ChooseGid(port);
        if (c.gid != nullptr) c.subnet = SubnetOf(host, port.netdev(), c.gid->ipv4());
      }
      c.is_vf = dev.has_pci() && dev.pci().sriov().role() == SRIOV_ROLE_VF;
      if (dev.has_pci() && dev.pci().has_numa_node()) c.numa = dev.pci().numa_node();
      if (port.has_rate_gbps()) c.rate = port.rate_gbps();

      // A software device has no netdev of its own port besides its parent.
      std::vector<std::string> netdevs;
      for (const std::string& n : {port.netdev(), dev.parent_netdev()}) {
        if (!n.empty() && std::find(netdevs.begin(), netdevs.end(), n) == netdevs.end()) {
          netdevs.push_back(n);
        }
      }
      c.front_end = DeniedBy(policy, dev, port);
      for (const std::string& n : netdevs) {
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

  Selection sel;
  if (any_back_end) {
    for (Candidate& c : cands) {
      if (c.excluded.empty() && !c.front_end.empty()) c.excluded = c.front_end;
    }
  } else {
    std::vector<std::string> used;
    for (const Candidate& c : cands) {
      if (c.excluded.empty()) used.push_back(absl::StrCat(c.name, " (", c.front_end, ")"));
    }
    sel.add_notes(absl::StrCat("no back-end RDMA port is active; using front-end ports: ",
                               absl::StrJoin(used, ", ")));
  }
  for (const Candidate& c : cands) {
    if (c.excluded.empty() && c.no_gid()) {
      sel.add_notes(absl::StrCat(c.name, " has ", c.NoGidText()));
    }
  }

  std::map<std::string, const TopologyPair*> pairs;  // "<gpu>|<device>".
  for (const TopologyPair& p : host.topology()) {
    pairs[absl::StrCat(CanonicalPci(p.accelerator()), "|", p.rdma_device())] = &p;
  }

  std::map<const Candidate*, int> load;
  for (const Request& req : *requests) {
    std::optional<int> gpu_numa;
    if (req.acc->has_pci() && req.acc->pci().has_numa_node()) {
      gpu_numa = req.acc->pci().numa_node();
    }
    std::vector<Scored> eligible;
    for (const Candidate& c : cands) {
      if (!c.excluded.empty()) continue;
      Scored s;
      s.c = &c;
      s.fn_tier = policy.prefer_vfs() ? !c.is_vf : c.is_vf;
      auto it = pairs.find(absl::StrCat(req.canonical, "|", c.dev->name()));
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
      s.load = load[&c];
      eligible.push_back(std::move(s));
    }
    std::stable_sort(eligible.begin(), eligible.end(), [](const Scored& a, const Scored& b) {
      auto [k, a_wins] = Compare(a, b);
      return k != Criterion::kTie && a_wins;
    });
    const Scored& w = eligible.front();
    const Candidate& c = *w.c;
    load[&c]++;

    GpuAssignment* a = sel.add_assignments();
    a->set_gpu(req.canonical);
    a->set_given(req.given);
    a->set_rdma_device(c.dev->name());
    a->set_port(c.port->number());
    a->set_netdev(c.port->netdev());
    if (c.gid != nullptr) {
      a->set_gid_index(c.gid->index());
      a->set_ipv4(c.gid->ipv4());
      a->set_ipv4_subnet(c.subnet);
    }
    a->set_link_layer(c.roce ? LINK_LAYER_ETHERNET : c.port->link_layer());
    a->set_distance(w.distance);
    if (c.numa) a->set_numa_node(*c.numa);
    a->set_rate_gbps(c.rate.value_or(0));
    a->add_reasons(Summary(w, req.canonical, gpu_numa));
    if (eligible.size() > 1) {
      const Scored& r = eligible[1];
      a->add_reasons(BeatText(w, r, Compare(w, r).first, gpu_numa, policy.prefer_vfs()));
    } else {
      a->add_reasons("only eligible port");
    }
    // The GID and function-type tiers outrank distance; say so wherever they overrode it.
    for (const Scored& l : eligible) {
      if (&l == &w || l.distance >= w.distance) continue;
      Criterion k = Compare(w, l).first;
      if (k == Criterion::kGid) {
        a->add_reasons(absl::StrCat("passed over closer ", l.c->name, " (",
                                    DistanceName(l.distance), "): it has ", l.c->NoGidText()));
      } else if (k == Criterion::kFunction) {
        a->add_reasons(absl::StrCat("passed over closer ", l.c->is_vf ? "VF " : "PF ", l.c->name,
                                    " (", DistanceName(l.distance),
                                    "): ", FunctionPreference(policy.prefer_vfs())));
      }
    }

    std::map<const Candidate*, const Scored*> scored;
    for (const Scored& s : eligible) scored[s.c] = &s;
    for (const Candidate& other : cands) {
      if (&other == &c) continue;
      Rejection* rej = a->add_rejected();
      rej->set_port(other.name);
      auto it = scored.find(&other);
      if (it == scored.end()) {
        rej->set_reason(other.excluded);
      } else {
        rej->set_reason(
            LostText(*it->second, w, Compare(w, *it->second).first, gpu_numa, policy.prefer_vfs()));
      }
    }
  }

  if (absl::Status s = FillEnv(host, policy, &sel); !s.ok()) return s;
  return sel;
}

}  // namespace fabric
