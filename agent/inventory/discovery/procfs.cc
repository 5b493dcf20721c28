// Host-wide facts: identity, IPv4 and IPv6 default routes and loaded kernel modules (from procfs,
// and sysfs's module/), the NUMA nodes, and the RDMA netdevs' ARP sysctls.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/inventory/discovery/discovery_internal.h"
#include "agent/inventory/discovery/parse.h"

namespace fabric::discovery_internal {

using namespace ::fabric::v1;  // NOLINT: the model's messages and enum values

std::vector<Ipv4Route> ReadRoutes(const HostFs& proc, Host* host) {
  std::vector<Ipv4Route> routes;
  std::set<std::string> defaults;
  if (auto text = proc.ReadFile("net/route"); text.ok()) {
    std::vector<std::string> bad;
    auto parsed = ParseProcNetRoute(*text, &bad);
    for (const std::string& b : bad) AddProblem(host->mutable_problems(), "routes", "net/route", b);
    if (parsed.ok()) {
      routes = *std::move(parsed);
      for (const Ipv4Route& r : routes) {
        if (r.destination == 0 && r.mask == 0) defaults.insert(r.iface);
      }
    } else {
      AddProblem(host->mutable_problems(), "routes", "net/route", parsed.status());
    }
  } else {
    AddProblem(host->mutable_problems(), "routes", "net/route", text.status());
  }
  // IPv6 may be disabled: a missing file is no problem.
  if (auto text = proc.ReadFile("net/ipv6_route"); text.ok()) {
    std::vector<std::string> bad;
    auto ifaces = ParseIpv6DefaultRouteIfaces(*text, &bad);
    for (const std::string& b : bad) {
      AddProblem(host->mutable_problems(), "routes", "net/ipv6_route", b);
    }
    if (ifaces.ok()) defaults.insert(ifaces->begin(), ifaces->end());
  } else {
    NoteTransient(host->mutable_problems(), "routes", "net/ipv6_route", text.status());
  }
  for (const std::string& d : defaults) host->add_default_route_netdevs(d);
  return routes;
}

ProcfsScan ReadProcfs(const HostFs& sys, const HostFs& proc, Host* host) {
  ProcfsScan scan;
  if (auto name = proc.ReadFile("sys/kernel/hostname"); name.ok()) {
    host->set_hostname(std::string(Trim(*name)));
  } else {
    AddProblem(host->mutable_problems(), "hostname", "sys/kernel/hostname", name.status());
  }
  if (auto rel = proc.ReadFile("sys/kernel/osrelease"); rel.ok()) {
    host->set_kernel_release(std::string(Trim(*rel)));
  } else {
    AddProblem(host->mutable_problems(), "kernel_release", "sys/kernel/osrelease", rel.status());
  }
  scan.routes = ReadRoutes(proc, host);

  if (auto list = sys.ListDir("module"); list.ok()) {
    scan.modules.insert(list->begin(), list->end());
  } else {
    NoteTransient(host->mutable_problems(), "gpudirect", "module", list.status());
  }
  if (auto text = proc.ReadFile("modules"); text.ok()) {
    if (auto names = ParseProcModules(*text); names.ok()) {
      scan.modules.insert(names->begin(), names->end());
    } else {
      AddProblem(host->mutable_problems(), "gpudirect", "modules", names.status());
    }
  } else {
    NoteTransient(host->mutable_problems(), "gpudirect", "modules", text.status());
  }
  return scan;
}

namespace {

// One ARP sysctl of conf/<iface>; nullopt when unreadable (recorded unless simply absent).
std::optional<int32_t> ReadConf(const HostFs& proc, const std::string& iface, const char* name,
                                Problems* problems) {
  const std::string path = absl::StrCat("sys/net/ipv4/conf/", iface, "/", name);
  auto text = proc.ReadFile(path);
  if (!text.ok()) {
    // No /proc/sys/net (a container, an example tree) or no IPv4 on the netdev: unknown.
    NoteTransient(problems, name, path, text.status());
    return std::nullopt;
  }
  auto v = ParseInt(*text);
  if (!v.ok() || *v < 0 || *v > 8) {
    AddProblem(problems, name, path,
               v.ok() ? absl::InvalidArgumentError("out of range") : v.status());
    return std::nullopt;
  }
  return static_cast<int32_t>(*v);
}

}  // namespace

void ReadArpSysctls(const HostFs& proc, Host* host) {
  std::optional<int32_t> all_ignore, all_announce;
  bool read_all = false;
  for (Netdev& nd : *host->mutable_netdevs()) {
    if (nd.rdma_device().empty()) continue;
    if (!read_all) {
      // conf/all is read once per scan, and only when some netdev needs it.
      all_ignore = ReadConf(proc, "all", "arp_ignore", host->mutable_problems());
      all_announce = ReadConf(proc, "all", "arp_announce", host->mutable_problems());
      read_all = true;
    }
    // The kernel applies the larger of conf/all and conf/<name> to both settings.
    if (all_ignore) {
      if (auto v = ReadConf(proc, nd.name(), "arp_ignore", nd.mutable_problems())) {
        nd.set_arp_ignore(std::max(*all_ignore, *v));
      }
    }
    if (all_announce) {
      if (auto v = ReadConf(proc, nd.name(), "arp_announce", nd.mutable_problems())) {
        nd.set_arp_announce(std::max(*all_announce, *v));
      }
    }
  }
}

void ReadNumaNodes(const HostFs& sys, Host* host) {
  auto text = sys.ReadFile("devices/system/node/online");
  if (!text.ok()) {
    AddProblem(host->mutable_problems(), "numa_nodes", "devices/system/node/online", text.status());
    return;
  }
  auto ids = ParseIdList(*text);
  if (!ids.ok()) {
    AddProblem(host->mutable_problems(), "numa_nodes", "devices/system/node/online", ids.status());
    return;
  }
  for (int32_t id : *ids) host->add_numa_nodes(id);
}

}  // namespace fabric::discovery_internal
