#include "agent/inventory/discovery/discovery.h"

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "agent/inventory/discovery/discovery_internal.h"
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

using namespace ::fabric::v1;  // NOLINT: the model's messages and enum values
using discovery_internal::Problems;

}  // namespace

absl::StatusOr<Host> Discover(const HostFs& sysfs, const HostFs& procfs) {
  namespace di = discovery_internal;
  if (!sysfs.Exists("")) {
    return absl::NotFoundError(absl::StrCat("sysfs root ", sysfs.root(), " does not exist"));
  }
  if (!sysfs.Exists("devices") && !sysfs.Exists("class")) {
    return absl::FailedPreconditionError(
        absl::StrCat(sysfs.root(), " is not a sysfs root: it has no class/ or devices/"));
  }
  Host host;
  host.set_sysfs_root(sysfs.root());
  host.set_procfs_root(procfs.root());
  // Each part reads what the ones before it found: netdevs need the GID tables and routes,
  // GPUDirect the accelerators, RDMA devices and modules.
  const di::ProcfsScan proc = di::ReadProcfs(sysfs, procfs, &host);
  di::ReadNumaNodes(sysfs, &host);
  di::PciReader pci(sysfs);
  di::RdmaScan rdma = di::ReadRdmaDevices(sysfs, &pci, &host);
  di::ReadGidTables(std::move(rdma.port_dirs), &host);
  di::ReadNetdevs(sysfs, rdma.pci_dirs, proc.routes, &host);
  di::ReadArpSysctls(procfs, &host);
  di::ReadAccelerators(sysfs, procfs, &pci, &host);
  di::ReadGpuDirect(procfs, proc.modules, &host);
  BuildTopology(&host);
  return host;
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
