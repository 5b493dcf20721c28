// Targeted refresh: re-reads only the part of the inventory that a batch of kernel events can
// have changed, and splices it into the served host. The full Discover() stays the truth: the
// agent compares the two after every full rescan.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/hostfs/host_fs.h"
#include "fabric/v1/host.pb.h"

namespace fabric {

// What kernel events named since the last refresh. Bounded: past kMaxNames names it only says
// "full", so a storm costs one full rescan and constant memory.
class ChangeScope {
 public:
  static constexpr size_t kMaxNames = 256;

  void Full(std::string why);
  void Netdev(std::string name);      // A link or address event, or a net uevent.
  void Ifindex(int32_t ifindex);      // An address event whose netdev has no name any more.
  void RouteVia(std::string netdev);  // A main-table route through this netdev.
  void DefaultRoute();                // A default route, or one without a single netdev.
  void RdmaDevice(std::string name);  // An infiniband uevent (device added, removed, changed).
  void Uverbs();                      // An infiniband_verbs or infiniband_mad uevent.
  void Merge(const ChangeScope& other);

  bool full() const { return full_; }
  const std::string& full_why() const { return full_why_; }
  bool empty() const;
  const std::set<std::string>& netdevs() const { return netdevs_; }
  const std::set<int32_t>& ifindexes() const { return ifindexes_; }
  const std::set<std::string>& route_netdevs() const { return route_netdevs_; }
  bool default_route() const { return default_route_; }
  const std::set<std::string>& rdma_devices() const { return rdma_devices_; }
  bool uverbs() const { return uverbs_; }

 private:
  bool Room();  // False (and full) once the names reach kMaxNames.

  bool full_ = false;
  std::string full_why_;
  std::set<std::string> netdevs_;
  std::set<int32_t> ifindexes_;
  std::set<std::string> route_netdevs_;
  bool default_route_ = false;
  std::set<std::string> rdma_devices_;
  bool uverbs_ = false;
};

// What sysfs says of a netdev the inventory does not hold (the planner's one cheap read).
struct NetdevFacts {
  bool exists = false;              // class/net/<name> is there.
  std::string pci_address;          // The PCI function it sits on, if any.
  bool pci_has_rdma = false;        // That function has an RDMA device (infiniband/).
  std::vector<std::string> lowers;  // lower_<name> links: the netdevs it is stacked on.
};
using NetdevLookup = std::function<NetdevFacts(const std::string& name)>;

// The sysfs answer to NetdevLookup.
NetdevFacts LookUpNetdev(const HostFs& sys, const std::string& name);

struct RefreshPlan {
  bool full = false;
  std::string why;                // Why full, or what the targeted refresh reads.
  std::set<std::string> devices;  // RDMA devices to re-read (ports, GIDs, netdevs).
  bool device_list = false;       // Devices may have come or gone: list class/infiniband.
  bool uverbs = false;            // Re-read the uverbs and umad nodes.
  bool routes = false;            // Re-read the routes (default-route netdevs, subnets).
  std::set<std::string> netdevs;  // Netdevs without an RDMA device to re-read.
  bool empty() const {
    return !full && devices.empty() && !device_list && !uverbs && !routes && netdevs.empty();
  }
};

// Decides what `scope` can have changed in `current`. Pure but for `lookup`, which is asked only
// about netdevs the inventory does not hold. A netdev no RDMA port, GID, software device or
// default route relates to (a pod's veth, a bridge, a tunnel) plans nothing.
RefreshPlan PlanRefresh(const v1::Host& current, const ChangeScope& scope,
                        const NetdevLookup& lookup);

// A refreshed host. It lives on an arena of its own and points at the RDMA devices and topology
// pairs of the host it came from that the refresh did not read again, instead of copying them (a
// 256-device host is over a millisecond to copy and again to free), so it keeps alive the hosts
// (their arenas) that hold them: `kept` of them. A refresh that would keep more than
// kMaxKeptAlive copies instead, so a long run of refreshes holds a bounded number of old hosts;
// one that reads the same device again and again keeps only the first host and the last. The
// shared objects are never written again: hosts are immutable once published.
struct RefreshedHost {
  std::shared_ptr<v1::Host> host;
  int kept = 0;
};
inline constexpr int kMaxKeptAlive = 8;
// A full scan's host, shared with nothing.
inline RefreshedHost ScannedHost(v1::Host host) {
  return {std::make_shared<v1::Host>(std::move(host)), 0};
}

// Applies `plan` to `current` (a scanned host, or one a refresh returned: what it shares is
// found through it). Returns the refreshed host, or FailedPrecondition when the plan turned out
// to need a full rescan (a default-route netdev the inventory does not hold).
absl::StatusOr<RefreshedHost> Refresh(const HostFs& sys, const HostFs& proc,
                                      std::shared_ptr<const v1::Host> current,
                                      const RefreshPlan& plan);

// `current` again as a new host sharing all its devices, netdevs and topology pairs (with the
// same bound as Refresh), for a change the agent makes itself: neighbours heard (write its netdevs
// through MutableNetdev).
RefreshedHost ShareHost(std::shared_ptr<const v1::Host> current);

// Netdev `i` of a host that Refresh, ShareHost or ScannedHost returned, safe to write: a copy on
// the host's arena first when it is shared with an older host.
v1::Netdev* MutableNetdev(v1::Host* host, int i);

}  // namespace fabric
