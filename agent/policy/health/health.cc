#include "agent/policy/health/health.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "agent/common/excerpt.h"
#include "agent/common/strings.h"
#include "agent/inventory/discovery/discovery.h"
#include "agent/inventory/discovery/parse.h"
#include "agent/inventory/query/host_query.h"
#include "agent/policy/health/health_internal.h"
#include "agent/policy/rails/rails.h"

namespace fabric {
namespace health_internal {

void Add(v1::Health* h, v1::Severity s, const char* check, const char* cause,
         v1::RepairAction repair, const std::string& subject, const std::string& message,
         std::string evidence) {
  v1::Finding f;
  f.set_severity(s);
  f.set_check(check);
  f.set_code(absl::StrCat(check, ".", cause));
  f.set_repair(repair);
  f.set_subject(subject);
  f.set_message(message);
  f.set_evidence(std::move(evidence));
  AddFinding(h, std::move(f));
}

}  // namespace health_internal
namespace {

using namespace ::fabric::v1;  // NOLINT: the model's messages and enum values
using health_internal::Add;

void CheckLink(Health* h, const std::string& subject, const PciFunction& f, bool gpu) {
  const PciLink& cur = f.current_link();
  const PciLink& max = f.max_link();
  if (cur.has_width() && max.has_width() && cur.width() < max.width()) {
    Add(h, SEVERITY_WARNING, "pcie_link", "width", REPAIR_ACTION_HARDWARE_INSPECTION, subject,
        absl::StrFormat("PCIe link x%d, capable of x%d", cur.width(), max.width()),
        absl::StrFormat("current_link_width %d, max_link_width %d", cur.width(), max.width()));
  }
  if (!gpu && cur.has_speed_gts() && max.has_speed_gts() && cur.speed_gts() < max.speed_gts()) {
    Add(h, SEVERITY_WARNING, "pcie_link", "speed", REPAIR_ACTION_HARDWARE_INSPECTION, subject,
        absl::StrFormat("PCIe link at %g GT/s, capable of %g GT/s", cur.speed_gts(),
                        max.speed_gts()),
        absl::StrFormat("current_link_speed %g GT/s, max_link_speed %g GT/s", cur.speed_gts(),
                        max.speed_gts()));
  }
}

// Several RDMA netdevs in one IPv4 subnet with the kernel's default ARP settings answer ARP for
// each other's addresses (ARP flux): a peer may send RoCE traffic for one port's address to
// another port's MAC. The agent never changes host sysctls; the finding gives the fix.
void CheckArpFlux(Health* h, const Host& host) {
  std::map<std::string, std::vector<const Netdev*>> by_subnet;
  for (const Netdev& n : host.netdevs()) {
    if (n.rdma_device().empty()) continue;
    for (const std::string& subnet : n.ipv4_subnets()) by_subnet[subnet].push_back(&n);
  }
  for (const auto& [subnet, netdevs] : by_subnet) {
    if (netdevs.size() < 2) continue;
    auto value = [](bool known, int32_t v) { return known ? absl::StrCat(v) : "unknown"; };
    std::vector<std::string> names, bad, fixes;
    for (const Netdev* n : netdevs) {
      names.push_back(n->name());
      // Unread values are not facts: only settings read as too loose count.
      const bool ignore = n->has_arp_ignore() && n->arp_ignore() < 1;
      const bool announce = n->has_arp_announce() && n->arp_announce() < 2;
      if (!ignore && !announce) continue;
      bad.push_back(
          absl::StrCat(n->name(), " (arp_ignore=", value(n->has_arp_ignore(), n->arp_ignore()),
                       ", arp_announce=", value(n->has_arp_announce(), n->arp_announce()), ")"));
      fixes.push_back(absl::StrFormat(
          "net.ipv4.conf.%s.arp_ignore=1 net.ipv4.conf.%s.arp_announce=2", n->name(), n->name()));
    }
    if (bad.empty()) continue;
    // Every one of them loose: conf/all is the one-line fix.
    if (bad.size() == netdevs.size()) {
      fixes = {"net.ipv4.conf.all.arp_ignore=1 net.ipv4.conf.all.arp_announce=2"};
    }
    Add(h, SEVERITY_WARNING, "arp_flux", "loose", REPAIR_ACTION_NONE, subnet,
        absl::StrCat("RDMA netdevs ", absl::StrJoin(names, ", "), " share ", subnet, "; ",
                     absl::StrJoin(bad, ", "),
                     " answer ARP for each other's addresses, so peers may send RoCE traffic to "
                     "the wrong port (ARP flux). Fix: sysctl -w ",
                     absl::StrJoin(fixes, " "),
                     " (persist in /etc/sysctl.d/), and route each address out of its own "
                     "interface (a rule per source address)"));
  }
}

}  // namespace

// Two back-end ports that hear the same switch port: one cable cannot end in two NICs, so one
// of the neighbours is stale or spoofed (or a hub/bridge is in between): placement by these
// labels would be wrong.
void CheckCabling(Health* h, const Host& host, const SelectionPolicy& policy) {
  const std::vector<PortRail> ports = PortRails(host, policy);
  std::map<std::string, std::vector<std::string>> by_switch_port;  // chassis + port -> netdevs
  std::map<std::string, std::string> shown;
  for (const PortRail& r : ports) {
    if (r.neighbor == nullptr) continue;
    const Neighbor& n = *r.neighbor;
    const std::string key =
        absl::StrCat(n.chassis_id_subtype(), "/", n.chassis_id(), "/", n.port_id());
    std::vector<std::string>& names = by_switch_port[key];
    if (std::find(names.begin(), names.end(), r.netdev->name()) == names.end()) {
      names.push_back(r.netdev->name());
    }
    shown[key] = absl::StrCat(n.switch_label(), " port ", n.port_id());
  }
  // Rails configured: each port on the rail its neighbour's name says, and on its own.
  if (!policy.rails().empty()) {
    for (const PortRail& r : ports) {
      if (r.neighbor == nullptr) continue;
      const std::string heard = absl::StrCat(
          r.neighbor->switch_label(),
          r.heard != nullptr ? absl::StrCat(" (rail ", r.heard->name(), ")") : " (no rail)");
      if (r.expected != nullptr && r.heard != r.expected) {
        Add(h, SEVERITY_WARNING, "cabling", "wrong_rail", REPAIR_ACTION_HARDWARE_INSPECTION,
            r.netdev->name(),
            absl::StrCat(r.netdev->name(), " belongs on rail ", r.expected->name(), " (",
                         r.expected->switch_pattern(), ") but is cabled to ", heard));
      } else if (r.expected == nullptr && r.heard == nullptr) {
        Add(h, SEVERITY_WARNING, "cabling", "no_rail", REPAIR_ACTION_HARDWARE_INSPECTION,
            r.netdev->name(),
            absl::StrCat(r.netdev->name(), " is cabled to ", r.neighbor->switch_label(),
                         ", which matches no rail's switchPattern"));
      }
    }
  }
  for (const auto& [key, names] : by_switch_port) {
    if (names.size() < 2) continue;
    Add(h, SEVERITY_WARNING, "cabling", "shared_switch_port", REPAIR_ACTION_CHECK_SWITCH_PORT,
        names.front(),
        absl::StrCat(absl::StrJoin(names, " and "), " both hear switch ", shown[key],
                     ": one cable cannot end in two ports (stale or spoofed LLDP, or a bridge "
                     "between); check the cabling"));
  }
}

bool NamesDevice(const Finding& f, const RdmaDevice& dev) {
  const std::string& s = f.subject();
  if (s.empty()) return false;
  if (s == dev.name() || (absl::StartsWith(s, dev.name()) && s.size() > dev.name().size() &&
                          s[dev.name().size()] == ':')) {
    return true;
  }
  if (dev.has_pci() && !dev.pci().address().empty() && s == dev.pci().address()) return true;
  return std::any_of(dev.ports().begin(), dev.ports().end(),
                     [&](const v1::Port& p) { return !p.netdev().empty() && s == p.netdev(); });
}

int SeverityRank(Severity s) {
  switch (s) {
    case SEVERITY_CRITICAL:
      return 3;
    case SEVERITY_WARNING:
      return 2;
    case SEVERITY_UNKNOWN:
      return 1;
    default:
      return 0;
  }
}

void AddFinding(Health* h, Finding f) {
  if (h->verdict() == SEVERITY_UNSPECIFIED) h->set_verdict(SEVERITY_OK);
  if (f.code().empty()) f.set_code(f.check());
  if (f.repair() == REPAIR_ACTION_UNSPECIFIED) f.set_repair(REPAIR_ACTION_NONE);
  // A rule on trial reports without deciding.
  if (!f.dry_run() && SeverityRank(f.severity()) > SeverityRank(h->verdict())) {
    h->set_verdict(f.severity());
  }
  *h->add_findings() = std::move(f);
}

const char* SeverityName(Severity s) {
  switch (s) {
    case SEVERITY_OK:
      return "OK";
    case SEVERITY_WARNING:
      return "WARNING";
    case SEVERITY_CRITICAL:
      return "CRITICAL";
    default:
      return "UNKNOWN";
  }
}

std::string_view RepairName(RepairAction r) {
  if (r == REPAIR_ACTION_UNSPECIFIED || !RepairAction_IsValid(r)) return "NONE";
  std::string_view name = RepairAction_Name(r);
  name.remove_prefix(std::string_view("REPAIR_ACTION_").size());
  return name;
}

std::string FindingLine(const Finding& f) {
  // A finding carries outside bytes (a kernel log line, a file's value, a peer's name): escaped,
  // so no escape sequence or carriage return reaches the terminal raw.
  std::string line = absl::StrCat(
      SeverityName(f.severity()), " ", TerminalText(f.code().empty() ? f.check() : f.code()),
      f.subject().empty() ? "" : " ", TerminalText(f.subject()), ": ", TerminalText(f.message()));
  if (!f.evidence().empty()) absl::StrAppend(&line, " [", TerminalText(f.evidence()), "]");
  if (f.occurrences() > 1) absl::StrAppend(&line, " (seen ", f.occurrences(), " times)");
  if (f.cleared()) {
    absl::StrAppend(
        &line, " (cleared, kept until ",
        absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixSeconds(f.sticky_until().seconds()),
                         absl::UTCTimeZone()),
        ")");
  }
  if (f.dry_run()) absl::StrAppend(&line, " (dry run)");
  if (f.repair() != REPAIR_ACTION_UNSPECIFIED && f.repair() != REPAIR_ACTION_NONE) {
    absl::StrAppend(&line, " -> ", Av(RepairName(f.repair())));
  }
  return line;
}

int HealthExitCode(Severity verdict) {
  switch (verdict) {
    case SEVERITY_OK:
      return 0;
    case SEVERITY_WARNING:
      return 1;
    case SEVERITY_CRITICAL:
      return 2;
    default:
      return 3;
  }
}

Health EvaluateHealth(const Host& host, const SelectionPolicy& policy) {
  return EvaluateHealth(host, policy, HealthConfig());
}

Health EvaluateHealth(const Host& host, const SelectionPolicy& policy, const HealthConfig& config) {
  Health h;
  h.set_verdict(SEVERITY_OK);
  if (host.rdma_devices().empty()) {
    Add(&h, SEVERITY_CRITICAL, "no_rdma_device", "none", REPAIR_ACTION_HARDWARE_INSPECTION, "",
        absl::StrCat("no RDMA device under ", host.sysfs_root(), "/class/infiniband"));
  }
  // sysfs does not say what rate a port supports (that takes a MAD), so a port is compared with
  // its peers: the most common active rate among ports of the same NIC model and link layer
  // (ties: the higher). One port trained below the rest of its kind is degraded.
  auto model_of = [](const RdmaDevice& d, const Port& p) {
    return absl::StrCat(d.pci().vendor_id(), ":", d.pci().device_id(), "/", p.link_layer());
  };
  std::map<std::string, std::map<double, int>> rates;
  for (const RdmaDevice& d : host.rdma_devices()) {
    for (const Port& p : d.ports()) {
      if (p.state() == PORT_STATE_ACTIVE && p.has_rate_gbps())
        ++rates[model_of(d, p)][p.rate_gbps()];
    }
  }
  std::map<std::string, double> expected;
  for (const auto& [model, histogram] : rates) {
    int best = 0;
    for (const auto& [rate, count] : histogram) {
      if (count >= best) {
        best = count;
        expected[model] = rate;
      }
    }
  }
  for (const RdmaDevice& d : host.rdma_devices()) {
    for (const Port& p : d.ports()) {
      if (!DeniedBy(policy, d, p).empty()) continue;
      const std::string subject = absl::StrCat(d.name(), ":", p.number());
      if (p.state() == PORT_STATE_UNSPECIFIED) {
        Add(&h, SEVERITY_UNKNOWN, "port_state", "unreadable", REPAIR_ACTION_NONE, subject,
            "port state could not be read");
        continue;
      }
      if (p.state() != PORT_STATE_ACTIVE) {
        Add(&h, SEVERITY_CRITICAL, "port_state", "down", REPAIR_ACTION_CHECK_SWITCH_PORT, subject,
            absl::StrCat("port ", Av(PortStateWord(p.state())),
                         p.netdev().empty() ? "" : absl::StrCat(" (", p.netdev(), ")")),
            absl::StrCat("state ", Av(PortStateWord(p.state())), ", phys_state ",
                         Av(PhysStateWord(p.phys_state()))));
        continue;
      }
      const double usual = expected[model_of(d, p)];
      if (p.has_rate_gbps() && p.rate_gbps() < usual) {
        Add(&h, SEVERITY_WARNING, "port_rate", "below_peers", REPAIR_ACTION_RESEAT_CABLE, subject,
            absl::StrFormat("rate %g Gb/s, below the %g Gb/s of its peers (same NIC model and "
                            "link layer)",
                            p.rate_gbps(), usual));
      }
      if (p.link_layer() == LINK_LAYER_ETHERNET && d.pci().sriov().role() != SRIOV_ROLE_VF) {
        // A routable GID (IPv4-mapped, or global IPv6 on an IPv6-only fabric) whose type or
        // netdev is not visible (no gid_attrs in a container, an unreadable entry) may be the
        // right one: then we cannot tell.
        bool v2 = false, unsure = false;
        for (const Gid& g : p.gids()) {
          if (g.ipv4().empty() && g.ipv6().empty()) continue;
          v2 |= g.type() == GID_TYPE_ROCE_V2 && g.netdev() == p.netdev();
          unsure |= g.type() == GID_TYPE_UNSPECIFIED || g.netdev().empty();
        }
        if (!v2 && unsure) {
          Add(&h, SEVERITY_UNKNOWN, "roce_gid", "unknown", REPAIR_ACTION_NONE, subject,
              "GID types or netdevs not visible (gid_attrs): cannot tell whether a routable RoCE "
              "v2 GID exists");
        } else if (!v2) {
          Add(&h, SEVERITY_WARNING, "roce_gid", "missing", REPAIR_ACTION_NONE, subject,
              absl::StrCat("no routable RoCE v2 GID (IPv4-mapped or global IPv6) on ",
                           p.netdev().empty() ? "its netdev" : p.netdev(),
                           ": RoCE traffic cannot route between nodes"));
        }
      }
    }
    if (d.has_pci()) CheckLink(&h, d.name(), d.pci(), /*gpu=*/false);
  }
  bool gpus = false;
  for (const Accelerator& a : host.accelerators()) {
    if (a.management_display()) continue;
    gpus = true;
    CheckLink(&h, a.pci_address(), a.pci(), /*gpu=*/true);
  }
  if (gpus && !host.rdma_devices().empty() && !host.gpudirect().available()) {
    Add(&h, SEVERITY_WARNING, "gpudirect", "missing", REPAIR_ACTION_NONE, "",
        absl::StrCat("no GPUDirect RDMA: ", host.gpudirect().reason(),
                     "; GPU traffic goes through host memory"));
  }
  CheckArpFlux(&h, host);
  CheckCabling(&h, host, policy);
  health_internal::CheckFirmware(&h, host);
  health_internal::CheckUverbs(&h, host);
  health_internal::CheckUmad(&h, host);
  health_internal::CheckPciTopology(&h, host);
  health_internal::CheckHostClass(&h, host, policy, config);
  int n = 0;
  ForEachProblem(host, [&](const std::string&, const FieldProblem&) { ++n; });
  if (n > 0) {
    Add(&h, SEVERITY_WARNING, "discovery", "fields", REPAIR_ACTION_NONE, "",
        absl::StrCat(n, " field(s) could not be read (fabricctl inventory lists them)"));
  }
  return h;
}

}  // namespace fabric
