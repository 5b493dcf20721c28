// fabricctl's views of the host model: inventory (the ibstat/ibv_devinfo facts per port among
// them), topo (the `nvidia-smi topo -m` form) and neighbors. Default views fit kDefaultWidth
// columns on the example hosts; --wide shows every column unclipped.
#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "agent/fabricctl/render.h"
#include "agent/fabricctl/render_internal.h"
#include "agent/fabricctl/table.h"
#include "agent/inventory/discovery/discovery.h"
#include "agent/inventory/discovery/parse.h"
#include "agent/inventory/discovery/pci_names.h"
#include "agent/inventory/query/host_query.h"
#include "agent/inventory/topology/topology.h"

namespace fabric {
namespace {

using namespace ::fabric::v1;  // NOLINT
using render_internal::Numa;
using render_internal::Or;

// Shorter than the kernel's words (PhysStateWord), to fit the ports table.
std::string PhysName(PhysState s) {
  switch (s) {
    case PHYS_STATE_SLEEP:
      return "Sleep";
    case PHYS_STATE_POLLING:
      return "Polling";
    case PHYS_STATE_DISABLED:
      return "Disabled";
    case PHYS_STATE_PORT_CONFIGURATION_TRAINING:
      return "Training";
    case PHYS_STATE_LINK_UP:
      return "LinkUp";
    case PHYS_STATE_LINK_ERROR_RECOVERY:
      return "ErrorRecovery";
    case PHYS_STATE_PHY_TEST:
      return "PhyTest";
    default:
      return "?";
  }
}

std::string GidTypeName(GidType t) {
  switch (t) {
    case GID_TYPE_IB:
      return "IB";
    case GID_TYPE_ROCE_V1:
      return "RoCE v1";
    case GID_TYPE_ROCE_V2:
      return "RoCE v2";
    default:
      return "-";
  }
}

std::string Link(const PciLink& l) {
  if (!l.has_speed_gts() && !l.has_width()) return "-";
  return absl::StrCat(l.has_speed_gts() ? absl::StrFormat("%gGT/s", l.speed_gts()) : "?", " x",
                      l.has_width() ? absl::StrCat(l.width()) : "?");
}

// The current link; the maximum beside it in the wide view, or in brackets where the link runs
// below it (a card trained down is worth a glance): "16GT/s x8 (32GT/s x16)".
std::string PcieLink(const PciFunction& f, const TableStyle& style) {
  const std::string cur = Link(f.current_link()), max = Link(f.max_link());
  if (cur == "-" || max == "-" || (!style.wide && cur == max)) return cur;
  return absl::StrCat(cur, style.wide ? " (max " : " (", max, ")");
}

// The model: the PCI ID database's short name ("ConnectX-7"), else the kernel's HCA type, else
// the device ID.
std::string Model(const PciFunction& f, const std::string& fallback, const TableStyle& style) {
  if (!f.device_name().empty()) {
    return style.wide ? f.device_name() : Clip(ShortPciName(f.device_name()), 18, style);
  }
  if (!fallback.empty()) return fallback;
  return f.device_id().empty() ? "-" : absl::StrCat(f.vendor_id(), ":", f.device_id());
}

// "4X NDR (400 Gb/s)" as ibstat says it; the number alone where the kernel gives no lanes.
std::string Rate(const Port& p) {
  if (!p.has_rate_gbps()) return "?";
  const std::string lanes = RateLanes(p.rate());
  const std::string gbps = absl::StrFormat("%g Gb/s", p.rate_gbps());
  return lanes.empty() ? gbps : absl::StrCat(lanes, " (", gbps, ")");
}

std::string Lid(const Port& p) {
  if (p.link_layer() != LINK_LAYER_INFINIBAND) return "-";
  return absl::StrCat(p.has_lid() ? absl::StrFormat("0x%x", p.lid()) : "?", "/",
                      p.has_sm_lid() ? absl::StrFormat("0x%x", p.sm_lid()) : "?");
}

std::string Sriov(const PciFunction& f, const TableStyle& style) {
  switch (f.sriov().role()) {
    case SRIOV_ROLE_PF:
      return absl::StrCat("PF ", f.sriov().num_vfs(), "/", f.sriov().total_vfs());
    case SRIOV_ROLE_VF:
      return style.wide
                 ? absl::StrCat("VF ", f.sriov().vf_index(), " of ", f.sriov().pf_pci_address())
                 : absl::StrCat("VF ", f.sriov().vf_index());
    default:
      return "-";
  }
}

void DevicesTable(const Host& host, const TableStyle& style, std::string* out) {
  Rows rows = {{"DEVICE", "MODEL", "PCI", "NUMA", "DRIVER", "FW", "PCIE LINK", "SR-IOV"}};
  if (style.wide) rows[0].insert(rows[0].end(), {"TYPE", "UVERBS"});
  for (const RdmaDevice& d : host.rdma_devices()) {
    const std::string pci =
        d.has_pci() ? d.pci().address() : absl::StrCat("(on ", Or(d.parent_netdev(), "?"), ")");
    rows.push_back({d.name(), Model(d.pci(), d.hca_type(), style), pci, Numa(d.pci()),
                    Or(d.pci().driver()), Clip(Or(d.fw_ver()), 16, style), PcieLink(d.pci(), style),
                    Sriov(d.pci(), style)});
    if (style.wide)
      rows.back().insert(rows.back().end(), {Or(d.hca_type()), Or(d.uverbs_device())});
  }
  absl::StrAppend(out, "\nRDMA devices (", host.rdma_devices_size(), ")\n",
                  Table(rows, style.headers, "  "));
}

// ibstat's and ibv_devinfo's facts, one line per port.
void PortsTable(const Host& host, const TableStyle& style, std::string* out) {
  Rows rows = {{"PORT", "STATE", "PHYS", "RATE", "MTU", "LAYER", "LID/SM", "NETDEV", "GIDS"}};
  if (style.wide) rows[0].push_back("PORT GUID");
  for (const RdmaDevice& d : host.rdma_devices()) {
    for (const Port& p : d.ports()) {
      rows.push_back({absl::StrCat(d.name(), ":", p.number()),
                      std::string(PortStateWord(p.state())), PhysName(p.phys_state()), Rate(p),
                      p.has_active_mtu() ? absl::StrCat(p.active_mtu()) : "-",
                      Or(std::string(LinkLayerWord(p.link_layer())), "?"), Lid(p),
                      Clip(Or(p.netdev()), 15, style), absl::StrCat(p.gids_size())});
      if (style.wide) rows.back().push_back(Or(p.port_guid()));
    }
  }
  absl::StrAppend(out, "\nPorts\n", Table(rows, style.headers, "  "));
}

// show_gids' columns: the IPv4 address where the GID maps one (the GID is the IPv6 address).
void GidsTable(const Host& host, const TableStyle& style, std::string* out) {
  Rows rows = {{"PORT", "IDX", "GID", "TYPE", "NETDEV", "IPV4"}};
  if (style.wide) rows[0].push_back("IPV6");
  for (const RdmaDevice& d : host.rdma_devices()) {
    for (const Port& p : d.ports()) {
      for (const Gid& g : p.gids()) {
        rows.push_back({absl::StrCat(d.name(), ":", p.number()), absl::StrCat(g.index()), g.gid(),
                        GidTypeName(g.type()), Clip(Or(g.netdev()), 15, style), Or(g.ipv4())});
        if (style.wide) rows.back().push_back(Or(g.ipv6()));
      }
    }
  }
  absl::StrAppend(out, "\nGID tables (used entries)\n", Table(rows, style.headers, "  "));
}

void NetdevsTable(const Host& host, const TableStyle& style, std::string* out) {
  Rows rows = {{"NETDEV", "STATE", "MTU", "SPEED", "RDMA", "SUBNETS", "ROLE"}};
  if (style.wide) rows[0].insert(rows[0].end(), {"MAC", "IFINDEX"});
  for (const Netdev& n : host.netdevs()) {
    std::string subnets = n.ipv4_subnets().empty() ? "-" : n.ipv4_subnets(0);
    if (style.wide) {
      subnets = Or(absl::StrJoin(n.ipv4_subnets(), ","));
    } else if (n.ipv4_subnets_size() > 1) {
      absl::StrAppend(&subnets, " +", n.ipv4_subnets_size() - 1);
    }
    rows.push_back(
        {Clip(n.name(), 15, style), Or(n.operstate()), n.has_mtu() ? absl::StrCat(n.mtu()) : "-",
         n.has_speed_mbps() ? absl::StrCat(n.speed_mbps() / 1000, " Gb/s") : "-",
         n.rdma_device().empty() ? "-" : absl::StrCat(n.rdma_device(), ":", n.rdma_port()), subnets,
         n.default_route() ? "default route" : (n.upper() ? "upper" : "-")});
    if (style.wide) {
      rows.back().insert(rows.back().end(),
                         {Or(n.mac()), n.has_ifindex() ? absl::StrCat(n.ifindex()) : "-"});
    }
  }
  absl::StrAppend(out, "\nNetdevs\n", Table(rows, style.headers, "  "));
}

// The name vendor tools give a GPU: GPU<i> in nvidia-smi order for NVIDIA, in rocm-smi order
// for AMD (AMD<i> beside NVIDIA GPUs, whose numbers those are); ACC<k> for other accelerators.
std::vector<std::string> AcceleratorLabels(const Host& host) {
  bool nvidia = false;
  for (const Accelerator& a : host.accelerators()) {
    nvidia = nvidia || (a.vendor() == ACCELERATOR_VENDOR_NVIDIA && a.has_index());
  }
  std::vector<std::string> labels;
  int other = 0;
  for (const Accelerator& a : host.accelerators()) {
    if (a.management_display()) {
      labels.push_back("-");
    } else if (!a.has_index()) {
      labels.push_back(absl::StrCat("ACC", other++));
    } else {
      labels.push_back(
          absl::StrCat(nvidia && a.vendor() == ACCELERATOR_VENDOR_AMD ? "AMD" : "GPU", a.index()));
    }
  }
  return labels;
}

void AcceleratorsTable(const Host& host, const TableStyle& style, std::string* out) {
  // The count is of compute devices; a BMC's display is listed but not counted as one.
  const int displays =
      static_cast<int>(std::count_if(host.accelerators().begin(), host.accelerators().end(),
                                     [](const Accelerator& a) { return a.management_display(); }));
  absl::StrAppend(out, "\nAccelerators (", host.accelerators_size() - displays,
                  displays > 0 ? absl::StrCat(", and ", displays, " management display") : "",
                  ")\n");
  if (host.accelerators().empty()) return;
  Rows rows = {{"NAME", "PCI", "VENDOR", "MODEL", "NUMA", "DRIVER", "PCIE LINK"}};
  if (style.wide) rows[0].insert(rows[0].end(), {"KIND", "UUID"});
  const std::vector<std::string> labels = AcceleratorLabels(host);
  for (int i = 0; i < host.accelerators_size(); ++i) {
    const Accelerator& a = host.accelerators(i);
    rows.push_back({labels[i], a.pci_address(), Or(a.vendor_name()),
                    a.management_display() ? "(management display)" : Model(a.pci(), "", style),
                    Numa(a.pci()), Or(a.pci().driver()), PcieLink(a.pci(), style)});
    if (style.wide) {
      rows.back().insert(
          rows.back().end(),
          {AcceleratorKind_Name(a.kind()).substr(sizeof("ACCELERATOR_KIND_") - 1), Or(a.uuid())});
    }
  }
  absl::StrAppend(out, Table(rows, style.headers, "  "));
}

// The problems `want` picks, one line each naming what and where: the device or netdev, the
// field, and the file (unless the reason already quotes it).
template <typename Want>
std::string Problems(const Host& host, Want want) {
  std::string lines;
  ForEachProblem(host, [&](const std::string& where, const FieldProblem& p) {
    if (!want(where, p)) return;
    const bool named = p.path().empty() || absl::StrContains(p.reason(), p.path());
    absl::StrAppend(&lines, "  ", where, ": ", p.field(), " unknown",
                    named ? "" : absl::StrCat(" (", p.path(), ")"), ": ", p.reason(), "\n");
  });
  return lines.empty() ? "" : absl::StrCat("\nProblems (fields left unknown)\n", lines);
}

}  // namespace

std::string RenderInventory(const Host& host, const TableStyle& style) {
  std::string out = absl::StrCat(
      "Host ", Or(host.hostname(), "?"), "  kernel ", Or(host.kernel_release(), "?"),
      "  NUMA nodes ", host.numa_nodes().empty() ? "?" : absl::StrJoin(host.numa_nodes(), ","),
      "  sysfs ", host.sysfs_root(), "\n");
  DevicesTable(host, style, &out);
  PortsTable(host, style, &out);
  GidsTable(host, style, &out);
  NetdevsTable(host, style, &out);
  AcceleratorsTable(host, style, &out);

  const GpuDirect& gd = host.gpudirect();
  absl::StrAppend(&out, "\nGPUDirect RDMA: ", gd.available() ? "available" : "NOT available");
  for (const GpuDirectPath& p : gd.paths()) {
    absl::StrAppend(&out, "\n  ", p.mechanism(), ": ", p.detail());
  }
  if (!gd.reason().empty()) absl::StrAppend(&out, "\n  ", gd.reason());
  absl::StrAppend(&out, "\nDefault route: ",
                  host.default_route_netdevs().empty()
                      ? "none"
                      : absl::StrJoin(host.default_route_netdevs(), ","),
                  "\n");

  absl::StrAppend(&out,
                  Problems(host, [](const std::string&, const FieldProblem&) { return true; }));
  return out;
}

std::string RenderNeighbors(const Host& host, int64_t now_unix_ms, const TableStyle& style) {
  Rows rows = {
      {"NETDEV", "RDMA PORT", "SWITCH", "SWITCH PORT", "DESCRIPTION", "RAIL", "TTL", "SINCE"}};
  int heard = 0;
  const std::vector<std::string> physical = PhysicalNetdevs(host);  // What the agent listens on.
  const std::set<std::string> listed(physical.begin(), physical.end());
  for (const Netdev& n : host.netdevs()) {
    if (!listed.count(n.name())) continue;
    const std::string port =
        n.rdma_device().empty()
            ? "-"
            : absl::StrCat(n.rdma_device(),
                           n.has_rdma_port() ? absl::StrCat(":", n.rdma_port()) : "");
    if (!n.has_neighbor()) {
      rows.push_back({n.name(), port, "-", "-", "-", "-", "-", "-"});
      continue;
    }
    ++heard;
    const Neighbor& nb = n.neighbor();
    const int64_t age_s = std::max<int64_t>(0, (now_unix_ms - nb.first_seen_unix_ms()) / 1000);
    rows.push_back({n.name(), port, Clip(nb.switch_label(), 24, style),
                    Clip(nb.port_id(), 17, style), Clip(Or(nb.port_description()), 16, style),
                    Clip(Or(nb.rail()), 12, style),
                    nb.source() == Neighbor::SOURCE_LLDP ? absl::StrCat(nb.ttl_seconds(), "s")
                                                         : "-",  // SMP answers have no TTL.
                    absl::StrCat(age_s, "s ago")});
  }
  std::string out = Table(rows, style.headers);
  if (heard == 0 && style.headers) {
    out += "No LLDP neighbour heard (only a running fabric-agent listens; see its health).\n";
  }
  return out;
}

std::string RenderTopology(const Host& host, const TableStyle& style) {
  const std::vector<std::string> labels = AcceleratorLabels(host);
  std::vector<int> gpus;  // Indices into host.accelerators().
  for (int i = 0; i < host.accelerators_size(); ++i) {
    if (!host.accelerators(i).management_display()) gpus.push_back(i);
  }
  // PFs (and functions without SR-IOV); VFs too in the wide view.
  std::vector<const RdmaDevice*> nics;
  for (const RdmaDevice& d : host.rdma_devices()) {
    if (d.has_pci() && (style.wide || d.pci().sriov().role() != SRIOV_ROLE_VF)) {
      nics.push_back(&d);
    }
  }
  std::map<std::pair<std::string, std::string>, DistanceClass> distance;
  for (const TopologyPair& t : host.topology()) {
    distance[{t.accelerator(), t.rdma_device()}] = t.distance();
  }
  std::map<std::string, std::string> paired;  // GPU address -> its NIC.
  for (const GpuPair& p : host.pairing().pairs()) paired[p.gpu()] = p.rdma_device();
  auto cell = [&](const Accelerator& a, const RdmaDevice& d) {
    auto it = distance.find({a.pci_address(), d.name()});
    std::string c = it == distance.end() ? "-" : DistanceName(it->second);
    if (paired[a.pci_address()] == d.name()) c += "*";
    return c;
  };
  std::vector<std::string> nic_label(nics.size());
  for (size_t j = 0; j < nics.size(); ++j) nic_label[j] = absl::StrCat("NIC", j);

  Rows rows;
  std::vector<std::string> header = {""};
  header.insert(header.end(), nic_label.begin(), nic_label.end());
  header.push_back("NUMA");
  rows.push_back(header);
  for (int i : gpus) {
    const Accelerator& a = host.accelerators(i);
    std::vector<std::string> row = {labels[i]};
    for (const RdmaDevice* d : nics) row.push_back(cell(a, *d));
    row.push_back(Numa(a.pci()));
    rows.push_back(row);
  }
  std::string out = Table(rows, style.headers);
  // Too many NICs for a matrix in 100 columns: per GPU its paired NIC and the closest ones.
  if (!style.wide && DisplayWidth(out.substr(0, out.find('\n'))) > kDefaultWidth) {
    rows = {{"", "PAIRED", "NUMA", "CLOSEST NICS", "FARTHER"}};
    for (int i : gpus) {
      const Accelerator& a = host.accelerators(i);
      std::map<DistanceClass, std::vector<std::string>> by_class;
      std::string pair = "-";
      for (size_t j = 0; j < nics.size(); ++j) {
        auto it = distance.find({a.pci_address(), nics[j]->name()});
        by_class[it == distance.end() ? DISTANCE_CLASS_UNSPECIFIED : it->second].push_back(
            nic_label[j]);
        if (paired[a.pci_address()] == nics[j]->name()) pair = nic_label[j];
      }
      by_class.erase(DISTANCE_CLASS_UNSPECIFIED);
      std::string closest = "-", farther;
      if (!by_class.empty()) {
        const auto& [best, list] = *by_class.begin();
        closest = Clip(absl::StrCat(DistanceName(best), ": ", absl::StrJoin(list, " ")), 48, style);
        std::vector<std::string> rest;
        for (auto it = std::next(by_class.begin()); it != by_class.end(); ++it) {
          rest.push_back(absl::StrCat(it->second.size(), " ", DistanceName(it->first)));
        }
        farther = Or(absl::StrJoin(rest, ", "));
      }
      rows.push_back({labels[i], pair, Numa(a.pci()), closest, farther});
    }
    out = absl::StrCat(Table(rows, style.headers), "(", nics.size(),
                       " NICs: the full matrix is --wide)\n");
  }
  if (!style.headers) return out;  // Scripts get the rows alone.

  absl::StrAppend(&out,
                  "\nLegend:\n"
                  "  PIX  = at most one PCIe bridge or switch\n"
                  "  PXB  = several PCIe bridges or switches, no host bridge\n"
                  "  PHB  = through a PCIe host bridge\n"
                  "  NODE = across PCIe host bridges within a NUMA node\n"
                  "  SYS  = across the inter-socket link between NUMA nodes\n");
  if (host.pairing().pairs_size() > 0) {
    absl::StrAppend(&out,
                    "  *    = the GPU's paired NIC: its port whenever several are equally good\n");
  }
  if (!nics.empty()) {
    absl::StrAppend(&out, "\nNIC Legend:\n");
    Rows legend;
    for (size_t j = 0; j < nics.size(); ++j) {
      legend.push_back(
          {absl::StrCat(nic_label[j], ":"), nics[j]->name(), nics[j]->pci().address(),
           Numa(nics[j]->pci()) == "-" ? "NUMA -" : absl::StrCat("NUMA ", Numa(nics[j]->pci())),
           Model(nics[j]->pci(), nics[j]->hca_type(), style)});
    }
    absl::StrAppend(&out, Table(legend, true, "  "));
  }
  if (!gpus.empty()) {
    absl::StrAppend(&out, "\nGPU Legend:\n");
    Rows legend;
    for (int i : gpus) {
      const Accelerator& a = host.accelerators(i);
      legend.push_back({absl::StrCat(labels[i], ":"), a.pci_address(), Or(a.vendor_name()),
                        Model(a.pci(), "", style)});
    }
    absl::StrAppend(&out, Table(legend, true, "  "));
  }
  // What can hide a GPU or a NIC from the matrix.
  absl::StrAppend(&out, Problems(host, [](const std::string& where, const FieldProblem& p) {
    return p.field() == "accelerators" || p.field() == "pci" || absl::EndsWith(where, " pci");
  }));
  if (gpus.empty()) absl::StrAppend(&out, "\nNo GPU or accelerator found.\n");
  if (nics.empty()) absl::StrAppend(&out, "\nNo RDMA device with a PCI function found.\n");
  return out;
}

}  // namespace fabric
