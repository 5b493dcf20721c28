#include "agent/fabric/neighbors/neighbor_table.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace fabric::neighbors {
namespace {

LldpNeighbor Switch(const std::string& name, const std::string& port, uint32_t ttl = 120) {
  LldpNeighbor n;
  n.chassis_id_subtype = kChassisIdMac;
  n.chassis_id_raw = std::string("\x0c\x42\xa1\x00\x00\x01", 6);
  n.chassis_id = "0c:42:a1:00:00:01";
  n.port_id_subtype = 5;
  n.port_id = port;
  n.system_name = name;
  n.ttl_s = ttl;
  return n;
}

using Seen = NeighborTable::Seen;
const absl::Time kT0 = absl::FromUnixSeconds(1'800'000'000);

TEST(NeighborTable, NewSameChangedGoneAndExpired) {
  NeighborTable t;
  EXPECT_EQ(t.Observe("eth0", Switch("leaf-1", "Ethernet1/1"), kT0), Seen::kNew);
  EXPECT_EQ(t.NextExpiry(), kT0 + absl::Seconds(120));
  EXPECT_EQ(t.Observe("eth0", Switch("leaf-1", "Ethernet1/1"), kT0 + absl::Seconds(30)),
            Seen::kSame);
  EXPECT_EQ(t.NextExpiry(), kT0 + absl::Seconds(150)) << "a frame moves the expiry on";
  // Renamed: changed, but the same chassis and port, so first_seen stays.
  EXPECT_EQ(t.Observe("eth0", Switch("leaf-1b", "Ethernet1/1"), kT0 + absl::Seconds(60)),
            Seen::kChanged);
  ASSERT_NE(t.Find("eth0"), nullptr);
  EXPECT_EQ(t.Find("eth0")->first_seen, kT0);
  EXPECT_EQ(t.Find("eth0")->changes, 1u);
  // Recabled to another port: first_seen starts again.
  EXPECT_EQ(t.Observe("eth0", Switch("leaf-1b", "Ethernet1/2"), kT0 + absl::Seconds(90)),
            Seen::kChanged);
  EXPECT_EQ(t.Find("eth0")->first_seen, kT0 + absl::Seconds(90));
  EXPECT_EQ(t.Find("eth0")->moves, 1u) << "a rename is not a move; another port is";
  EXPECT_EQ(t.Find("eth0")->changes, 2u);
  // A shutdown LLDPDU forgets it at once.
  EXPECT_EQ(t.Observe("eth0", Switch("leaf-1b", "Ethernet1/2", 0), kT0 + absl::Seconds(91)),
            Seen::kGone);
  EXPECT_EQ(t.Find("eth0"), nullptr);
  EXPECT_EQ(t.Observe("eth0", Switch("leaf-1b", "Ethernet1/2", 0), kT0 + absl::Seconds(92)),
            Seen::kSame)
      << "nothing left to forget";
  // TTL expiry.
  EXPECT_EQ(t.Observe("eth1", Switch("leaf-2", "swp1", 10), kT0 + absl::Seconds(100)), Seen::kNew);
  EXPECT_TRUE(t.Expire(kT0 + absl::Seconds(109)).empty());
  EXPECT_EQ(t.Expire(kT0 + absl::Seconds(110)), std::vector<std::string>{"eth1"});
  EXPECT_EQ(t.NextExpiry(), absl::InfiniteFuture());
  // Heard again after it expired: new.
  EXPECT_EQ(t.Observe("eth1", Switch("leaf-2", "swp1", 10), kT0 + absl::Seconds(200)), Seen::kNew);
  EXPECT_TRUE(t.Forget("eth1"));
  EXPECT_FALSE(t.Forget("eth1"));
}

// A flood is bounded per netdev: past the burst, frames are dropped and counted, and another
// netdev is not affected.
TEST(NeighborTable, AFloodIsDroppedAndCounted) {
  NeighborTable t(NeighborTable::Options{1, 3});
  int taken = 0;
  for (int i = 0; i < 1000; ++i) {
    if (t.Observe("eth0", Switch(absl::StrCat("leaf-", i), "p1"), kT0) != Seen::kDropped) ++taken;
  }
  EXPECT_EQ(taken, 3);
  EXPECT_EQ(t.dropped(), 997u);
  EXPECT_EQ(t.Observe("eth1", Switch("leaf", "p1"), kT0), Seen::kNew);
  EXPECT_EQ(t.Observe("eth0", Switch("leaf", "p1"), kT0 + absl::Seconds(1)), Seen::kChanged)
      << "the bucket refills";
  EXPECT_EQ(t.entries().size(), 2u);
}

TEST(NeighborTable, SameNeighborComparesWhatItSays) {
  LldpNeighbor a = Switch("leaf", "p1");
  LldpNeighbor b = a;
  b.ttl_s = 5;
  EXPECT_TRUE(SameNeighbor(a, b)) << "the TTL is not what it says";
  b.port_vlan = 100;
  EXPECT_FALSE(SameNeighbor(a, b));
  b = a;
  b.management_address = "10.0.0.1";
  EXPECT_FALSE(SameNeighbor(a, b));
  b = a;
  b.chassis_id_raw[5] = 2;
  EXPECT_FALSE(SameNeighbor(a, b));
}

}  // namespace
}  // namespace fabric::neighbors
