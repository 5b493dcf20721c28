#include "agent/policy/rails/rails.h"

#include <gtest/gtest.h>

#include <map>

#include "absl/strings/str_cat.h"
#include "tests/hosts/discovered.h"

namespace fabric {
namespace {

// roce-9port with `eth1`-`eth8` (its back-end ports) hearing `names`.
v1::Host Heard(const std::vector<std::string>& names) {
  v1::Host h = testing::DiscoveredExampleHost("roce-9port");
  for (v1::Netdev& n : *h.mutable_netdevs()) {
    for (size_t i = 0; i < names.size(); ++i) {
      if (n.name() != absl::StrCat("eth", i + 1) || names[i].empty()) continue;
      n.mutable_neighbor()->set_system_name(names[i]);
      n.mutable_neighbor()->set_switch_label(names[i]);
    }
  }
  return h;
}

v1::SelectionPolicy EightRails() {
  v1::SelectionPolicy p;
  for (int k = 1; k <= 8; ++k) {
    v1::Rail* r = p.add_rails();
    r->set_name(absl::StrCat("r", k));
    r->set_switch_pattern(absl::StrCat("leaf-r", k, "-*"));
    r->add_ports(absl::StrCat("eth", k));
  }
  return p;
}

TEST(PortRails, ExpectedFromPortsHeardFromTheNeighbourName) {
  std::vector<std::string> names;
  for (int k = 1; k <= 8; ++k) names.push_back(absl::StrCat("leaf-r", k, "-07"));
  names[2] = "leaf-r5-07";  // eth3 cabled to rail 5's leaf.
  names[5] = "";            // eth6 heard nothing.
  names[6] = "spine-1";     // eth7 hears a switch of no rail.
  const v1::Host h = Heard(names);
  const v1::SelectionPolicy p = EightRails();
  const std::vector<PortRail> rails = PortRails(h, p);
  ASSERT_EQ(rails.size(), 8u);
  for (size_t i = 0; i < rails.size(); ++i) {
    SCOPED_TRACE(i);
    const PortRail& r = rails[i];
    ASSERT_NE(r.netdev, nullptr);
    EXPECT_EQ(r.netdev->name(), absl::StrCat("eth", i + 1));
    ASSERT_NE(r.expected, nullptr);
    EXPECT_EQ(r.expected->name(), absl::StrCat("r", i + 1));
    if (i == 5) {
      EXPECT_EQ(r.neighbor, nullptr);
      EXPECT_EQ(r.heard, nullptr);
    } else if (i == 6) {
      EXPECT_EQ(r.heard, nullptr);
    } else {
      ASSERT_NE(r.heard, nullptr);
      EXPECT_EQ(r.heard->name(), i == 2 ? "r5" : absl::StrCat("r", i + 1));
    }
  }
  // Without rails: the ports and their neighbours, no rail.
  for (const PortRail& r : PortRails(h, {})) {
    EXPECT_EQ(r.expected, nullptr);
    EXPECT_EQ(r.heard, nullptr);
  }
}

TEST(PortRails, PatternsMatchTheSystemNameElseTheLabel) {
  v1::Rail rail;
  rail.set_switch_pattern("leaf-r[12]-*");
  v1::Neighbor n;
  n.set_system_name("leaf-r2-07");
  EXPECT_TRUE(MatchesRail(rail, n));
  n.set_system_name("leaf-r3-07");
  EXPECT_FALSE(MatchesRail(rail, n));
  n.clear_system_name();
  n.set_switch_label("c-0123456789");
  EXPECT_FALSE(MatchesRail(rail, n));
  rail.set_switch_pattern("c-*");
  EXPECT_TRUE(MatchesRail(rail, n)) << "no system name: the chassis hash label";
  EXPECT_FALSE(MatchesRail(rail, v1::Neighbor())) << "nothing to match";
}

TEST(RailChanges, EachNeighbourNamesTheRailItIsHeardOn) {
  std::vector<std::string> names;
  for (int k = 1; k <= 8; ++k) names.push_back(absl::StrCat("leaf-r", k, "-07"));
  names[2] = "leaf-r5-07";  // eth3 cabled to rail 5's leaf: it is heard on r5.
  names[6] = "spine-1";     // eth7 hears a switch of no rail.
  v1::Host h = Heard(names);
  const std::vector<std::pair<int, std::string>> changes = RailChanges(h, EightRails());
  std::map<std::string, std::string> by_netdev;
  for (const auto& [i, rail] : changes) by_netdev[h.netdevs(i).name()] = rail;
  EXPECT_EQ(by_netdev.size(), 7u);  // eth7's rail is already "".
  EXPECT_EQ(by_netdev["eth1"], "r1");
  EXPECT_EQ(by_netdev["eth3"], "r5");
  EXPECT_EQ(by_netdev["eth8"], "r8");
  EXPECT_EQ(by_netdev.count("eth7"), 0u);
  for (const auto& [i, rail] : changes) h.mutable_netdevs(i)->mutable_neighbor()->set_rail(rail);
  EXPECT_TRUE(RailChanges(h, EightRails()).empty());  // Applied: nothing more to change.
  // Without rails configured, every rail is cleared.
  const std::vector<std::pair<int, std::string>> cleared = RailChanges(h, v1::SelectionPolicy());
  EXPECT_EQ(cleared.size(), 7u);
  for (const auto& [i, rail] : cleared) EXPECT_EQ(rail, "");
}

}  // namespace
}  // namespace fabric
