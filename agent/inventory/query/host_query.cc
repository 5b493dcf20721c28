#include "agent/inventory/query/host_query.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "agent/common/natural_order.h"

namespace fabric {

using namespace ::fabric::v1;  // NOLINT: enum values of the model

std::string DeniedBy(const SelectionPolicy& policy, const RdmaDevice& dev, const Port& port) {
  const std::set<std::string> deny(policy.deny().begin(), policy.deny().end());
  if (deny.count(dev.name())) return absl::StrCat("denied by config (", dev.name(), ")");
  const std::string name = absl::StrCat(dev.name(), ":", port.number());
  if (deny.count(name)) return absl::StrCat("denied by config (", name, ")");
  for (const std::string& n : {port.netdev(), dev.parent_netdev()}) {
    if (!n.empty() && deny.count(n)) return absl::StrCat("denied by config (netdev ", n, ")");
  }
  return "";
}

std::vector<std::string> PhysicalNetdevs(const Host& host) {
  std::set<std::string> vfs;  // PCI addresses of virtual functions.
  for (const RdmaDevice& d : host.rdma_devices()) {
    if (!d.pci().sriov().pf_pci_address().empty()) vfs.insert(d.pci().address());
  }
  std::vector<std::string> out;
  for (const Netdev& nd : host.netdevs()) {
    if (nd.pci_address().empty() || nd.upper() || vfs.count(nd.pci_address())) continue;
    out.push_back(nd.name());
  }
  return out;
}

std::vector<std::string> ComputeGpus(const Host& host) {
  std::vector<std::string> out;
  for (const Accelerator& a : host.accelerators()) {
    if (!a.management_display()) out.push_back(a.pci_address());
  }
  return out;
}

std::vector<std::string> CollectiveGpus(const Host& host) {
  std::vector<std::string> out;
  for (const Accelerator& a : host.accelerators()) {
    if (a.management_display()) continue;
    if (a.vendor() == ACCELERATOR_VENDOR_NVIDIA || a.vendor() == ACCELERATOR_VENDOR_AMD) {
      out.push_back(a.pci_address());
    }
  }
  return out;
}

std::vector<BackendPort> BackendPorts(const Host& host, const SelectionPolicy& policy) {
  std::set<std::string> default_route(host.default_route_netdevs().begin(),
                                      host.default_route_netdevs().end());
  for (const Netdev& n : host.netdevs()) {
    if (n.default_route()) default_route.insert(n.name());
  }
  std::vector<BackendPort> out;
  for (const RdmaDevice& dev : host.rdma_devices()) {
    if (dev.has_pci() && dev.pci().sriov().role() == SRIOV_ROLE_VF) continue;
    for (const Port& port : dev.ports()) {
      if (port.state() != PORT_STATE_ACTIVE || !DeniedBy(policy, dev, port).empty()) continue;
      bool front_end = false;
      for (const std::string* n : {&port.netdev(), &dev.parent_netdev()}) {
        front_end = front_end || (!n->empty() && default_route.count(*n) > 0);
      }
      if (!front_end) out.push_back({&dev, &port});
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const BackendPort& a, const BackendPort& b) {
    if (a.device->name() != b.device->name())
      return NaturalLess(a.device->name(), b.device->name());
    return a.port->number() < b.port->number();
  });
  return out;
}

}  // namespace fabric
