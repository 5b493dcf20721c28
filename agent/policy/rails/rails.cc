#include "agent/policy/rails/rails.h"

#include <fnmatch.h>

#include <map>

#include "absl/strings/str_cat.h"
#include "agent/inventory/query/host_query.h"
#include "agent/policy/select/port_facts.h"

namespace fabric {

bool MatchesRail(const v1::Rail& rail, const v1::Neighbor& n) {
  const std::string& name = n.system_name().empty() ? n.switch_label() : n.system_name();
  return !name.empty() && ::fnmatch(rail.switch_pattern().c_str(), name.c_str(), 0) == 0;
}

std::vector<PortRail> PortRails(const v1::Host& host, const v1::SelectionPolicy& policy) {
  std::map<std::string, const v1::Netdev*> netdevs;
  for (const v1::Netdev& n : host.netdevs()) netdevs[n.name()] = &n;
  std::vector<PortRail> out;
  for (const BackendPort& bp : BackendPorts(host, policy)) {
    PortRail r{bp.device, bp.port, nullptr, nullptr, nullptr, nullptr};
    if (auto it = netdevs.find(bp.port->netdev()); it != netdevs.end()) {
      r.netdev = it->second;
      if (r.netdev->has_neighbor()) r.neighbor = &r.netdev->neighbor();
    }
    for (const v1::Rail& rail : policy.rails()) {
      if (r.expected == nullptr && RailNamesPort(rail, *bp.device, *bp.port)) r.expected = &rail;
      if (r.neighbor != nullptr && r.heard == nullptr && MatchesRail(rail, *r.neighbor)) {
        r.heard = &rail;
      }
    }
    out.push_back(r);
  }
  return out;
}

std::vector<std::pair<int, std::string>> RailChanges(const v1::Host& host,
                                                     const v1::SelectionPolicy& policy) {
  std::map<std::string, std::string> heard;  // Netdev -> rail.
  if (!policy.rails().empty()) {
    for (const PortRail& r : PortRails(host, policy)) {
      if (r.netdev != nullptr && r.heard != nullptr) heard[r.netdev->name()] = r.heard->name();
    }
  }
  std::vector<std::pair<int, std::string>> out;
  for (int i = 0; i < host.netdevs_size(); ++i) {
    const v1::Netdev& n = host.netdevs(i);
    if (!n.has_neighbor()) continue;
    auto it = heard.find(n.name());
    const std::string want = it == heard.end() ? "" : it->second;
    if (n.neighbor().rail() != want) out.emplace_back(i, want);
  }
  return out;
}

}  // namespace fabric
