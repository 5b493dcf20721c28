// What a kernel event names (ChangeScope) and what a refresh must read for it (PlanRefresh);
// refresh.cc reads it.
#include <string_view>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/inventory/discovery/discovery_internal.h"
#include "agent/inventory/discovery/parse.h"
#include "agent/inventory/discovery/refresh.h"

namespace fabric {

using namespace ::fabric::v1;  // NOLINT: the model's messages and enum values
namespace di = discovery_internal;

// ---- ChangeScope ----

void ChangeScope::Full(std::string why) {
  if (full_) return;
  full_ = true;
  full_why_ = std::move(why);
  // Names are of no use once full: drop them so that a storm holds no memory.
  netdevs_.clear();
  ifindexes_.clear();
  route_netdevs_.clear();
  rdma_devices_.clear();
}

bool ChangeScope::Room() {
  if (full_) return false;
  if (netdevs_.size() + ifindexes_.size() + route_netdevs_.size() + rdma_devices_.size() <
      kMaxNames) {
    return true;
  }
  Full(absl::StrCat("more than ", kMaxNames, " netdevs, routes and devices changed"));
  return false;
}

void ChangeScope::Netdev(std::string name) {
  if (!name.empty() && Room()) netdevs_.insert(std::move(name));
}
void ChangeScope::Ifindex(int32_t ifindex) {
  if (ifindex > 0 && Room()) ifindexes_.insert(ifindex);
}
void ChangeScope::RouteVia(std::string netdev) {
  if (!netdev.empty() && Room()) route_netdevs_.insert(std::move(netdev));
}
void ChangeScope::DefaultRoute() { default_route_ = true; }
void ChangeScope::RdmaDevice(std::string name) {
  if (!name.empty() && Room()) rdma_devices_.insert(std::move(name));
}
void ChangeScope::Uverbs() { uverbs_ = true; }

void ChangeScope::Merge(const ChangeScope& o) {
  if (o.full_) Full(o.full_why_);
  for (const std::string& n : o.netdevs_) Netdev(n);
  for (int32_t i : o.ifindexes_) Ifindex(i);
  for (const std::string& n : o.route_netdevs_) RouteVia(n);
  for (const std::string& n : o.rdma_devices_) RdmaDevice(n);
  default_route_ = default_route_ || o.default_route_;
  uverbs_ = uverbs_ || o.uverbs_;
}

bool ChangeScope::empty() const {
  return !full_ && netdevs_.empty() && ifindexes_.empty() && route_netdevs_.empty() &&
         !default_route_ && rdma_devices_.empty() && !uverbs_;
}

// ---- Planning ----

NetdevFacts LookUpNetdev(const HostFs& sys, const std::string& name) {
  NetdevFacts f;
  auto real = sys.RealPath(absl::StrCat("class/net/", name));
  if (!real.ok()) return f;
  f.exists = true;
  // .../<BDF>/net/<name>: the PCI function it belongs to (as ReadNetdevs finds it).
  const std::string parent = di::Dirname(di::Dirname(*real));
  if (auto a = ParsePciAddress(di::Basename(parent)); a.ok()) {
    f.pci_address = *a;
    f.pci_has_rdma = sys.Exists(JoinPath(parent, "infiniband"));
  }
  if (auto entries = sys.ListDir(*real); entries.ok()) {
    for (const std::string& e : *entries) {
      if (absl::StartsWith(e, "lower_")) f.lowers.push_back(e.substr(6));
    }
  }
  return f;
}

RefreshPlan PlanRefresh(const Host& cur, const ChangeScope& scope, const NetdevLookup& lookup) {
  RefreshPlan plan;
  if (scope.full()) {
    plan.full = true;
    plan.why = scope.full_why();
    return plan;
  }
  // An event names a few netdevs: scanning the host's for each costs less than indexing them all
  // (the devices are scanned per name below anyway).
  auto netdev_named = [&](std::string_view n) -> const v1::Netdev* {
    for (const v1::Netdev& nd : cur.netdevs()) {
      if (nd.name() == n) return &nd;
    }
    return nullptr;
  };
  // The devices whose port or software device names netdev `n` (the netdev itself may be out of
  // the inventory: a broken link).
  auto devices_naming = [&](std::string_view n) {
    bool any = false;
    for (const v1::RdmaDevice& d : cur.rdma_devices()) {
      bool mine = d.parent_netdev() == n;
      for (const Port& p : d.ports()) mine = mine || p.netdev() == n;
      if (mine) plan.devices.insert(d.name());
      any = any || mine;
    }
    return any;
  };
  auto relate = [&](const std::string& n) {
    bool known = false;
    if (const v1::Netdev* nd = netdev_named(n)) {
      known = true;
      if (!nd->rdma_device().empty()) {
        plan.devices.insert(nd->rdma_device());
      } else {
        plan.netdevs.insert(n);  // A default-route netdev: only itself.
      }
    }
    known = devices_naming(n) || known;
    if (known) return;
    // Not in the inventory: one look at sysfs says whether it can be (a new port netdev, an
    // RDMA device back on its function, an upper device whose GIDs the kernel adds).
    const NetdevFacts f = lookup(n);
    if (!f.exists) return;
    if (!f.pci_address.empty()) {
      bool on_device = false;
      for (const v1::RdmaDevice& d : cur.rdma_devices()) {
        if (d.pci().address() == f.pci_address) {
          plan.devices.insert(d.name());
          on_device = true;
        }
      }
      if (!on_device && f.pci_has_rdma) plan.device_list = true;
    }
    for (const std::string& lower : f.lowers) {
      const v1::Netdev* nd = netdev_named(lower);
      if (nd != nullptr && !nd->rdma_device().empty()) plan.devices.insert(nd->rdma_device());
      devices_naming(lower);
    }
  };
  for (const std::string& n : scope.netdevs()) relate(n);
  for (int32_t i : scope.ifindexes()) {
    for (const v1::Netdev& nd : cur.netdevs()) {
      if (nd.has_ifindex() && nd.ifindex() == i) {
        relate(nd.name());
        break;
      }
    }
  }
  plan.routes = scope.default_route();
  for (const std::string& n : scope.route_netdevs()) {
    plan.routes = plan.routes || netdev_named(n) != nullptr;
  }
  for (const std::string& d : scope.rdma_devices()) {
    plan.device_list = true;
    for (const v1::RdmaDevice& have : cur.rdma_devices()) {
      if (have.name() == d) plan.devices.insert(d);
    }
  }
  if (scope.uverbs()) plan.uverbs = plan.device_list = true;
  // Past a quarter of the devices, one full read is cheaper than splicing.
  const size_t cap = std::max<size_t>(16, static_cast<size_t>(cur.rdma_devices_size()) / 4);
  if (plan.devices.size() > cap) {
    plan.full = true;
    plan.why = absl::StrCat(plan.devices.size(), " RDMA devices changed");
    return plan;
  }
  std::vector<std::string> parts;
  if (!plan.devices.empty()) parts.push_back(absl::StrJoin(plan.devices, ","));
  if (plan.device_list) parts.push_back("device list");
  if (plan.uverbs) parts.push_back("uverbs");
  if (!plan.netdevs.empty()) parts.push_back(absl::StrJoin(plan.netdevs, ","));
  if (plan.routes) parts.push_back("routes");
  plan.why = absl::StrJoin(parts, " ");
  return plan;
}

}  // namespace fabric
