// The inventory's own consistency: firmware across HCAs of one model, uverbs nodes, and the
// ports a host of a known class must have (health_internal.h).
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "agent/inventory/query/host_query.h"
#include "agent/inventory/topology/topology.h"
#include "agent/policy/health/health.h"
#include "agent/policy/health/health_internal.h"

namespace fabric::health_internal {

using namespace ::fabric::v1;  // NOLINT: the model's messages and enum values

namespace {

HostClass Class(const char* name, std::initializer_list<const char*> models, uint32_t ports,
                double rate) {
  HostClass c;
  c.set_name(name);
  for (const char* m : models) c.add_gpu_models(m);
  c.set_gpus(8);
  c.set_ports(ports);
  c.set_rate_gbps(rate);
  return c;
}

bool IsVf(const RdmaDevice& d) { return d.pci().sriov().role() == SRIOV_ROLE_VF; }

std::string ModelOf(const PciFunction& f) {
  return absl::StrCat(f.vendor_id(), ":", f.device_id());
}

// A GPU is of a class when its PCI name contains one of the class's models, or its
// "vendor:device" is one.
bool OfModel(const Accelerator& a, const HostClass& c) {
  for (const std::string& m : c.gpu_models()) {
    if (m.empty()) continue;
    if (ModelOf(a.pci()) == m || absl::StrContains(a.pci().device_name(), m)) return true;
  }
  return false;
}

}  // namespace

void CheckFirmware(Health* h, const Host& host) {
  // Model -> version -> devices. VFs run their PF's firmware; software devices have none.
  std::map<std::string, std::map<std::string, std::vector<std::string>>> by_model;
  std::map<std::string, std::string> names;
  for (const RdmaDevice& d : host.rdma_devices()) {
    if (!d.has_pci() || IsVf(d) || d.fw_ver().empty()) continue;
    const std::string model = ModelOf(d.pci());
    by_model[model][d.fw_ver()].push_back(d.name());
    if (!d.pci().device_name().empty()) names[model] = d.pci().device_name();
  }
  for (const auto& [model, versions] : by_model) {
    if (versions.size() < 2) continue;
    std::vector<std::string> parts;
    for (const auto& [version, devices] : versions) {
      parts.push_back(absl::StrCat(absl::StrJoin(devices, ", "), " on ", version));
    }
    const std::string shown =
        names.count(model) ? absl::StrCat(names[model], " (", model, ")") : model;
    Add(h, SEVERITY_WARNING, "firmware", "mismatch", REPAIR_ACTION_UPDATE_FIRMWARE, model,
        absl::StrCat(versions.size(), " firmware versions on the HCAs of one model, ", shown,
                     ": collectives run at the pace of the slowest, and fixes reach only some "
                     "ports"),
        absl::StrCat("fw_ver: ", absl::StrJoin(parts, "; ")));
  }
}

void CheckUverbs(Health* h, const Host& host) {
  // A class directory that could not be listed for a passing reason is a discovery finding, not
  // a missing module.
  bool module = true;
  for (const FieldProblem& p : host.problems()) {
    if (p.field() != "uverbs_device") continue;
    if (p.transient()) return;
    module = false;
  }
  for (const RdmaDevice& d : host.rdma_devices()) {
    // A device read only in part (a dangling class entry) is the discovery finding's.
    if (!d.uverbs_device().empty() || !d.problems().empty()) continue;
    Add(h, SEVERITY_CRITICAL, "uverbs", module ? "missing" : "no_module", REPAIR_ACTION_REBOOT,
        d.name(),
        module ? absl::StrCat(d.name(),
                              " has no uverbs device: no process can open it (the device is "
                              "half-registered; reload its driver or reboot)")
               : absl::StrCat(d.name(),
                              " has no uverbs device: ib_uverbs is not loaded, so no process "
                              "can use RDMA (modprobe ib_uverbs)"),
        module ? "no class/infiniband_verbs/uverbsN names it"
               : "class/infiniband_verbs is missing");
  }
}

void CheckUmad(Health* h, const Host& host) {
  for (const FieldProblem& p : host.problems()) {
    if (p.field() == "umad_device") return;  // A passing read failure is not a fact.
  }
  for (const RdmaDevice& d : host.rdma_devices()) {
    // iWARP has no MADs; a device without uverbs is the uverbs check's, one read in part the
    // discovery finding's.
    if (d.node_type() != NODE_TYPE_CA || d.uverbs_device().empty() || !d.problems().empty()) {
      continue;
    }
    for (const Port& p : d.ports()) {
      if (!p.umad_device().empty()) continue;
      const std::string port = absl::StrCat(d.name(), ":", p.number());
      Add(h, SEVERITY_WARNING, "umad", "missing", REPAIR_ACTION_NONE, port,
          absl::StrCat(port,
                       " has no umad device: ibstat, perfquery, ibdiagnet and subnet-manager "
                       "queries cannot reach it (verbs are unaffected; is ib_umad loaded?)"),
          absl::StrCat("no class/infiniband_mad/umadN names ", d.name(), " port ", p.number()));
    }
  }
}

void CheckPciTopology(Health* h, const Host& host) {
  if (std::string problem = NcclTopologyProblem(host); !problem.empty()) {
    Add(h, SEVERITY_WARNING, "pci_topology", "topology_file", REPAIR_ACTION_NONE, "pci", problem,
        "selection.ncclTopoFile names it");
  }
  const std::string why = VirtualPciTree(host);
  if (why.empty()) return;
  // Said, not alarmed: a cloud shape is healthy, but its pairing needs its topology file.
  Add(h, SEVERITY_OK, "pci_topology", "virtual", REPAIR_ACTION_NONE, "pci",
      PairedByNcclTopology(host)
          ? absl::StrCat(why, "; each GPU's NIC is paired by the NCCL topology file ",
                         host.nccl_topology().path(), ", which jobs get as NCCL_TOPO_FILE")
          : absl::StrCat(why,
                         "; each GPU's NIC is chosen by NUMA and order, not distance: name "
                         "the shape's NCCL topology file in selection.ncclTopoFile"),
      "every GPU's and RDMA device's PCI path is its root bus alone");
}

void CheckHostClass(Health* h, const Host& host, const SelectionPolicy& policy,
                    const HealthConfig& config) {
  std::vector<const Accelerator*> gpus;
  for (const Accelerator& a : host.accelerators()) {
    if (!a.management_display()) gpus.push_back(&a);
  }
  if (gpus.empty() || host.rdma_devices().empty()) return;  // No RDMA: no_rdma_device says so.
  for (const HostClass& c : EffectiveHostClasses(config)) {
    uint32_t n = 0;
    for (const Accelerator* a : gpus) n += OfModel(*a, c) ? 1 : 0;
    if (n != c.gpus() || n != gpus.size()) continue;
    // The class matches: its back-end ports at its rate.
    std::vector<std::string> good, slow;
    for (const BackendPort& b : BackendPorts(host, policy)) {
      const std::string port = absl::StrCat(b.device->name(), ":", b.port->number());
      if (b.port->has_rate_gbps() && b.port->rate_gbps() + 0.5 >= c.rate_gbps()) {
        good.push_back(port);
      } else {
        slow.push_back(absl::StrCat(port, " at ", b.port->rate()));
      }
    }
    if (good.size() >= c.ports()) return;
    // Ports down, or missing, are CRITICAL (the link's fault, or the host's); ports up but
    // slow, WARNING.
    uint32_t physical = 0, down = 0;
    for (const RdmaDevice& d : host.rdma_devices()) {
      if (!d.has_pci() || IsVf(d)) continue;
      for (const Port& p : d.ports()) {
        ++physical;
        if (p.state() != PORT_STATE_ACTIVE && DeniedBy(policy, d, p).empty()) ++down;
      }
    }
    const bool short_of_ports = down > 0 || good.size() + slow.size() < c.ports();
    Add(h, short_of_ports ? SEVERITY_CRITICAL : SEVERITY_WARNING, "host_class",
        short_of_ports ? "ports" : "rate",
        !short_of_ports         ? REPAIR_ACTION_RESEAT_CABLE
        : physical >= c.ports() ? REPAIR_ACTION_CHECK_SWITCH_PORT
                                : REPAIR_ACTION_HARDWARE_INSPECTION,
        "",
        absl::StrFormat("%d active back-end ports at %g Gb/s or more; a host of class %s (%d "
                        "GPUs) has %d: jobs sized for the class run short of bandwidth or do not "
                        "fit",
                        good.size(), c.rate_gbps(), c.name(), c.gpus(), c.ports()),
        absl::StrCat("class ", c.name(),
                     "; at rate: ", good.empty() ? "none" : absl::StrJoin(good, ", "),
                     slow.empty() ? "" : absl::StrCat("; below: ", absl::StrJoin(slow, ", ")),
                     "; physical ports: ", physical, ", down: ", down));
    return;
  }
}

}  // namespace fabric::health_internal

namespace fabric {

using namespace ::fabric::v1;  // NOLINT

const std::vector<HostClass>& DefaultHostClasses() {
  // Names as pci.ids spells them ("GH100 [H100 SXM5 80GB]", "Aqua Vanjaram [Instinct MI300X]").
  static const std::vector<HostClass> kClasses = {
      health_internal::Class("nvidia-hopper-8x400", {"H100", "H200", "H800", "H20"}, 8, 400),
      health_internal::Class("nvidia-blackwell-8x400", {"B200", "B300", "GB200"}, 8, 400),
      health_internal::Class("amd-mi300-8x400", {"MI300X", "MI325X"}, 8, 400),
      health_internal::Class("nvidia-a100-8x200", {"A100", "A800"}, 8, 200),
  };
  return kClasses;
}

std::vector<HostClass> EffectiveHostClasses(const HealthConfig& config) {
  std::vector<HostClass> out(config.host_classes().begin(), config.host_classes().end());
  if (!config.no_default_host_classes()) {
    const auto& d = DefaultHostClasses();
    out.insert(out.end(), d.begin(), d.end());
  }
  return out;
}

}  // namespace fabric
