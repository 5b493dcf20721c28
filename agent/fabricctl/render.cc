#include "agent/fabricctl/render.h"

#include <algorithm>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "agent/fabricctl/render_internal.h"
#include "agent/fabricctl/table.h"
#include "agent/inventory/topology/topology.h"

namespace fabric {
namespace {

using namespace ::fabric::v1;  // NOLINT
using render_internal::Or;

}  // namespace

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
    if (!a.nic_profile().empty() || !a.rail().empty()) {
      absl::StrAppend(&out, "    nic: profile ", Or(a.nic_profile()), ", rail ", Or(a.rail()),
                      "\n");
    }
    if (!a.gpudirect().empty()) {
      absl::StrAppend(&out, "    gpudirect: ", a.gpudirect(), " (", a.gpudirect_reason(), ")\n");
    }
    for (const Rejection& r : a.rejected()) {
      absl::StrAppend(&out, "    not ", r.port(), ": ", r.reason(), "\n");
    }
  }
  for (const std::string& n : selection.notes()) absl::StrAppend(&out, "note: ", n, "\n");
  return out;
}

std::string RenderSelectionBrief(const Selection& selection, const TableStyle& style) {
  Rows rows = {{"GPU", "PCI", "PORT", "NETDEV", "GID", "ADDRESS", "DIST", "NUMA"}};
  for (const GpuAssignment& a : selection.assignments()) {
    const std::string& addr = a.ipv4().empty() ? a.ipv6() : a.ipv4();
    rows.push_back(
        {Or(a.given(), a.gpu().c_str()), a.gpu(), absl::StrCat(a.rdma_device(), ":", a.port()),
         Or(a.netdev()), a.has_gid_index() ? absl::StrCat(a.gid_index()) : "-", Or(addr),
         DistanceName(a.distance()), a.has_numa_node() ? absl::StrCat(a.numa_node()) : "-"});
  }
  std::string out = Table(rows, style.headers);
  for (const std::string& n : selection.notes()) absl::StrAppend(&out, "note: ", n, "\n");
  return out;
}

std::string RenderPlacements(const PlaceResponse& response, const TableStyle& style) {
  Rows rows = {{"RANK", "GPUS", "WORST", "SUM", "NUMA", "SHARED", "PORTS"}};
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
      response.placements().empty() ? "no GPU set meets the request\n" : Table(rows, style.headers);
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

std::string RenderProbeResults(const v1::ListProbeResultsResponse& list, const TableStyle& style) {
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
  Rows rows = {{"ID", "TIME", "SOURCE", "PEER", "DEVICE", "TEST", "TRANSPORT", "MEMORY", "RESULT",
                "OF RATE", "STATUS"}};
  for (const v1::ProbeResult& r : list.results()) {
    std::string figure = "-";
    if (r.has_bw_avg_gbps()) figure = absl::StrFormat("%.2f Gb/s", r.bw_avg_gbps());
    if (r.has_t_typical_us()) figure = absl::StrFormat("%.2f us", r.t_typical_us());
    const std::string share =
        r.has_fraction_of_rate() ? absl::StrFormat("%.0f%%", 100 * r.fraction_of_rate()) : "-";
    const std::string status = !r.ok()        ? absl::StrCat(r.error_code(), ": ", r.error())
                               : r.degraded() ? std::string("DEGRADED")
                                              : std::string("OK");
    rows.push_back({absl::StrCat(r.id()),
                    absl::FormatTime("%H:%M:%S", absl::FromUnixSeconds(r.started().seconds()),
                                     absl::UTCTimeZone()),
                    r.source() == v1::ProbeResult::SOURCE_ON_DEMAND ? "on-demand" : "schedule",
                    Clip(r.peer(), 22, style),
                    r.device().empty() ? "-" : absl::StrCat(r.device(), ":", r.port()), r.test(),
                    r.transport(), r.memory().empty() ? "-" : Clip(r.memory(), 24, style), figure,
                    share, Clip(status, 24, style)});
  }
  return out + Table(rows, style.headers);
}

}  // namespace fabric
