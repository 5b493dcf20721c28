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
    RdmaScan rdma = ReadRdmaDevices(sys_, &pci_, &host_);
    ReadGidTables(std::move(rdma.port_dirs), &host_);
    ReadNetdevs(sys_, rdma.pci_dirs, routes_, &host_);
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

  const HostFs& sys_;
  const HostFs& proc_;
  Host host_;
  PciReader pci_{sys_};
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
