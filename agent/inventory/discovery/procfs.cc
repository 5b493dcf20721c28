// Host-wide facts: identity, IPv4 and IPv6 default routes and loaded kernel modules (from procfs,
// and sysfs's module/), and the NUMA nodes.
#include <set>
#include <string>
#include <vector>

#include "agent/inventory/discovery/discovery_internal.h"
#include "agent/inventory/discovery/parse.h"

namespace fabric::discovery_internal {

using namespace ::fabric::v1;  // NOLINT: the model's messages and enum values

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
  std::set<std::string> defaults;
  if (auto text = proc.ReadFile("net/route"); text.ok()) {
    std::vector<std::string> bad;
    auto routes = ParseProcNetRoute(*text, &bad);
    for (const std::string& b : bad) AddProblem(host->mutable_problems(), "routes", "net/route", b);
    if (routes.ok()) {
      scan.routes = *std::move(routes);
      for (const Ipv4Route& r : scan.routes) {
        if (r.destination == 0 && r.mask == 0) defaults.insert(r.iface);
      }
    } else {
      AddProblem(host->mutable_problems(), "routes", "net/route", routes.status());
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
