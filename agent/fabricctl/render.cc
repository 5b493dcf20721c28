#include "agent/fabricctl/render.h"

#include <algorithm>
#include <set>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "agent/inventory/discovery/discovery.h"
#include "agent/inventory/discovery/parse.h"
#include "agent/inventory/topology/topology.h"
#include "agent/policy/select/select.h"

namespace fabric {
namespace {

using namespace ::fabric::v1;  // NOLINT

// Shorter than the kernel's words (PhysStateWord), to fit the inventory table's column.
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

std::string LayerName(LinkLayer l) {
  const std::string_view word = LinkLayerWord(l);
  return word.empty() ? "?" : std::string(word);
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

std::string Numa(const PciFunction& f) {
  return f.has_numa_node() ? absl::StrCat(f.numa_node()) : "-";
}

std::string Link(const PciLink& l) {
  if (!l.has_speed_gts() && !l.has_width()) return "-";
  return absl::StrCat(l.has_speed_gts() ? absl::StrFormat("%gGT/s", l.speed_gts()) : "?", " x",
                      l.has_width() ? absl::StrCat(l.width()) : "?");
}

std::string Or(const std::string& s, const char* dflt = "-") { return s.empty() ? dflt : s; }

}  // namespace

std::string Table(const std::vector<std::vector<std::string>>& rows, const std::string& indent,
                  const std::vector<bool>& right) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line = indent;
    for (size_t i = 0; i < row.size(); ++i) {
      const std::string pad(width[i] - row[i].size(), ' ');
      const bool r = i < right.size() && right[i];
      line += r ? pad + row[i] : row[i];
      if (i + 1 < row.size()) line += r ? "  " : pad + "  ";
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string RenderInventory(const Host& host) {
  std::string out = absl::StrCat(
      "Host ", Or(host.hostname(), "?"), "  kernel ", Or(host.kernel_release(), "?"),
      "  NUMA nodes ", host.numa_nodes().empty() ? "?" : absl::StrJoin(host.numa_nodes(), ","),
      "  sysfs ", host.sysfs_root(), "\n");

  absl::StrAppend(&out, "\nRDMA devices (", host.rdma_devices_size(), ")\n");
  std::vector<std::vector<std::string>> rows = {
      {"DEVICE", "PCI", "NUMA", "DRIVER", "TYPE", "FW", "PCIE LINK (MAX)", "SR-IOV", "UVERBS"}};
  for (const RdmaDevice& d : host.rdma_devices()) {
    std::string sriov = "-";
    if (d.pci().sriov().role() == SRIOV_ROLE_PF) {
      sriov =
          absl::StrCat("PF ", d.pci().sriov().num_vfs(), "/", d.pci().sriov().total_vfs(), " VFs");
    } else if (d.pci().sriov().role() == SRIOV_ROLE_VF) {
      sriov =
          absl::StrCat("VF ", d.pci().sriov().vf_index(), " of ", d.pci().sriov().pf_pci_address());
    }
    std::string pci =
        d.has_pci() ? d.pci().address() : absl::StrCat("(on ", Or(d.parent_netdev(), "?"), ")");
    rows.push_back({d.name(), pci, Numa(d.pci()), Or(d.pci().driver()), Or(d.hca_type()),
                    Or(d.fw_ver()),
                    absl::StrCat(Link(d.pci().current_link()), " (", Link(d.pci().max_link()), ")"),
                    sriov, Or(d.uverbs_device())});
  }
  out += Table(rows, "  ");

  absl::StrAppend(&out, "\nPorts\n");
  rows = {{"PORT", "STATE", "PHYS", "RATE", "LAYER", "LID", "NETDEV", "GIDS"}};
  std::string gids;
  for (const RdmaDevice& d : host.rdma_devices()) {
    for (const Port& p : d.ports()) {
      const std::string name = absl::StrCat(d.name(), ":", p.number());
      rows.push_back({name, std::string(PortStateWord(p.state())), PhysName(p.phys_state()),
                      p.has_rate_gbps() ? absl::StrFormat("%g Gb/s", p.rate_gbps()) : "?",
                      LayerName(p.link_layer()),
                      p.link_layer() == LINK_LAYER_INFINIBAND && p.has_lid()
                          ? absl::StrFormat("0x%x", p.lid())
                          : "-",
                      Or(p.netdev()), absl::StrCat(p.gids_size())});
      for (const Gid& g : p.gids()) {
        absl::StrAppend(
            &gids, absl::StrFormat("  %-10s %3d  %-39s  %-7s  %-10s %s\n", name, g.index(), g.gid(),
                                   GidTypeName(g.type()), Or(g.netdev()),
                                   g.ipv4().empty() ? g.ipv6() : g.ipv4()));
      }
    }
  }
  out += Table(rows, "  ");
  absl::StrAppend(&out, "\nGID tables (used entries)\n", gids);

  absl::StrAppend(&out, "\nNetdevs\n");
  rows = {{"NETDEV", "MAC", "MTU", "STATE", "SPEED", "IFINDEX", "RDMA", "SUBNETS", "ROLE"}};
  for (const Netdev& n : host.netdevs()) {
    std::string role = n.default_route() ? "front-end (default route)" : (n.upper() ? "upper" : "");
    rows.push_back(
        {n.name(), Or(n.mac()), n.has_mtu() ? absl::StrCat(n.mtu()) : "-", Or(n.operstate()),
         n.has_speed_mbps() ? absl::StrCat(n.speed_mbps() / 1000, " Gb/s") : "-",
         n.has_ifindex() ? absl::StrCat(n.ifindex()) : "-",
         n.rdma_device().empty() ? "-" : absl::StrCat(n.rdma_device(), ":", n.rdma_port()),
         n.ipv4_subnets().empty() ? "-" : absl::StrJoin(n.ipv4_subnets(), ","), Or(role)});
  }
  out += Table(rows, "  ");

  // The count is of compute devices; a BMC's display is listed but not counted as one.
  const int displays =
      static_cast<int>(std::count_if(host.accelerators().begin(), host.accelerators().end(),
                                     [](const Accelerator& a) { return a.management_display(); }));
  absl::StrAppend(&out, "\nAccelerators (", host.accelerators_size() - displays,
                  displays > 0 ? absl::StrCat(", and ", displays, " management display") : "",
                  ")\n");
  rows.clear();
  if (!host.accelerators().empty()) {
    rows.push_back({"PCI", "VENDOR", "DEVICE", "KIND", "NUMA", "DRIVER", "PCIE LINK (MAX)", "INDEX",
                    "UUID", "NOTE"});
  }
  for (const Accelerator& a : host.accelerators()) {
    std::string kind = AcceleratorKind_Name(a.kind()).substr(sizeof("ACCELERATOR_KIND_") - 1);
    rows.push_back({a.pci_address(), a.vendor_name(), Or(a.pci().device_id()), kind, Numa(a.pci()),
                    Or(a.pci().driver()),
                    absl::StrCat(Link(a.pci().current_link()), " (", Link(a.pci().max_link()), ")"),
                    a.has_index() ? absl::StrCat(a.index()) : "-", Or(a.uuid()),
                    a.management_display() ? "management display, not a compute device" : ""});
  }
  out += Table(rows, "  ");

  const GpuDirect& gd = host.gpudirect();
  absl::StrAppend(&out, "\nGPUDirect RDMA: ", gd.available() ? "available" : "NOT available");
  for (const GpuDirectPath& p : gd.paths())
    absl::StrAppend(&out, "\n  ", p.mechanism(), ": ", p.detail());
  if (!gd.reason().empty()) absl::StrAppend(&out, "\n  ", gd.reason());
  absl::StrAppend(&out, "\n");
  absl::StrAppend(&out, "Default route: ",
                  host.default_route_netdevs().empty()
                      ? "none"
                      : absl::StrJoin(host.default_route_netdevs(), ","),
                  "\n");

  std::string problems;
  ForEachProblem(host, [&](const std::string& where, const FieldProblem& p) {
    absl::StrAppend(&problems, "  ", where, ": ", p.field(), " unknown: ", p.reason(), "\n");
  });
  if (!problems.empty()) absl::StrAppend(&out, "\nProblems (fields left unknown)\n", problems);
  return out;
}

std::string RenderNeighbors(const Host& host, int64_t now_unix_ms) {
  std::vector<std::vector<std::string>> rows = {
      {"NETDEV", "RDMA PORT", "SWITCH", "SWITCH PORT", "DESCRIPTION", "TTL", "SINCE"}};
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
      rows.push_back({n.name(), port, "-", "-", "-", "-", "-"});
      continue;
    }
    ++heard;
    const Neighbor& nb = n.neighbor();
    const int64_t age_s = std::max<int64_t>(0, (now_unix_ms - nb.first_seen_unix_ms()) / 1000);
    rows.push_back({n.name(), port, nb.switch_label(), nb.port_id(),
                    nb.port_description().empty() ? "-" : nb.port_description(),
                    absl::StrCat(nb.ttl_seconds(), "s"), absl::StrCat(age_s, "s ago")});
  }
  std::string out = Table(rows, "");
  if (heard == 0) {
    out += "No LLDP neighbour heard (only a running fabric-agent listens; see its health).\n";
  }
  return out;
}

std::string RenderTopology(const Host& host) {
  std::vector<const Accelerator*> gpus;
  for (const Accelerator& a : host.accelerators()) {
    if (!a.management_display()) gpus.push_back(&a);
  }
  std::vector<const RdmaDevice*> nics;
  for (const RdmaDevice& d : host.rdma_devices()) {
    if (d.has_pci()) nics.push_back(&d);
  }
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> header = {""};
  for (const RdmaDevice* d : nics) header.push_back(d->name());
  header.push_back("NUMA");
  header.push_back("PCI");
  rows.push_back(header);
  for (size_t i = 0; i < gpus.size(); ++i) {
    std::vector<std::string> row = {absl::StrCat("GPU", i)};
    std::string paired;
    for (const GpuPair& p : host.pairing().pairs()) {
      if (p.gpu() == gpus[i]->pci_address()) paired = p.rdma_device();
    }
    for (const RdmaDevice* d : nics) {
      std::string cell = "-";
      for (const TopologyPair& t : host.topology()) {
        if (t.accelerator() == gpus[i]->pci_address() && t.rdma_device() == d->name()) {
          cell = DistanceName(t.distance());
        }
      }
      if (d->name() == paired) absl::StrAppend(&cell, "*");
      row.push_back(cell);
    }
    row.push_back(Numa(gpus[i]->pci()));
    row.push_back(absl::StrCat(gpus[i]->pci_address(), " ", gpus[i]->vendor_name()));
    rows.push_back(row);
  }
  std::vector<std::string> numa_row = {"NUMA"};
  for (const RdmaDevice* d : nics) numa_row.push_back(Numa(d->pci()));
  rows.push_back(numa_row);
  std::string out = Table(rows, "");
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
  if (gpus.empty()) absl::StrAppend(&out, "\nNo GPU or accelerator found.\n");
  if (nics.empty()) absl::StrAppend(&out, "\nNo RDMA device with a PCI function found.\n");
  return out;
}

std::string RenderSelection(const Selection& selection) {
  std::string out;
  for (const GpuAssignment& a : selection.assignments()) {
    // The name as given, then the PCI address it resolved to.
    const std::string gpu = a.given().empty() || a.given() == a.gpu()
                                ? a.gpu()
                                : absl::StrCat(a.given(), " (", a.gpu(), ")");
    const std::string& addr = a.ipv4().empty() ? a.ipv6() : a.ipv4();
    absl::StrAppend(&out, "GPU ", gpu, " -> ", a.rdma_device(), ":", a.port(), "  ",
                    DistanceName(a.distance()), "  netdev ", Or(a.netdev()), "  GID ",
                    a.has_gid_index() ? absl::StrCat(a.gid_index()) : "-",
                    addr.empty() ? "" : absl::StrCat(" (", addr, ")"), "\n");
    for (const std::string& r : a.reasons()) absl::StrAppend(&out, "    why: ", r, "\n");
    for (const Rejection& r : a.rejected()) {
      absl::StrAppend(&out, "    not ", r.port(), ": ", r.reason(), "\n");
    }
  }
  for (const std::string& n : selection.notes()) absl::StrAppend(&out, "note: ", n, "\n");
  return out;
}

std::string RenderSelectionBrief(const Selection& selection) {
  std::vector<std::vector<std::string>> rows = {
      {"GPU", "PCI", "PORT", "NETDEV", "GID", "ADDRESS", "DIST", "NUMA"}};
  for (const GpuAssignment& a : selection.assignments()) {
    const std::string& addr = a.ipv4().empty() ? a.ipv6() : a.ipv4();
    rows.push_back(
        {Or(a.given(), a.gpu().c_str()), a.gpu(), absl::StrCat(a.rdma_device(), ":", a.port()),
         Or(a.netdev()), a.has_gid_index() ? absl::StrCat(a.gid_index()) : "-", Or(addr),
         DistanceName(a.distance()), a.has_numa_node() ? absl::StrCat(a.numa_node()) : "-"});
  }
  std::string out = Table(rows, "");
  for (const std::string& n : selection.notes()) absl::StrAppend(&out, "note: ", n, "\n");
  return out;
}

std::string RenderPlacements(const PlaceResponse& response) {
  std::vector<std::vector<std::string>> rows = {
      {"RANK", "GPUS", "WORST", "SUM", "NUMA", "SHARED", "PORTS"}};
  int rank = 0;
  for (const Placement& p : response.placements()) {
    std::vector<std::string> ports;
    for (const GpuAssignment& a : p.selection().assignments()) {
      ports.push_back(absl::StrCat(a.rdma_device(), ":", a.port()));
    }
    rows.push_back({absl::StrCat(++rank), absl::StrJoin(p.gpus(), ","),
                    DistanceName(p.worst_distance()), absl::StrCat(p.distance_sum()),
                    absl::StrCat(p.numa_nodes()), absl::StrCat(p.shared_ports()),
                    absl::StrJoin(ports, ",")});
  }
  std::string out =
      response.placements().empty() ? "no GPU set meets the request\n" : Table(rows, "");
  for (const std::string& n : response.notes()) absl::StrAppend(&out, "note: ", n, "\n");
  return out;
}

std::string RenderAnnouncements(const std::vector<v1::Announcement>& announcements) {
  std::string out;
  for (const v1::Announcement& a : announcements) {
    std::string who = a.container_id().empty() ? a.netns() : a.container_id();
    absl::StrAppend(&out, a.ifname(), " ", a.mac(), who.empty() ? "" : " (", who,
                    who.empty() ? "" : ")");
    if (a.state() != v1::Announcement::STATE_UNSPECIFIED) {
      absl::StrAppend(&out, " ", absl::AsciiStrToLower(v1::Announcement::State_Name(a.state())));
    }
    absl::StrAppend(&out, "\n  addresses: ", absl::StrJoin(a.addresses(), ", "),
                    "\n  sent: ", a.arp_sent(), " ARP, ", a.na_sent(), " NA",
                    a.send_errors() > 0 ? absl::StrCat(", ", a.send_errors(), " send errors") : "",
                    "\n");
    for (const v1::GatewayReachability& g : a.gateways()) {
      if (g.reachable()) {
        absl::StrAppendFormat(&out, "  gateway %s: reachable, %s, %.2f ms\n", g.gateway(), g.mac(),
                              g.rtt_ms());
      } else {
        absl::StrAppend(&out, "  gateway ", g.gateway(), ": no answer\n");
      }
    }
    for (const v1::AddressConflict& c : a.conflicts()) {
      absl::StrAppend(&out, "  CONFLICT ", c.address(), " is in use by ", c.owner_mac(),
                      ": not announced\n");
    }
    if (!a.last_error().empty()) absl::StrAppend(&out, "  note: ", a.last_error(), "\n");
  }
  return out;
}

std::string RenderProbeResults(const v1::ListProbeResultsResponse& list) {
  std::string out = absl::StrCat("responder: ", list.responder().empty() ? "off" : list.responder(),
                                 list.responder().empty()
                                     ? ""
                                     : absl::StrCat(" (", list.responder_served(), " served, ",
                                                    list.responder_failed(), " failed)"),
                                 "\nschedule: ");
  if (!list.schedule_enabled()) {
    absl::StrAppend(&out, "off (no peers configured)\n");
  } else {
    absl::StrAppend(&out, list.rounds(), " rounds; peers ",
                    list.peers().empty() ? "none" : absl::StrJoin(list.peers(), ", "));
    if (!list.peers_error().empty()) absl::StrAppend(&out, " (", list.peers_error(), ")");
    if (list.has_next_round()) {
      absl::StrAppend(
          &out, "; next round ",
          absl::FormatTime("%H:%M:%S", absl::FromUnixSeconds(list.next_round().seconds()),
                           absl::UTCTimeZone()),
          " UTC");
    }
    absl::StrAppend(&out, "\n");
  }
  if (list.results().empty()) return absl::StrCat(out, "no results\n");
  absl::StrAppendFormat(&out, "%-5s %-8s %-9s %-22s %-9s %-9s %-9s %14s %7s  %s\n", "ID", "TIME",
                        "SOURCE", "PEER", "DEVICE", "TEST", "TRANSPORT", "RESULT", "OF RATE",
                        "STATUS");
  for (const v1::ProbeResult& r : list.results()) {
    std::string figure = "-";
    if (r.has_bw_avg_gbps()) figure = absl::StrFormat("%.2f Gb/s", r.bw_avg_gbps());
    if (r.has_t_typical_us()) figure = absl::StrFormat("%.2f us", r.t_typical_us());
    const std::string share =
        r.has_fraction_of_rate() ? absl::StrFormat("%.0f%%", 100 * r.fraction_of_rate()) : "-";
    const std::string status = !r.ok()        ? absl::StrCat(r.error_code(), ": ", r.error())
                               : r.degraded() ? std::string("DEGRADED")
                                              : std::string("OK");
    absl::StrAppendFormat(
        &out, "%-5d %-8s %-9s %-22s %-9s %-9s %-9s %14s %7s  %s\n", r.id(),
        absl::FormatTime("%H:%M:%S", absl::FromUnixSeconds(r.started().seconds()),
                         absl::UTCTimeZone()),
        r.source() == v1::ProbeResult::SOURCE_ON_DEMAND ? "on-demand" : "schedule", r.peer(),
        r.device().empty() ? "-" : absl::StrCat(r.device(), ":", r.port()), r.test(), r.transport(),
        figure, share, status);
  }
  return out;
}

}  // namespace fabric
