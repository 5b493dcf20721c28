#include "agent/policy/select/env.h"

#include <algorithm>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "agent/common/cidr.h"
#include "agent/common/natural_order.h"
#include "agent/common/shell.h"
#include "agent/inventory/discovery/parse.h"
#include "agent/policy/select/select.h"
#include "agent/policy/select/selection_section.h"

namespace fabric {

using namespace ::fabric::v1;  // NOLINT: enum values of the model

namespace {

using NoteFn = std::function<void(std::string)>;

std::string PortName(const GpuAssignment& a) {
  return absl::StrCat(a.rdma_device(), ":", a.port());
}

const Port* FindPort(const Host& host, const std::string& dev, uint32_t number) {
  for (const RdmaDevice& d : host.rdma_devices()) {
    if (d.name() != dev) continue;
    for (const Port& p : d.ports()) {
      if (p.number() == number) return &p;
    }
  }
  return nullptr;
}

// Why `range` would not make NCCL pick exactly the chosen GID of every port in `roce`; empty when
// it would. NCCL (ncclIbGetGidIndex with index -1) walks the GID table upwards and keeps the first
// IPv4 GID in the range whose RoCE version is 2, so the range must hold the chosen GID and no other
// RoCE v2 (or untyped) IPv4 GID of the port. RoCE v1 entries with the same address are harmless.
std::string RangeProblem(const Host& host, const std::vector<const GpuAssignment*>& roce,
                         const Ipv4Net& range) {
  for (const GpuAssignment* a : roce) {
    const Port* port = FindPort(host, a->rdma_device(), a->port());
    if (port == nullptr) return absl::StrCat(PortName(*a), " is not in the host model");
    absl::StatusOr<uint32_t> chosen = ParseIpv4(a->ipv4());
    if (!chosen.ok() || !range.Contains(*chosen)) {
      return absl::StrCat(range.ToString(), " does not hold ", PortName(*a), "'s address \"",
                          a->ipv4(), "\"");
    }
    for (const Gid& g : port->gids()) {
      if (g.index() == a->gid_index() || g.ipv4().empty()) continue;
      if (g.type() != GID_TYPE_ROCE_V2 && g.type() != GID_TYPE_UNSPECIFIED) continue;
      absl::StatusOr<uint32_t> addr = ParseIpv4(g.ipv4());
      if (addr.ok() && range.Contains(*addr)) {
        return absl::StrFormat("%s also holds GID %d = %s of %s (%s on %s)", range.ToString(),
                               g.index(), g.ipv4(), PortName(*a),
                               g.type() == GID_TYPE_ROCE_V2 ? "RoCE v2" : "type unknown",
                               g.netdev().empty() ? "no netdev" : g.netdev());
      }
    }
  }
  return "";
}

// NCCL_IB_ADDR_RANGE for ports whose GID indices differ: their common subnet, else the smallest
// network covering all their subnets (or addresses, where the subnet is unknown).
void AddrRange(const Host& host, const std::vector<const GpuAssignment*>& roce, EnvMap* env,
               const NoteFn& note) {
  std::vector<Ipv4Net> nets;
  std::string problem;
  for (const GpuAssignment* a : roce) {
    absl::StatusOr<Ipv4Net> net = absl::InvalidArgumentError("no address");
    if (!a->ipv4_subnet().empty()) {
      net = ParseIpv4Cidr(a->ipv4_subnet());
    } else if (absl::StatusOr<uint32_t> addr = ParseIpv4(a->ipv4()); addr.ok()) {
      net = Ipv4Net{*addr, 32};
    }
    if (!net.ok()) {
      problem = absl::StrCat("no usable IPv4 address or subnet for ", PortName(*a), " (",
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
    problem = RangeProblem(host, roce, range);
    if (problem.empty()) {
      (*env)["NCCL_IB_ADDR_RANGE"] = range.ToString();
      return;
    }
  }
  note(absl::StrCat("NCCL_IB_ADDR_RANGE left out: ", problem,
                    "; NCCL takes the lowest-index RoCE v2 IPv4 GID of each port, which may not "
                    "be the chosen one"));
}

void GidEnv(const Host& host, const std::vector<const GpuAssignment*>& ports, EnvMap* env,
            const NoteFn& note) {
  std::vector<const GpuAssignment*> roce;
  for (const GpuAssignment* a : ports) {
    if (a->link_layer() == LINK_LAYER_ETHERNET) roce.push_back(a);
  }
  if (roce.empty()) return;  // InfiniBand only: GIDs need no choosing.

  std::vector<std::string> missing, ipv4_ports, ipv6_ports;
  std::map<uint32_t, std::vector<std::string>> by_index;
  for (const GpuAssignment* a : roce) {
    if (a->has_gid_index()) {
      by_index[a->gid_index()].push_back(PortName(*a));
      (a->ipv6().empty() ? ipv4_ports : ipv6_ports).push_back(PortName(*a));
    } else {
      missing.push_back(PortName(*a));
    }
  }
  if (!missing.empty()) {
    // Any index we set would be wrong for these ports, so leave the choice to NCCL and UCX.
    note(absl::StrCat(
        "NCCL_IB_GID_INDEX and UCX_IB_GID_INDEX left unset: ", absl::StrJoin(missing, ", "),
        " has no routable RoCE v2 GID (IPv4-mapped or global IPv6) on its own "
        "netdev; NCCL and UCX pick a GID themselves"));
    return;
  }
  if (!ipv4_ports.empty() && !ipv6_ports.empty()) {
    note(absl::StrCat("mixed address families: IPv4 GIDs on ", absl::StrJoin(ipv4_ports, ", "),
                      ", IPv6 GIDs on ", absl::StrJoin(ipv6_ports, ", "),
                      "; NCCL and UCX take one address family for all devices"));
  }
  if (by_index.size() == 1) {
    std::string index = absl::StrCat(by_index.begin()->first);
    (*env)["NCCL_IB_GID_INDEX"] = index;
    (*env)["UCX_IB_GID_INDEX"] = index;
    return;
  }
  if (!ipv6_ports.empty()) {
    std::vector<std::string> uses;
    for (const auto& [index, names] : by_index) {
      uses.push_back(absl::StrCat(index, " on ", absl::StrJoin(names, ", ")));
    }
    if (!ipv4_ports.empty()) {
      // No family fits every port: an index or a family we set would be wrong for some.
      note(absl::StrCat("NCCL_IB_GID_INDEX and UCX_IB_GID_INDEX left unset: GID indices differ (",
                        absl::StrJoin(uses, "; "), ") and so do the address families"));
      return;
    }
    // IPv6 only. NCCL with index -1 keeps the first RoCE v2 GID of the family, skipping
    // link-local ones. UCX's own choice (RoCE v2 IPv4, then RoCE v2 IPv6 in index order) would
    // take the link-local GID, and UCX_IB_ROCE_LOCAL_SUBNET does not change the choice.
    note(absl::StrCat("GID indices differ (", absl::StrJoin(uses, "; "),
                      "): NCCL_IB_GID_INDEX=-1 with NCCL_IB_ADDR_FAMILY=AF_INET6 lets NCCL pick "
                      "the global IPv6 GID, which needs NCCL 2.21 or later; UCX_IB_GID_INDEX left "
                      "unset as UCX takes one index for all devices (its own choice may be a "
                      "link-local GID: set UCX_NET_DEVICES to one device or give the index)"));
    (*env)["NCCL_IB_GID_INDEX"] = std::string("-1");
    (*env)["NCCL_IB_ROCE_VERSION_NUM"] = std::string("2");
    (*env)["NCCL_IB_ADDR_FAMILY"] = std::string("AF_INET6");
    return;
  }
  std::vector<std::string> uses;
  for (const auto& [index, names] : by_index) {
    uses.push_back(absl::StrCat(index, " on ", absl::StrJoin(names, ", ")));
  }
  note(absl::StrCat("GID indices differ (", absl::StrJoin(uses, "; "),
                    "): NCCL_IB_GID_INDEX=-1 lets NCCL pick by address family, range and RoCE "
                    "version, which needs NCCL 2.21 or later; UCX_IB_GID_INDEX left unset as UCX "
                    "takes one index for all devices"));
  // Built as std::string first: GCC 12 at -O3 warns falsely (-Wrestrict, PR105329) on
  // assigning a short literal to a map's new string.
  (*env)["NCCL_IB_GID_INDEX"] = std::string("-1");
  (*env)["NCCL_IB_ROCE_VERSION_NUM"] = std::string("2");
  (*env)["NCCL_IB_ADDR_FAMILY"] = std::string("AF_INET");
  AddrRange(host, roce, env, note);
}

void SocketIfname(const Host& host, const std::vector<const GpuAssignment*>& ports,
                  const SelectionPolicy& policy, EnvMap* env, const NoteFn& note) {
  std::string ifname = policy.socket_ifname();
  if (ifname.empty()) {
    std::set<std::string> set(host.default_route_netdevs().begin(),
                              host.default_route_netdevs().end());
    for (const Netdev& n : host.netdevs()) {
      if (n.default_route()) set.insert(n.name());
    }
    std::vector<std::string> routed(set.begin(), set.end());
    std::sort(routed.begin(), routed.end(),
              [](const std::string& a, const std::string& b) { return NaturalLess(a, b); });
    if (!routed.empty()) {
      ifname = routed.front();
      if (routed.size() > 1) {
        note(absl::StrCat("several netdevs carry a default route (", absl::StrJoin(routed, ", "),
                          "); NCCL_SOCKET_IFNAME uses ", ifname));
      }
    }
  }
  if (ifname.empty()) {
    ifname = ports.front()->netdev();
    if (!ifname.empty()) {
      note(absl::StrCat("no netdev carries a default route; NCCL_SOCKET_IFNAME uses ", ifname,
                        " of ", PortName(*ports.front())));
    }
  }
  if (ifname.empty()) {
    note(
        "NCCL_SOCKET_IFNAME left unset: no default-route netdev and no netdev on the first "
        "selected port");
    return;
  }
  (*env)["NCCL_SOCKET_IFNAME"] = absl::StrCat("=", ifname);
}

void JsonString(const std::string& s, std::string* out) {
  out->push_back('"');
  for (char c : s) {
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      case '\b':
        *out += "\\b";
        break;
      case '\f':
        *out += "\\f";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppendFormat(out, "\\u%04x", static_cast<unsigned char>(c));
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

}  // namespace

absl::StatusOr<EnvMap> RenderEnv(const Host& host, const Selection& sel,
                                 const SelectionPolicy& policy, std::vector<std::string>* notes) {
  if (absl::Status s = ValidatePolicy(policy); !s.ok()) return s;
  if (sel.assignments().empty()) {
    return absl::InvalidArgumentError("selection has no assignments");
  }
  NoteFn note = [&](std::string n) {
    if (notes != nullptr) notes->push_back(std::move(n));
  };

  // One entry per port, in the order of the first GPU that uses it.
  std::vector<const GpuAssignment*> ports;
  std::vector<std::string> names;
  for (const GpuAssignment& a : sel.assignments()) {
    if (a.rdma_device().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("assignment for GPU ", a.gpu(), " names no RDMA device"));
    }
    std::string name = PortName(a);
    if (std::find(names.begin(), names.end(), name) != names.end()) continue;
    names.push_back(name);
    ports.push_back(&a);
  }

  EnvMap env;
  env["NCCL_IB_HCA"] = absl::StrCat("=", absl::StrJoin(names, ","));
  env["UCX_NET_DEVICES"] = absl::StrJoin(names, ",");
  GidEnv(host, ports, &env, note);
  SocketIfname(host, ports, policy, &env, note);

  // The operator's explicit config wins; sorted so notes come in a stable order.
  std::map<std::string, std::string> statics(policy.static_env().begin(),
                                             policy.static_env().end());
  for (const auto& [k, v] : statics) {
    auto it = env.find(k);
    if (it != env.end() && it->second != v) {
      note(absl::StrFormat("static_env %s=%s overrides the computed value %s", k, v, it->second));
    }
    env[k] = v;
  }
  return env;
}

absl::Status FillEnv(const Host& host, const SelectionPolicy& policy, Selection* sel) {
  std::vector<std::string> notes;
  absl::StatusOr<EnvMap> env = RenderEnv(host, *sel, policy, &notes);
  if (!env.ok()) return env.status();
  sel->mutable_env()->clear();
  for (const auto& [k, v] : *env) (*sel->mutable_env())[k] = v;
  for (std::string& n : notes) sel->add_notes(std::move(n));
  return absl::OkStatus();
}

EnvMap EnvOf(const Selection& sel) { return EnvMap(sel.env().begin(), sel.env().end()); }

std::string FormatShell(const EnvMap& env) {
  std::string out;
  for (const auto& [k, v] : env) {
    // A shell variable cannot hold a NUL; an invalid name would be run as a command.
    if (!IsValidEnvName(k) || v.find('\0') != std::string::npos) continue;
    absl::StrAppend(&out, k, "=", ShellQuote(v), "\n");
  }
  return out;
}

std::string FormatNcclConf(const EnvMap& env) {
  std::string out = "# generated by fabricctl\n";
  for (const auto& [k, v] : env) {
    // NCCL reads the file line by line: a newline in a value cannot be carried.
    if (!IsValidEnvName(k) || v.find_first_of(std::string_view("\0\n\r", 3)) != std::string::npos) {
      continue;
    }
    absl::StrAppend(&out, k, "=", v, "\n");
  }
  return out;
}

std::string FormatJson(const EnvMap& env) {
  if (env.empty()) return "{}\n";
  std::string out = "{\n";
  bool first = true;
  for (const auto& [k, v] : env) {
    if (!first) out += ",\n";
    first = false;
    out += "  ";
    JsonString(k, &out);
    out += ": ";
    JsonString(v, &out);
  }
  out += "\n}\n";
  return out;
}

EnvMap DropAlreadySet(const EnvMap& env, const std::function<const char*(const char*)>& getenv) {
  EnvMap out;
  for (const auto& [k, v] : env) {
    if (getenv(k.c_str()) == nullptr) out.emplace(k, v);
  }
  return out;
}

}  // namespace fabric
