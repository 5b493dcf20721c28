// The job environment's rules. Each consumer's variables, with the source they were checked
// against (docs/research/job-env-consumers.md has the reading, README.md the table):
//   NCCL 2.30.7 (src/transport/net_ib/init.cc, connect.cc; src/misc/socket.cc), RCCL net_ib.cc
//   UCX 1.22.0 (src/ucp/core/ucp_context.c NET_DEVICES; src/uct/ib/base/ib_md.c GID_INDEX)
//   NVSHMEM 3.5.1 (src/modules/transport/common/env_defs.h; transport_common.cpp HCA lists)
//   Mooncake 0.3.12 (mooncake-transfer-engine/src/config.cpp; src/topology.cpp MC_TE_FILTERS)
//   UCCL da914a20 (ep/include/rdma_util.hpp; p2p/rdma/rdma_device.cc, rdma_context.cc)
//   vLLM PR #42083 (vllm/v1/executor/vllm_net_devices.py)
//   SGLang mooncake_transfer_engine.py get_ib_devices_for_gpu (--disaggregation-ib-device)
#include "agent/policy/jobenv/jobenv.h"

#include <algorithm>
#include <functional>
#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "agent/common/cidr.h"
#include "agent/common/natural_order.h"
#include "agent/common/strings.h"
#include "agent/policy/jobenv/profiles.h"

namespace fabric::jobenv {
namespace {

using NoteFn = std::function<void(std::string)>;

struct ConsumerField {
  std::string_view name;
  bool Consumers::*field;
};
constexpr ConsumerField kConsumers[] = {
    {"nccl", &Consumers::nccl},       {"ucx", &Consumers::ucx},
    {"nvshmem", &Consumers::nvshmem}, {"mooncake", &Consumers::mooncake},
    {"uccl", &Consumers::uccl},       {"sglang", &Consumers::sglang},
    {"vllm", &Consumers::vllm},
};

bool Lookup(std::string_view name, bool Consumers::** field) {
  for (const ConsumerField& c : kConsumers) {
    if (c.name == name) {
      *field = c.field;
      return true;
    }
  }
  return false;
}

// How the RoCE ports of the scope choose their GID: one index for all, NCCL's dynamic pick
// (index -1 steered by family, range and RoCE version), or nothing we can say.
struct GidPlan {
  enum Kind { kNone, kUnset, kSingle, kRule } kind = kNone;
  uint32_t index = 0;
  std::string family;  // kRule: "AF_INET" or "AF_INET6".
  std::string range;   // kRule, AF_INET: NCCL_IB_ADDR_RANGE when one range picks exactly.
};

// Why `range` would not make NCCL pick exactly the chosen GID of every port in `roce`; empty
// when it would. NCCL (ncclIbGetGidIndex with index -1) walks the GID table upwards and keeps the
// first IPv4 GID in the range whose RoCE version is 2, so the range must hold the chosen GID and
// no other RoCE v2 (or untyped) IPv4 GID of the port. RoCE v1 entries are harmless.
std::string RangeProblem(const std::vector<const Pick*>& roce, const Ipv4Net& range) {
  for (const Pick* p : roce) {
    absl::StatusOr<uint32_t> chosen = ParseIpv4(p->ipv4);
    if (!chosen.ok() || !range.Contains(*chosen)) {
      return absl::StrCat(range.ToString(), " does not hold ", p->Port(), "'s address \"", p->ipv4,
                          "\"");
    }
    for (const OtherGid& g : p->other_ipv4_gids) {
      if ((p->gid_index && g.index == *p->gid_index) || !g.roce_v2_or_unknown) continue;
      absl::StatusOr<uint32_t> addr = ParseIpv4(g.ipv4);
      if (addr.ok() && range.Contains(*addr)) {
        return absl::StrFormat("%s also holds GID %d = %s of %s (%s)", range.ToString(), g.index,
                               g.ipv4, p->Port(), g.what);
      }
    }
  }
  return "";
}

// NCCL_IB_ADDR_RANGE for ports whose GID indices differ: their common subnet, else the smallest
// network covering all their subnets (or addresses, where the subnet is unknown).
std::string AddrRange(const std::vector<const Pick*>& roce, const NoteFn& note) {
  std::vector<Ipv4Net> nets;
  std::string problem;
  for (const Pick* p : roce) {
    absl::StatusOr<Ipv4Net> net = absl::InvalidArgumentError("no address");
    if (!p->ipv4_subnet.empty()) {
      net = ParseIpv4Cidr(p->ipv4_subnet);
    } else if (absl::StatusOr<uint32_t> addr = ParseIpv4(p->ipv4); addr.ok()) {
      net = Ipv4Net{*addr, 32};
    }
    if (!net.ok()) {
      problem = absl::StrCat("no usable IPv4 address or subnet for ", p->Port(), " (",
                             net.status().message(), ")");
      break;
    }
    nets.push_back(*net);
  }
  if (problem.empty()) {
    uint32_t lo = nets[0].first(), hi = nets[0].last();
    for (const Ipv4Net& n : nets) {
      lo = std::min(lo, n.first());
      hi = std::max(hi, n.last());
    }
    // One shared subnet covers exactly itself, so this is also the "same subnet" case.
    Ipv4Net range = CoveringNet(lo, hi);
    problem = RangeProblem(roce, range);
    if (problem.empty()) return range.ToString();
  }
  note(absl::StrCat("NCCL_IB_ADDR_RANGE left out: ", problem,
                    "; NCCL takes the lowest-index RoCE v2 IPv4 GID of each port, which may not "
                    "be the chosen one"));
  return "";
}

GidPlan PlanGids(const std::vector<const Pick*>& ports, const NoteFn& note) {
  GidPlan plan;
  std::vector<const Pick*> roce;
  for (const Pick* p : ports) {
    if (p->roce) roce.push_back(p);
  }
  if (roce.empty()) return plan;  // InfiniBand only: GIDs need no choosing.
  plan.kind = GidPlan::kUnset;
  std::vector<std::string> missing, ipv4_ports, ipv6_ports;
  std::map<uint32_t, std::vector<std::string>> by_index;
  for (const Pick* p : roce) {
    if (!p->gid_index) {
      missing.push_back(p->Port());
      continue;
    }
    by_index[*p->gid_index].push_back(p->Port());
    (p->ipv6.empty() ? ipv4_ports : ipv6_ports).push_back(p->Port());
  }
  if (!missing.empty()) {
    // Any index we set would be wrong for these ports, so leave the choice to the libraries.
    note(absl::StrCat("GID index variables left unset: ", absl::StrJoin(missing, ", "),
                      " has no routable RoCE v2 GID (IPv4-mapped or global IPv6) on its own "
                      "netdev; NCCL and UCX pick a GID themselves"));
    return plan;
  }
  if (!ipv4_ports.empty() && !ipv6_ports.empty()) {
    note(absl::StrCat("mixed address families: IPv4 GIDs on ", absl::StrJoin(ipv4_ports, ", "),
                      ", IPv6 GIDs on ", absl::StrJoin(ipv6_ports, ", "),
                      "; NCCL and UCX take one address family for all devices"));
  }
  if (by_index.size() == 1) {
    plan.kind = GidPlan::kSingle;
    plan.index = by_index.begin()->first;
    return plan;
  }
  std::vector<std::string> uses;
  for (const auto& [index, names] : by_index) {
    uses.push_back(absl::StrCat(index, " on ", absl::StrJoin(names, ", ")));
  }
  if (!ipv6_ports.empty() && !ipv4_ports.empty()) {
    // No family fits every port: an index or a family we set would be wrong for some.
    note(absl::StrCat("GID index variables left unset: GID indices differ (",
                      absl::StrJoin(uses, "; "), ") and so do the address families"));
    return plan;
  }
  plan.kind = GidPlan::kRule;
  plan.family = ipv6_ports.empty() ? "AF_INET" : "AF_INET6";
  // NCCL with index -1 keeps the first RoCE v2 GID of the family (link-local IPv6 skipped). UCX,
  // Mooncake and UCCL's P2P engine take one index for all devices: left to their own choice.
  note(absl::StrCat("GID indices differ (", absl::StrJoin(uses, "; "),
                    "): NCCL_IB_GID_INDEX=-1 with NCCL_IB_ADDR_FAMILY=", plan.family,
                    " lets NCCL pick by address family", ipv6_ports.empty() ? ", range" : "",
                    " and RoCE version (NCCL 2.21 or later); UCX_IB_GID_INDEX and MC_GID_INDEX "
                    "left unset as they take one index for all devices"));
  if (ipv6_ports.empty()) plan.range = AddrRange(roce, note);
  return plan;
}

// The GID variables of one library: PREFIX_IB_GID_INDEX and, for the rule form, its steering
// variables (NCCL's names, which NVSHMEM and UCCL-EP copy with their own prefix).
void GidVars(const GidPlan& plan, std::string_view prefix, EnvMap* env) {
  if (plan.kind == GidPlan::kSingle) {
    (*env)[absl::StrCat(Av(prefix), "_IB_GID_INDEX")] = absl::StrCat(plan.index);
  } else if (plan.kind == GidPlan::kRule) {
    (*env)[absl::StrCat(Av(prefix), "_IB_GID_INDEX")] = std::string("-1");
    (*env)[absl::StrCat(Av(prefix), "_IB_ROCE_VERSION_NUM")] = std::string("2");
    (*env)[absl::StrCat(Av(prefix), "_IB_ADDR_FAMILY")] = plan.family;
    if (!plan.range.empty()) (*env)[absl::StrCat(Av(prefix), "_IB_ADDR_RANGE")] = plan.range;
  }
}

std::string SocketIfname(const Request& req, const std::vector<const Pick*>& ports,
                         const NoteFn& note) {
  if (!req.socket_ifname.empty()) return req.socket_ifname;
  std::vector<std::string> routed(req.default_route_netdevs);
  std::sort(routed.begin(), routed.end(),
            [](const std::string& a, const std::string& b) { return NaturalLess(a, b); });
  routed.erase(std::unique(routed.begin(), routed.end()), routed.end());
  if (!routed.empty()) {
    if (routed.size() > 1) {
      note(absl::StrCat("several netdevs carry a default route (", absl::StrJoin(routed, ", "),
                        "); NCCL_SOCKET_IFNAME uses ", routed.front()));
    }
    return routed.front();
  }
  if (!ports.front()->netdev.empty()) {
    note(absl::StrCat("no netdev carries a default route; NCCL_SOCKET_IFNAME uses ",
                      ports.front()->netdev, " of ", ports.front()->Port()));
    return ports.front()->netdev;
  }
  note("NCCL_SOCKET_IFNAME left unset: no default-route netdev and no netdev on the first port");
  return "";
}

// vLLM (PR #42083): a GPU-BDF=NIC-BDF map the same on every rank, and the variables vLLM writes
// each worker's NIC into, with ":port" appended. vLLM prepends to a variable already set, so the
// variables it pins are left to it.
void VllmVars(const Request& req, const std::vector<const Pick*>& ports, EnvMap* job,
              const NoteFn& note) {
  std::vector<std::pair<std::string, std::string>> map;
  for (const Pick& p : req.scope) {
    if (p.gpu.empty() || p.device_pci.empty()) {
      note(absl::StrCat("VLLM_GPU_NIC_PCIE_MAPPING left out: ",
                        p.gpu.empty() ? "a port has no GPU" : p.Port() + " has no PCI address"));
      return;
    }
    map.emplace_back(p.gpu, p.device_pci);
  }
  std::set<uint32_t> port_numbers;
  for (const Pick* p : ports) port_numbers.insert(p->port);
  if (port_numbers.size() != 1) {
    note("VLLM_NIC_SELECTION_VARS left out: the ports' numbers differ and vLLM appends one suffix");
    return;
  }
  std::sort(map.begin(), map.end());
  map.erase(std::unique(map.begin(), map.end()), map.end());
  std::vector<std::string> pairs, vars;
  for (const auto& [gpu, nic] : map) pairs.push_back(absl::StrCat(gpu, "=", nic));
  const std::string suffix = absl::StrCat(":", *port_numbers.begin());
  if (req.consumers.ucx) vars.push_back("UCX_NET_DEVICES" + suffix);
  if (req.consumers.nvshmem) vars.push_back("NVSHMEM_HCA_LIST" + suffix);
  if (vars.empty()) {
    note("VLLM_NIC_SELECTION_VARS left out: neither ucx nor nvshmem is selected");
    return;
  }
  (*job)["VLLM_GPU_NIC_PCIE_MAPPING"] = absl::StrJoin(pairs, ",");
  (*job)["VLLM_NIC_SELECTION_VARS"] = absl::StrJoin(vars, ",");
}

// SGLang's --disaggregation-ib-device takes {"<gpu id>": "dev,..."}: keys are the CUDA ordinals
// of the scope as given (the order after CUDA_VISIBLE_DEVICES), values device names (no port).
std::string SglangMap(const Request& req) {
  std::vector<std::string> items;
  for (size_t i = 0; i < req.scope.size(); ++i) {
    items.push_back(absl::StrFormat("\"%d\":\"%s\"", i, req.scope[i].device));
  }
  return absl::StrCat("{", absl::StrJoin(items, ","), "}");
}

std::string VersionText(const Version& v) {
  return absl::StrFormat("%d.%d.%d", v.major, v.minor, v.patch);
}

// NCCL_IB_HCA's entries ("=" prefix aside): NCCL's own order (PCI path, 2.29.7 and later) where
// the version is known, else natural order; each port's rail from 2.30.7 when every port has one.
std::string NcclHcaList(const Request& req, std::vector<const Pick*> ports, const NoteFn& note) {
  const std::optional<Version>& v = req.nccl_version;
  if (v && *v >= kNcclPciOrder) {
    // ncclIbCompareDevs: by the PCI path's last component, devices without one last.
    std::stable_sort(ports.begin(), ports.end(), [](const Pick* a, const Pick* b) {
      if (a->device_pci.empty() != b->device_pci.empty()) return b->device_pci.empty();
      return a->device_pci < b->device_pci;
    });
  }
  std::vector<std::string> railless, shared;
  std::map<std::string, std::vector<std::string>> by_guid;
  for (const Pick* p : ports) {
    if (!p->rail) railless.push_back(p->Port());
    if (!p->sys_image_guid.empty()) by_guid[p->sys_image_guid].push_back(p->device);
  }
  for (auto& [guid, devs] : by_guid) {
    devs.erase(std::unique(devs.begin(), devs.end()), devs.end());
    if (devs.size() > 1)
      shared.push_back(absl::StrCat(absl::StrJoin(devs, " and "), " (", guid, ")"));
  }
  const bool some_rails = railless.size() < ports.size();
  const bool rails = some_rails && railless.empty() && v && *v >= kNcclRails;
  if (some_rails && !rails) {
    note(!railless.empty() ? absl::StrCat("rails left out of NCCL_IB_HCA: no rail known for ",
                                          absl::StrJoin(railless, ", "))
         : !v ? std::string("rails left out of NCCL_IB_HCA: the job's NCCL version is unknown "
                            "(NCCL 2.30.7 reads them; NCCL's environment plugin, or "
                            "--nccl-version, says which NCCL asks)")
              : absl::StrCat("rails left out of NCCL_IB_HCA: NCCL ", VersionText(*v),
                             " reads none (2.30.7 does)"));
  }
  if (!rails && !shared.empty()) {
    note(
        absl::StrCat("one NIC's functions share a system image GUID: ", absl::StrJoin(shared, "; "),
                     "; NCCL_CROSS_NIC=0 keeps a channel on one NIC, not one rail, unless "
                     "NCCL_IB_HCA names the rails (NCCL 2.30.7, NVIDIA/nccl#2097)"));
  }
  std::vector<std::string> entries;
  for (const Pick* p : ports) {
    entries.push_back(rails ? absl::StrCat(p->Port(), ":", *p->rail) : p->Port());
  }
  return absl::StrJoin(entries, ",");
}

// GPUDirect RDMA as decided per GPU (Pick::gpudirect). Without a path for any GPU of the job the
// libraries are told to stage through host memory, rather than try and fall back silently.
void GpuDirectVars(const Request& req, bool nccl, EnvMap* job, const NoteFn& note) {
  std::vector<std::string> none, with;
  std::set<std::string> ways;
  for (const Pick& p : req.scope) {
    if (p.gpudirect.empty()) continue;
    (p.gpudirect == "none" ? none : with).push_back(p.gpu);
    if (p.gpudirect != "none") ways.insert(p.gpudirect);
  }
  if (none.empty() && with.empty()) return;
  if (with.empty()) {
    if (nccl) (*job)["NCCL_NET_GDR_LEVEL"] = "LOC";
    if (req.consumers.ucx) (*job)["UCX_IB_GPU_DIRECT_RDMA"] = "no";
    note(absl::StrCat("no GPUDirect RDMA path for any GPU of the job (", absl::StrJoin(none, ", "),
                      "): traffic is staged through host memory, and the libraries are told so"));
    return;
  }
  if (!none.empty()) {
    note(absl::StrCat("no GPUDirect RDMA path for GPU ", absl::StrJoin(none, ", GPU "),
                      ": staged through host memory (fabricctl select says why)"));
  }
  if (nccl && ways.size() == 1 && *ways.begin() == "dma_buf") {
    (*job)["NCCL_DMABUF_ENABLE"] = "1";
  }
}

// The NIC vendor profile's variables, with the operator's changes, when every port of the job has
// the same profile; NCCL's computed values give way to the vendor's.
void ProfileVars(const Request& req, const std::vector<const Pick*>& ports, EnvMap* job,
                 const NoteFn& note) {
  std::map<std::string, std::vector<std::string>> by;
  for (const Pick* p : ports) by[p->profile].push_back(p->Port());
  if (by.size() != 1) {
    std::vector<std::string> uses;
    for (const auto& [name, names] : by) {
      uses.push_back(
          absl::StrCat(name.empty() ? "none" : name, " on ", absl::StrJoin(names, ", ")));
    }
    note(absl::StrCat("NIC vendor profiles differ (", absl::StrJoin(uses, "; "),
                      "): no profile's variables rendered"));
    return;
  }
  const std::string& name = by.begin()->first;
  if (name.empty()) return;
  EnvMap vars;
  if (const Profile* profile = FindProfile(name); profile != nullptr) {
    for (const ProfileVar& v : profile->vars) vars[std::string(v.name)] = std::string(v.value);
  }
  if (auto it = req.profile_env.find(name); it != req.profile_env.end()) {
    for (const auto& [k, v] : it->second) {
      if (v.empty()) {
        vars.erase(k);
      } else {
        vars[k] = v;
      }
    }
  }
  for (const auto& [k, v] : vars) {
    if (auto it = job->find(k); it != job->end() && it->second != v) {
      note(absl::StrFormat("NIC profile %s sets %s=%s over the computed %s", name, k, v,
                           it->second));
    }
    (*job)[k] = v;
  }
}

}  // namespace

std::string Pick::Port() const { return absl::StrCat(device, ":", port); }

bool AnsweredByNcclEnvPlugin(std::string_view name) {
  return name.starts_with("NCCL_") || name.starts_with("RCCL_");
}

absl::StatusOr<Version> ParseVersion(std::string_view text) {
  std::string_view t = text.substr(0, text.find_first_of("-+"));
  std::vector<absl::string_view> parts = absl::StrSplit(Av(t), '.');
  Version v;
  int* fields[] = {&v.major, &v.minor, &v.patch};
  bool ok = parts.size() == 3;
  for (size_t i = 0; ok && i < 3; ++i) {
    ok = !parts[i].empty() && parts[i].size() <= 4 &&
         std::all_of(parts[i].begin(), parts[i].end(),
                     [](char c) { return c >= '0' && c <= '9'; }) &&
         absl::SimpleAtoi(parts[i], fields[i]);
  }
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", Av(text.substr(0, 40)), "\" is not a version like 2.30.7"));
  }
  return v;
}

EnvMap Result::Merged() const {
  EnvMap out = job;
  out.insert(pins.begin(), pins.end());
  return out;
}

std::vector<std::string> ConsumerNames() {
  std::vector<std::string> out;
  for (const ConsumerField& c : kConsumers) out.emplace_back(c.name);
  return out;
}

absl::StatusOr<Consumers> ParseConsumers(std::string_view text) {
  if (text.empty() || text == "default") return Consumers{};
  Consumers out;
  if (text == "all") {
    for (const ConsumerField& c : kConsumers) out.*c.field = true;
    return out;
  }
  std::vector<std::string> items = absl::StrSplit(Av(text), ',');
  const bool changes = !items[0].empty() && (items[0].front() == '+' || items[0].front() == '-');
  if (!changes) {
    for (const ConsumerField& c : kConsumers) out.*c.field = false;
  }
  for (std::string_view item : items) {
    if (item.empty()) return absl::InvalidArgumentError("consumers: an empty name in the list");
    bool on = true;
    if (!item.empty() && (item.front() == '+' || item.front() == '-')) {
      if (!changes) {
        return absl::InvalidArgumentError(absl::StrCat(
            "consumers: \"", Av(item), "\" changes the default set; a list names every consumer"));
      }
      on = item.front() == '+';
      item.remove_prefix(1);
    } else if (changes) {
      return absl::InvalidArgumentError(
          absl::StrCat("consumers: \"", Av(item), "\" needs + or - like the other changes"));
    }
    bool Consumers::*field = nullptr;
    if (!Lookup(item, &field)) {
      return absl::InvalidArgumentError(
          absl::StrCat("consumers: unknown \"", Av(item),
                       "\" (known: ", absl::StrJoin(ConsumerNames(), ", "), ")"));
    }
    out.*field = on;
  }
  return out;
}

std::string ConsumersText(const Consumers& c) {
  std::vector<std::string> on;
  for (const ConsumerField& f : kConsumers) {
    if (c.*f.field) on.emplace_back(f.name);
  }
  return absl::StrJoin(on, ",");
}

EnvMap SubsetInvariant(const EnvMap& job) {
  static const std::set<std::string> kNamesDevices = {
      "NCCL_IB_HCA",       "UCX_NET_DEVICES",         "NVSHMEM_HCA_LIST",
      "MC_TE_FILTERS",     "FABRIC_SGLANG_IB_DEVICE", "VLLM_GPU_NIC_PCIE_MAPPING",
      "UCCL_P2P_RDMA_DEV", "VLLM_NIC_SELECTION_VARS", "FI_EFA_IFACE",
  };
  EnvMap out;
  for (const auto& [k, v] : job) {
    if (!kNamesDevices.contains(k)) out.emplace(k, v);
  }
  return out;
}

absl::StatusOr<Result> Render(const Request& req) {
  if (req.scope.empty()) return absl::InvalidArgumentError("the job scope names no GPU");
  for (const Pick& p : req.scope) {
    if (p.device.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the pick for GPU ", p.gpu, " names no RDMA device"));
    }
  }
  if (req.rank && *req.rank >= req.scope.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank position ", *req.rank, " is outside the job's ", req.scope.size(), " GPUs"));
  }
  Result r;
  NoteFn note = [&](std::string n) { r.notes.push_back(std::move(n)); };
  const Consumers& use = req.consumers;

  // One entry per port, in natural order of "dev:port": the same bytes whatever the scope's
  // order, so every rank of a job gets the same NCCL lines.
  std::vector<const Pick*> ports;
  for (const Pick& p : req.scope) ports.push_back(&p);
  std::stable_sort(ports.begin(), ports.end(), [](const Pick* a, const Pick* b) {
    if (a->device != b->device) return NaturalLess(a->device, b->device);
    return a->port < b->port;
  });
  ports.erase(std::unique(ports.begin(), ports.end(),
                          [](const Pick* a, const Pick* b) { return a->Port() == b->Port(); }),
              ports.end());
  std::vector<std::string> names, devices;
  for (const Pick* p : ports) {
    names.push_back(p->Port());
    if (devices.empty() || devices.back() != p->device) devices.push_back(p->device);
  }
  const std::string list = absl::StrJoin(names, ",");
  const GidPlan gid = PlanGids(ports, note);
  const Pick* rank = req.rank ? &req.scope[*req.rank] : nullptr;
  EnvMap& job = r.job;
  EnvMap& pins = r.pins;

  // NCCL and RCCL cannot form one communicator across GPU vendors (ROCm/rccl#1220); UCC over
  // UCX can (openucx/ucc#1039), so a mixed job gets UCX's pins and UCC told to use them.
  std::set<std::string> gpu_vendors;
  for (const Pick& p : req.scope) {
    if (!p.gpu_vendor.empty()) gpu_vendors.insert(p.gpu_vendor);
  }
  const bool mixed = gpu_vendors.size() > 1;
  if (mixed && use.nccl) {
    note(absl::StrCat("the job's GPUs are of several vendors (", absl::StrJoin(gpu_vendors, ", "),
                      "): NCCL and RCCL cannot form one communicator across them "
                      "(ROCm/rccl#1220), so their variables are left out; UCC over UCX spans "
                      "them (openucx/ucc#1039)",
                      use.ucx ? ": UCX's variables are rendered and UCC_CL_BASIC_TLS=ucp" : ""));
  }
  if (mixed && use.ucx) job["UCC_CL_BASIC_TLS"] = "ucp";
  const Profile* profile =
      ports.front()->profile.empty() ? nullptr : FindProfile(ports.front()->profile);
  const bool nccl_ib = profile == nullptr || profile->nccl_ib;
  if (use.nccl && !mixed) {
    if (nccl_ib) {
      // "=": exact names; a plain "mlx5_1" would also match mlx5_10..mlx5_19.
      job["NCCL_IB_HCA"] = absl::StrCat("=", NcclHcaList(req, ports, note));
      GidVars(gid, "NCCL", &job);
    } else {
      // libfabric's EFA provider shows the process only these devices (fi_efa(7)).
      job["FI_EFA_IFACE"] = absl::StrJoin(devices, ",");
      note(absl::StrCat("NCCL_IB_HCA and NCCL's GID variables left out: NCCL reaches ",
                        Av(profile->what), " through a net plugin, not its IB transport"));
    }
    if (std::string ifname = SocketIfname(req, ports, note); !ifname.empty()) {
      job["NCCL_SOCKET_IFNAME"] = absl::StrCat("=", ifname);
    }
    // The file the agent paired by, so that NCCL's own search reads the same tree.
    if (!req.nccl_topo_file.empty()) job["NCCL_TOPO_FILE"] = req.nccl_topo_file;
  }
  GpuDirectVars(req, use.nccl && !mixed, &job, note);
  if (use.nccl && !mixed) ProfileVars(req, ports, &job, note);
  if (use.vllm) {
    VllmVars(req, ports, &job, note);
    if (use.ucx || use.nvshmem) {
      note("UCX_NET_DEVICES and NVSHMEM_HCA_LIST left to vLLM, which pins them per worker");
    }
  }
  // UCX, NVSHMEM: the rank's own port, else the scope's ports as a filter.
  auto devices_var = [&](std::string_view var) {
    if (use.vllm) return;
    if (rank != nullptr) {
      pins[std::string(var)] = rank->Port();
    } else {
      job[std::string(var)] = list;
    }
  };
  if (use.ucx) {
    devices_var("UCX_NET_DEVICES");
    if (gid.kind == GidPlan::kSingle) job["UCX_IB_GID_INDEX"] = absl::StrCat(gid.index);
  }
  if (use.nvshmem) {
    devices_var("NVSHMEM_HCA_LIST");
    GidVars(gid, "NVSHMEM", &job);
    // NVSHMEM's default range is "::/0", which is no IPv4 network.
    if (gid.kind == GidPlan::kRule && gid.family == "AF_INET" && gid.range.empty()) {
      job["NVSHMEM_IB_ADDR_RANGE"] = std::string("0.0.0.0/0");
    }
  }
  if (use.mooncake) {
    job["MC_TE_FILTERS"] = absl::StrJoin(devices, ",");
    if (gid.kind == GidPlan::kSingle) job["MC_GID_INDEX"] = absl::StrCat(gid.index);
    std::set<uint32_t> numbers;
    for (const Pick* p : ports) numbers.insert(p->port);
    if (numbers.size() == 1) {
      job["MC_IB_PORT"] = absl::StrCat(*numbers.begin());
    } else {
      note("MC_IB_PORT left unset: Mooncake takes one port number for every device");
    }
  }
  if (use.uccl) {
    GidVars(gid, "UCCL", &job);
    if (gid.kind == GidPlan::kSingle) job["UCCL_P2P_RDMA_GID_INDEX"] = absl::StrCat(gid.index);
    if (rank != nullptr) {
      if (rank->port == 1) {
        pins["UCCL_P2P_RDMA_DEV"] = rank->device;
      } else {
        note(absl::StrCat("UCCL_P2P_RDMA_DEV left unset: UCCL's P2P engine uses port 1, not ",
                          rank->Port()));
      }
    }
  }
  if (use.sglang) job["FABRIC_SGLANG_IB_DEVICE"] = SglangMap(req);

  // The operator's explicit config wins, over pins too; sorted, so notes come in a stable order.
  for (const auto& [k, v] : req.static_env) {
    auto it = job.find(k);
    if (it != job.end() && it->second != v) {
      note(absl::StrFormat("static_env %s=%s overrides the computed value %s", k, v, it->second));
    }
    if (auto pin = pins.find(k); pin != pins.end()) {
      note(absl::StrFormat("static_env %s=%s overrides this rank's pin %s", k, v, pin->second));
      pins.erase(pin);
    }
    job[k] = v;
  }
  return r;
}

}  // namespace fabric::jobenv
