// The pure parts of pod routing (table numbers, the routes of a table) and its steps over a fake
// RoutingOs (idempotence, rollback, tables taken by others). The kernel side is tested by
// cni-hook's pod_routing_system_test.
#include "agent/fabric/announce/pod_routing.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "gtest/gtest.h"

namespace fabric::announce {
namespace {

Address V4(const char* ip, int len, const char* gw = nullptr) {
  Address a;
  a.family = AF_INET;
  inet_pton(AF_INET, ip, &a.addr);
  a.prefix_len = len;
  if (gw != nullptr) {
    a.has_gateway = true;
    inet_pton(AF_INET, gw, &a.gateway);
  }
  return a;
}

Address V6(const char* ip, int len) {
  Address a;
  a.family = AF_INET6;
  inet_pton(AF_INET6, ip, &a.addr);
  a.prefix_len = len;
  return a;
}

TEST(PreferredTableTest, StableAndInRange) {
  for (const char* n : {"net1", "net2", "eth0", "rdma15"}) {
    const uint32_t t = PreferredTable(n, 10000, 10999);
    EXPECT_GE(t, 10000u);
    EXPECT_LE(t, 10999u);
    EXPECT_EQ(t, PreferredTable(n, 10000, 10999));
  }
  EXPECT_NE(PreferredTable("net1", 10000, 10999), PreferredTable("net2", 10000, 10999));
  EXPECT_EQ(PreferredTable("net1", 7, 7), 7u);
  // FNV-1a of "net1" is fixed: the number must not change between releases.
  EXPECT_EQ(PreferredTable("net1", 10000, 10999), PreferredTable("net1", 10000, 10999));
}

TEST(PickTableTest, ProbesAndWrapsThenExhausts) {
  const uint32_t pref = PreferredTable("net1", 100, 103);
  auto t = PickTable("net1", 100, 103, {});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, pref);
  t = PickTable("net1", 100, 103, {pref});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, pref == 103 ? 100u : pref + 1);
  t = PickTable("net1", 100, 103, {100, 101, 102, 103});
  EXPECT_EQ(t.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(t.status().message().find("tableRange"), absl::string_view::npos);
}

TEST(RoutableTest, LinkLocalAndUnspecifiedAreNot) {
  EXPECT_TRUE(Routable(V4("10.50.0.11", 24)));
  EXPECT_FALSE(Routable(V4("169.254.3.4", 16)));
  EXPECT_FALSE(Routable(V4("0.0.0.0", 0)));
  EXPECT_TRUE(Routable(V6("fd00::5", 64)));
  EXPECT_FALSE(Routable(V6("fe80::1", 64)));
  EXPECT_FALSE(Routable(V6("::", 0)));
}

TEST(TableRoutesTest, ConnectedDefaultAndExtra) {
  Route extra;
  inet_pton(AF_INET, "10.99.1.2", &extra.dst);
  extra.dst_len = 16;  // masked to 10.99.0.0/16
  const std::vector<Route> r = TableRoutes(
      {V4("10.50.0.11", 24, "10.50.0.1"), V6("fe80::1", 64), V6("fd00::5", 64)}, {extra});
  ASSERT_EQ(r.size(), 4u);
  char buf[INET6_ADDRSTRLEN];
  EXPECT_STREQ(inet_ntop(AF_INET, &r[0].dst, buf, sizeof(buf)), "10.50.0.0");
  EXPECT_EQ(r[0].dst_len, 24);
  EXPECT_FALSE(r[0].has_gateway);
  EXPECT_STREQ(inet_ntop(AF_INET6, &r[1].dst, buf, sizeof(buf)), "fd00::");
  EXPECT_EQ(r[2].dst_len, 0);  // default via 10.50.0.1
  EXPECT_TRUE(r[2].has_gateway);
  EXPECT_STREQ(inet_ntop(AF_INET, &r[3].dst, buf, sizeof(buf)), "10.99.0.0");
  EXPECT_TRUE(r[3].has_gateway);  // through the interface's gateway
  // Without a gateway an extra route without one is skipped.
  EXPECT_EQ(TableRoutes({V4("10.50.0.11", 24)}, {extra}).size(), 1u);
}

TEST(SameSubnetTest, ShorterPrefixDecides) {
  EXPECT_TRUE(SameSubnet(V4("10.50.0.11", 24), V4("10.50.0.12", 24)));
  EXPECT_TRUE(SameSubnet(V4("10.50.0.11", 16), V4("10.50.7.12", 24)));
  EXPECT_FALSE(SameSubnet(V4("10.50.0.11", 24), V4("10.50.1.12", 24)));
  EXPECT_FALSE(SameSubnet(V4("10.50.0.11", 24), V6("fd00::1", 64)));
}

// A namespace in memory.
class FakeOs : public RoutingOs {
 public:
  std::vector<RuleEntry> rules;
  std::vector<RouteEntry> routes;
  std::map<std::string, int> ifs = {{"net1", 2}, {"net2", 3}};
  std::map<std::string, std::string> sysctls;
  int fail_rule_after = -1;  // AddRule fails once this many rules were added
  bool sysctl_read_only = false;

  absl::StatusOr<std::vector<RuleEntry>> Rules() override { return rules; }
  absl::StatusOr<std::vector<RouteEntry>> Routes() override { return routes; }
  absl::StatusOr<std::vector<IfAddress>> Addresses() override { return std::vector<IfAddress>{}; }
  absl::Status AddRule(const RuleEntry& r) override {
    if (fail_rule_after == 0) return absl::UnavailableError("injected");
    if (fail_rule_after > 0) --fail_rule_after;
    rules.push_back(r);
    return absl::OkStatus();
  }
  absl::Status DeleteRule(const RuleEntry& r) override {
    auto it = std::find_if(rules.begin(), rules.end(), [&](const RuleEntry& o) {
      return o.table == r.table && o.protocol == r.protocol && std::memcmp(&o.src, &r.src, 16) == 0;
    });
    if (it == rules.end()) return absl::NotFoundError("no rule");
    rules.erase(it);
    return absl::OkStatus();
  }
  absl::Status AddRoute(const RouteEntry& r) override {
    for (const RouteEntry& o : routes) {
      if (o.table == r.table && o.route.dst_len == r.route.dst_len &&
          std::memcmp(&o.route.dst, &r.route.dst, 16) == 0 && o.route.family == r.route.family) {
        return absl::AlreadyExistsError("exists");
      }
    }
    routes.push_back(r);
    return absl::OkStatus();
  }
  absl::Status DeleteRoute(const RouteEntry& r) override {
    auto it = std::find_if(routes.begin(), routes.end(), [&](const RouteEntry& o) {
      return o.table == r.table && o.route.dst_len == r.route.dst_len &&
             std::memcmp(&o.route.dst, &r.route.dst, 16) == 0 && o.protocol == r.protocol;
    });
    if (it == routes.end()) return absl::NotFoundError("no route");
    routes.erase(it);
    return absl::OkStatus();
  }
  absl::StatusOr<int> IfIndex(const std::string& n) override {
    auto it = ifs.find(n);
    if (it == ifs.end()) return absl::NotFoundError("no interface " + n);
    return it->second;
  }
  absl::StatusOr<std::string> IfName(int i) override {
    for (const auto& [n, idx] : ifs) {
      if (idx == i) return n;
    }
    return absl::NotFoundError("no ifindex");
  }
  absl::StatusOr<std::string> ReadSysctl(const std::string& i, const std::string& k) override {
    auto it = sysctls.find(i + "." + k);
    return it == sysctls.end() ? "0" : it->second;
  }
  absl::Status WriteSysctl(const std::string& i, const std::string& k,
                           const std::string& v) override {
    if (sysctl_read_only) return absl::PermissionDeniedError("/proc/sys/net is not writable");
    sysctls[i + "." + k] = v;
    return absl::OkStatus();
  }
};

PodIface Net1() { return {"net1", {V4("10.50.0.11", 24, "10.50.0.1"), V6("fd00::11", 64)}, {}}; }

TEST(ApplySourceRoutingTest, AddsTableAndRulesOnceAndRemovesOnlyOurs) {
  FakeOs os;
  RuleEntry foreign;  // another plugin's rule on our preferred table
  foreign.table = PreferredTable("net1", 10000, 10999);
  foreign.priority = 500;
  os.rules.push_back(foreign);
  RoutingConfig config;
  Undo undo;
  auto t = ApplySourceRouting(os, config, Net1(), &undo);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_NE(*t, foreign.table);     // taken: the next one
  EXPECT_EQ(os.routes.size(), 3u);  // 10.50.0.0/24, fd00::/64, default via 10.50.0.1
  EXPECT_EQ(os.rules.size(), 3u);   // foreign + one per address
  for (const RouteEntry& r : os.routes) EXPECT_EQ(r.protocol, kRoutingProtocol);
  // Again: the same table, nothing new.
  Undo again;
  auto t2 = ApplySourceRouting(os, config, Net1(), &again);
  ASSERT_TRUE(t2.ok());
  EXPECT_EQ(*t2, *t);
  EXPECT_TRUE(again.empty());
  EXPECT_EQ(os.rules.size(), 3u);
  auto n = RemoveSourceRouting(os, config, {*t}, {});
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 5);
  ASSERT_EQ(os.rules.size(), 1u);  // the foreign rule stays
  EXPECT_EQ(os.rules[0].priority, 500u);
  EXPECT_TRUE(os.routes.empty());
}

TEST(ApplySourceRoutingTest, FailureRollsBackWhatThisCallAdded) {
  FakeOs os;
  os.fail_rule_after = 1;
  Undo undo;
  auto t = ApplySourceRouting(os, RoutingConfig{}, Net1(), &undo);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("rule from"), absl::string_view::npos) << t.status();
  EXPECT_TRUE(os.rules.empty());
  EXPECT_TRUE(os.routes.empty());
  EXPECT_TRUE(undo.empty());
}

TEST(ApplySourceRoutingTest, RangeExhaustedLinkLocalOnlyAndGoneInterface) {
  FakeOs os;
  RoutingConfig config;
  config.table_first = config.table_last = 7;
  RouteEntry other;
  other.table = 7;
  other.protocol = 4;  // static, not ours
  os.routes.push_back(other);
  Undo undo;
  auto t = ApplySourceRouting(os, config, Net1(), &undo);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kResourceExhausted);
  t = ApplySourceRouting(os, config, {"net1", {V6("fe80::1", 64)}, {}}, &undo);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition);
  t = ApplySourceRouting(os, config, {"net1", {}, {}}, &undo);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition);
  t = ApplySourceRouting(os, RoutingConfig{}, {"gone0", Net1().addresses, {}}, &undo);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(undo.empty());
  EXPECT_EQ(os.routes.size(), 1u);
}

TEST(SetArpSysctlsTest, SetsRecordsAndReverts) {
  FakeOs os;
  os.sysctls["net1.arp_announce"] = "2";
  Undo undo;
  ASSERT_TRUE(SetArpSysctls(os, "net1", &undo).ok());
  EXPECT_EQ(os.sysctls["net1.arp_ignore"], "1");
  EXPECT_EQ(os.sysctls["net1.rp_filter"], "2");
  EXPECT_EQ(undo.sysctls.size(), 2u);  // arp_announce was already 2
  ASSERT_TRUE(Revert(os, undo).ok());
  EXPECT_EQ(os.sysctls["net1.arp_ignore"], "0");
  FakeOs ro;
  ro.sysctl_read_only = true;
  Undo none;
  EXPECT_EQ(SetArpSysctls(ro, "net1", &none).code(), absl::StatusCode::kPermissionDenied);
}

TEST(VerifySourceRoutingTest, MissingRuleIsNamed) {
  FakeOs os;
  Undo undo;
  auto t = ApplySourceRouting(os, RoutingConfig{}, Net1(), &undo);
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(VerifySourceRouting(os, RoutingConfig{}, Net1(), *t).ok());
  os.rules.pop_back();
  absl::Status s = VerifySourceRouting(os, RoutingConfig{}, Net1(), *t);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(s.message().find("fd00::11"), absl::string_view::npos) << s;
}

}  // namespace
}  // namespace fabric::announce
