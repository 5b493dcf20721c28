#include "agent/inventory/topology/topology.h"

#include <set>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/common/strings.h"

namespace fabric {
namespace {

// The unit a bridge belongs to: the root port itself, or the switch (named by its upstream
// port) that the bridge is a port of. `bridges` excludes the root complex.
std::string Unit(const google::protobuf::RepeatedPtrField<std::string>& path, int i) {
  // path[0] is the root complex; path[1] the root port; then (upstream, downstream) pairs.
  const int b = i - 1;  // index among bridges
  if (b == 0) return absl::StrCat("root port ", path[i]);
  const int upstream = (b % 2 == 1) ? i : i - 1;
  return absl::StrCat("PCIe switch ", path[upstream]);
}

}  // namespace

std::string DistanceName(v1::DistanceClass d) {
  switch (d) {
    case v1::DISTANCE_CLASS_PIX:
      return "PIX";
    case v1::DISTANCE_CLASS_PXB:
      return "PXB";
    case v1::DISTANCE_CLASS_PHB:
      return "PHB";
    case v1::DISTANCE_CLASS_NODE:
      return "NODE";
    case v1::DISTANCE_CLASS_SYS:
      return "SYS";
    default:
      return "unknown";
  }
}

Distance ClassifyDistance(const v1::PciFunction& a, const v1::PciFunction& b,
                          bool single_numa_node) {
  const auto& pa = a.path();
  const auto& pb = b.path();
  if (pa.empty() || pb.empty()) {
    return {v1::DISTANCE_CLASS_SYS, "PCIe path unknown"};
  }
  if (pa[0] != pb[0]) {
    if (a.has_numa_node() && b.has_numa_node()) {
      if (a.numa_node() == b.numa_node()) {
        return {v1::DISTANCE_CLASS_NODE, absl::StrCat("host bridges ", pa[0], " and ", pb[0],
                                                      " on NUMA node ", a.numa_node())};
      }
      return {v1::DISTANCE_CLASS_SYS,
              absl::StrCat("NUMA node ", a.numa_node(), " vs ", b.numa_node())};
    }
    if (single_numa_node) {
      return {v1::DISTANCE_CLASS_NODE,
              absl::StrCat("host bridges ", pa[0], " and ", pb[0], " on the only NUMA node")};
    }
    return {v1::DISTANCE_CLASS_SYS,
            absl::StrCat("host bridges ", pa[0], " and ", pb[0], ", NUMA node unknown")};
  }
  // Same root complex: find the deepest common bridge.
  int common = 1;
  while (common < pa.size() && common < pb.size() && pa[common] == pb[common]) ++common;
  if (common == 1) {
    return {v1::DISTANCE_CLASS_PHB, absl::StrCat("common host bridge ", pa[0])};
  }
  // Units crossed: the common bridge's unit and every unit below it on either side.
  std::set<std::string> units;
  for (int i = common - 1; i < pa.size(); ++i) units.insert(Unit(pa, i));
  for (int i = common - 1; i < pb.size(); ++i) units.insert(Unit(pb, i));
  const std::string lca_unit = Unit(pa, common - 1);
  if (units.size() <= 1) {
    return {v1::DISTANCE_CLASS_PIX, absl::StrCat("common ", lca_unit)};
  }
  return {v1::DISTANCE_CLASS_PXB,
          absl::StrCat(units.size(), " PCIe bridges or switches, common ", lca_unit)};
}

Distance ClassifyByNcclTopology(const v1::NcclTopoDevice& a, const v1::NcclTopoDevice& b,
                                std::string_view file) {
  const auto& pa = a.path();
  const auto& pb = b.path();
  int common = 0;
  while (common < pa.size() && common < pb.size() && pa[common] == pb[common]) ++common;
  if (common == 0) {
    if (a.has_numa_node() && b.has_numa_node()) {
      return {v1::DISTANCE_CLASS_SYS,
              absl::StrCat("NUMA node ", a.numa_node(), " vs ", b.numa_node(), " in ", Av(file))};
    }
    return {v1::DISTANCE_CLASS_SYS, absl::StrCat("no common element in ", Av(file))};
  }
  const std::string& lca = pa[common - 1];
  if (absl::StartsWith(lca, "cpu ")) {
    return {v1::DISTANCE_CLASS_PHB,
            absl::StrCat("meet only at ", lca, " in ", Av(file), " (NCCL's PHB: through the CPU)")};
  }
  const std::string where = absl::StrCat(lca.substr(4), " in ", Av(file));
  if (pa.size() == common && pb.size() == common) {
    return {v1::DISTANCE_CLASS_PIX, absl::StrCat("common PCIe switch ", where)};
  }
  return {v1::DISTANCE_CLASS_PXB, absl::StrCat("nested PCIe switches, common ", where)};
}

bool PairedByNcclTopology(const v1::Host& host) {
  return host.has_nccl_topology() && !host.nccl_topology().devices().empty() &&
         !VirtualPciTree(host).empty();
}

std::string NcclTopologyProblem(const v1::Host& host) {
  const v1::NcclTopology& t = host.nccl_topology();
  if (t.error().empty()) return "";
  return absl::StrCat("the NCCL topology file ", t.path(), " could not be read (", t.error(),
                      t.stale() ? "): its last good read is used, and jobs are not given it"
                                : "): no read of it has succeeded");
}

std::string NcclTopoFileForJobs(const v1::Host& host) {
  const v1::NcclTopology& t = host.nccl_topology();
  return t.devices().empty() || !t.error().empty() ? "" : t.path();
}

void BuildTopology(v1::Host* host) {
  host->clear_topology();
  const bool single_numa = host->numa_nodes_size() <= 1;
  absl::flat_hash_map<std::string, const v1::NcclTopoDevice*> in_file;
  const bool by_file = PairedByNcclTopology(*host);
  if (by_file) {
    for (const v1::NcclTopoDevice& d : host->nccl_topology().devices()) in_file[d.bus_id()] = &d;
  }
  auto file_device = [&](const std::string& address) -> const v1::NcclTopoDevice* {
    auto it = in_file.find(absl::AsciiStrToLower(address));
    return it == in_file.end() ? nullptr : it->second;
  };
  const std::string& file = host->nccl_topology().path();
  for (const v1::Accelerator& acc : host->accelerators()) {
    if (acc.management_display()) continue;
    const v1::NcclTopoDevice* acc_in_file = by_file ? file_device(acc.pci_address()) : nullptr;
    for (const v1::RdmaDevice& dev : host->rdma_devices()) {
      if (!dev.has_pci() || dev.pci().address().empty()) continue;
      Distance d;
      if (!by_file) {
        d = ClassifyDistance(acc.pci(), dev.pci(), single_numa);
      } else if (const v1::NcclTopoDevice* nic = file_device(dev.pci().address());
                 acc_in_file != nullptr && nic != nullptr) {
        d = ClassifyByNcclTopology(*acc_in_file, *nic, file);
      } else {
        d = {v1::DISTANCE_CLASS_UNSPECIFIED,
             absl::StrCat(acc_in_file == nullptr ? acc.pci_address() : dev.pci().address(),
                          " is not in ", file, ", and the PCI tree is virtual")};
      }
      v1::TopologyPair* pair = host->add_topology();
      pair->set_accelerator(acc.pci_address());
      pair->set_rdma_device(dev.name());
      pair->set_distance(d.distance);
      pair->set_reason(std::move(d.reason));
    }
  }
}

std::string VirtualPciTree(const v1::Host& host) {
  int gpus = 0, nics = 0;
  for (const v1::Accelerator& a : host.accelerators()) {
    if (a.management_display()) continue;
    if (a.pci().path_size() != 1) return "";  // Below a bridge, or the path unknown.
    ++gpus;
  }
  for (const v1::RdmaDevice& d : host.rdma_devices()) {
    if (!d.has_pci()) continue;  // Software devices have no place in the tree.
    if (d.pci().path_size() != 1) return "";
    ++nics;
  }
  if (gpus == 0 || nics == 0) return "";
  return absl::StrCat("the PCI tree is virtual: all ", gpus, " GPUs and ", nics,
                      " RDMA devices sit directly on root buses, with no root port or switch "
                      "above them (a virtual machine's), so PCIe distance says nothing of which "
                      "NIC is near which GPU");
}

}  // namespace fabric
