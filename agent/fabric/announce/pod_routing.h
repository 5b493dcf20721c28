// Pod-side steps for pods with several interfaces (issue 16): per interface, the ARP sysctls that
// keep an address answered only by its own interface (no ARP flux), and source routing (a table
// per interface plus `from <address> lookup <table>` rules) so replies leave on the rail they
// belong to. Everything acts on the network namespace current for the calling thread.
//
// What the plugin adds carries the routing protocol number kRoutingProtocol (rules and routes
// alike), so removal touches only what is ours: a rule or route with another protocol, or in a
// table outside the configured range, is never deleted.
//
// Layers: the pure parts (config, table numbers, the routes a table holds) and the logic over the
// RoutingOs seam are here; RoutingOsImpl (libnl, /proc/sys) is the real one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/fabric/announce/announce.h"

namespace fabric::announce {

// The bytes of an address of `family` (AF_INET: 4, AF_INET6: 16).
size_t AddressBytes(int family);

// rtm_protocol / FRA_PROTOCOL of every rule and route we add ("fabric" in rt_protos terms;
// 245 is unassigned in iproute2's list).
inline constexpr uint8_t kRoutingProtocol = 245;

struct RoutingConfig {
  enum class Mode {
    kAuto,  // on for an interface with an RDMA device or a sibling in the same subnet
    kOn,
    kOff,
  };
  Mode mode = Mode::kAuto;
  uint32_t table_first = 10000;  // tables the plugin may use, inclusive
  uint32_t table_last = 10999;
  uint32_t rule_priority = 1000;  // below main's 32766: only traffic from our addresses is steered
};

// A route of a pod interface's table (also how prevResult's routes[] arrive).
struct Route {
  int family = AF_INET;
  in6_addr dst{};  // IPv4 in the first 4 bytes
  int dst_len = 0;
  bool has_gateway = false;
  in6_addr gateway{};
};

// ---- Pure ----

// The table an interface prefers: first + FNV-1a(ifname) mod the range size. The same name gets
// the same table in every pod.
uint32_t PreferredTable(std::string_view ifname, uint32_t first, uint32_t last);
// The preferred table, or the next free one in the range (wrapping); ResourceExhausted when every
// table of the range is in `taken`.
absl::StatusOr<uint32_t> PickTable(std::string_view ifname, uint32_t first, uint32_t last,
                                   const std::set<uint32_t>& taken);
// Link-local (169.254/16, fe80::/10) and unspecified addresses get no rule.
bool Routable(const Address& a);
// The routes of an interface's table: each routable address's connected prefix, a default route
// per family through a gateway prevResult names, and `extra` (prevResult's routes for it; a route
// without a gateway goes through the interface's gateway of its family, or is skipped).
std::vector<Route> TableRoutes(const std::vector<Address>& addresses,
                               const std::vector<Route>& extra);
// Whether `a` and `b` share a subnet (the shorter of the two prefixes, same family).
bool SameSubnet(const Address& a, const Address& b);

// ---- The OS seam ----

struct RuleEntry {
  int family = AF_INET;
  in6_addr src{};
  int src_len = 0;
  uint32_t table = 0;
  uint32_t priority = 0;
  uint8_t protocol = 0;
};

struct RouteEntry {
  Route route;
  int oif = 0;
  uint32_t table = 0;
  uint8_t protocol = 0;
  bool has_src = false;  // preferred source (IPv4 connected routes)
  in6_addr src{};
};

struct IfAddress {
  int ifindex = 0;
  Address address;
};

class RoutingOs {
 public:
  virtual ~RoutingOs() = default;
  virtual absl::StatusOr<std::vector<RuleEntry>> Rules() = 0;    // IPv4 and IPv6
  virtual absl::StatusOr<std::vector<RouteEntry>> Routes() = 0;  // every table, both families
  virtual absl::StatusOr<std::vector<IfAddress>> Addresses() = 0;
  // AlreadyExists when the same rule/route is there.
  virtual absl::Status AddRule(const RuleEntry& r) = 0;
  virtual absl::Status DeleteRule(const RuleEntry& r) = 0;
  virtual absl::Status AddRoute(const RouteEntry& r) = 0;
  virtual absl::Status DeleteRoute(const RouteEntry& r) = 0;
  // NotFound when the interface is gone.
  virtual absl::StatusOr<int> IfIndex(const std::string& ifname) = 0;
  virtual absl::StatusOr<std::string> IfName(int ifindex) = 0;
  // net.ipv4.conf.<ifname>.<key>: the old value is returned by Write. PermissionDenied when
  // /proc/sys/net is not writable, NotFound when the interface is gone.
  virtual absl::StatusOr<std::string> ReadSysctl(const std::string& ifname,
                                                 const std::string& key) = 0;
  virtual absl::Status WriteSysctl(const std::string& ifname, const std::string& key,
                                   const std::string& value) = 0;
};

// libnl (one NETLINK_ROUTE socket, link.h's ConnectRoute) and /proc/sys/net.
class RoutingOsImpl : public RoutingOs {
 public:
  static absl::StatusOr<std::unique_ptr<RoutingOsImpl>> Open();
  ~RoutingOsImpl() override;
  absl::StatusOr<std::vector<RuleEntry>> Rules() override;
  absl::StatusOr<std::vector<RouteEntry>> Routes() override;
  absl::StatusOr<std::vector<IfAddress>> Addresses() override;
  absl::Status AddRule(const RuleEntry& r) override;
  absl::Status DeleteRule(const RuleEntry& r) override;
  absl::Status AddRoute(const RouteEntry& r) override;
  absl::Status DeleteRoute(const RouteEntry& r) override;
  absl::StatusOr<int> IfIndex(const std::string& ifname) override;
  absl::StatusOr<std::string> IfName(int ifindex) override;
  absl::StatusOr<std::string> ReadSysctl(const std::string& ifname,
                                         const std::string& key) override;
  absl::Status WriteSysctl(const std::string& ifname, const std::string& key,
                           const std::string& value) override;

 private:
  struct State;
  explicit RoutingOsImpl(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

// ---- The steps ----

struct PodIface {
  std::string ifname;
  std::vector<Address> addresses;
  std::vector<Route> routes;  // prevResult's routes that belong to it
};

// What one Apply did, so that a failure later in ADD can undo exactly that.
struct Undo {
  struct Sysctl {
    std::string ifname, key, old_value;
  };
  std::vector<Sysctl> sysctls;
  std::vector<RuleEntry> rules;
  std::vector<RouteEntry> routes;
  bool empty() const { return sysctls.empty() && rules.empty() && routes.empty(); }
};

// arp_ignore=1, arp_announce=2, rp_filter=2 on `ifname`; values already set are left alone.
absl::Status SetArpSysctls(RoutingOs& os, const std::string& ifname, Undo* undo);

// The interface's table (reused when it already holds our routes for this interface, which
// makes a repeated ADD a no-op), its routes and a rule per routable address. On error everything
// this call added is removed again. Returns the table; FailedPrecondition when the interface has
// no routable address (callers log and skip).
absl::StatusOr<uint32_t> ApplySourceRouting(RoutingOs& os, const RoutingConfig& config,
                                            const PodIface& iface, Undo* undo);

// Reverts `undo` (newest first), best effort; the first error is returned.
absl::Status Revert(RoutingOs& os, const Undo& undo);

// Removes our rules that look up one of `tables` and our routes in them, plus those of any table
// of the range whose routes of ours leave through one of `ifnames` (when no record survived).
// Returns how many rules and routes went.
absl::StatusOr<int> RemoveSourceRouting(RoutingOs& os, const RoutingConfig& config,
                                        std::set<uint32_t> tables,
                                        const std::vector<std::string>& ifnames);

// CHECK: `table` holds our routes for the interface and every routable address has its rule.
absl::Status VerifySourceRouting(RoutingOs& os, const RoutingConfig& config, const PodIface& iface,
                                 uint32_t table);

// The interfaces (other than `ifname`) holding an address in a subnet of `addresses`.
absl::StatusOr<std::vector<std::string>> SameSubnetSiblings(RoutingOs& os,
                                                            const std::string& ifname,
                                                            const std::vector<Address>& addresses);

}  // namespace fabric::announce
