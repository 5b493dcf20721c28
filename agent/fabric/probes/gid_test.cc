#include "agent/fabric/probes/gid.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "agent/inventory/hostfs/host_fs.h"

namespace fabric::probes {
namespace {

constexpr const char* kZero = "0000:0000:0000:0000:0000:0000:0000:0000";
constexpr const char* kLinkLocal = "fe80:0000:0000:0000:5054:00ff:fe12:3456";
constexpr const char* kV4 = "0000:0000:0000:0000:0000:ffff:0a4d:0001";       // 10.77.0.1
constexpr const char* kV4Other = "0000:0000:0000:0000:0000:ffff:c0a8:0105";  // 192.168.1.5
constexpr const char* kV6 = "2001:0db8:0000:0000:0000:0000:0000:0001";

TEST(ParseGid, ParsesSysfsText) {
  auto g = ParseGid(kV4);
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ((*g)[10], 0xff);
  EXPECT_EQ((*g)[12], 0x0a);
  EXPECT_EQ((*g)[15], 0x01);
  EXPECT_TRUE(ParseGid(std::string(kV4) + "\n").has_value());
  EXPECT_FALSE(ParseGid("").has_value());
  EXPECT_FALSE(ParseGid("0000:0000").has_value());
  EXPECT_FALSE(ParseGid("0000:0000:0000:0000:0000:ffff:0a4d:000g").has_value());
  EXPECT_FALSE(ParseGid("0000-0000-0000-0000-0000-ffff-0a4d-0001").has_value());
  EXPECT_FALSE(ParseGid("::ffff:10.77.0.1").has_value());
}

TEST(Ipv4OfGid, OnlyIpv4Mapped) {
  EXPECT_EQ(Ipv4OfGid(kV4), "10.77.0.1");
  EXPECT_EQ(Ipv4OfGid(kV4Other), "192.168.1.5");
  EXPECT_FALSE(Ipv4OfGid(kLinkLocal).has_value());
  EXPECT_FALSE(Ipv4OfGid(kV6).has_value());
  EXPECT_FALSE(Ipv4OfGid(kZero).has_value());
  // ::ffff:0:a.b.c.d (IPv4-translated) is not IPv4-mapped.
  EXPECT_FALSE(Ipv4OfGid("0000:0000:0000:0000:ffff:0000:0a4d:0001").has_value());
}

struct Case {
  const char* name;
  const char* link_layer;
  std::vector<GidEntry> table;
  int want;  // -1: an error
};

TEST(ChooseGidIndex, Table) {
  const std::vector<Case> cases = {
      {"infiniband is index 0", "InfiniBand", {{0, kLinkLocal, "IB/RoCE v1", ""}}, 0},
      {"infiniband with a newline", "InfiniBand\n", {}, 0},
      {"rxe: link-local 0, ipv4 1",
       "Ethernet",
       {{0, kLinkLocal, "RoCE v2", "veth0"}, {1, kV4, "RoCE v2", "veth0"}, {2, kZero, "", ""}},
       1},
      {"mlx5: v1 and v2 pairs, the v2 ipv4 one",
       "Ethernet",
       {{0, kLinkLocal, "IB/RoCE v1", "eth2"},
        {1, kLinkLocal, "RoCE v2", "eth2"},
        {2, kV4, "IB/RoCE v1", "eth2"},
        {3, kV4, "RoCE v2", "eth2"}},
       3},
      {"lowest of several ipv4",
       "Ethernet",
       {{0, kLinkLocal, "RoCE v2", "eth2"},
        {5, kV4Other, "RoCE v2", "eth2"},
        {3, kV4, "RoCE v2", "eth2"}},
       3},
      {"a macvlan's gid is not the port's",
       "Ethernet",
       {{0, kLinkLocal, "RoCE v2", "eth2"},
        {1, kV4Other, "RoCE v2", "macvlan0"},
        {2, kV4, "RoCE v2", "eth2"}},
       2},
      {"ipv6 only: none",
       "Ethernet",
       {{0, kLinkLocal, "RoCE v2", "eth2"}, {1, kV6, "RoCE v2", "eth2"}},
       -1},
      {"v1 only: none",
       "Ethernet",
       {{0, kLinkLocal, "IB/RoCE v1", "eth2"}, {1, kV4, "IB/RoCE v1", "eth2"}},
       -1},
      {"unreadable ndevs still count",
       "Ethernet",
       {{0, kLinkLocal, "RoCE v2", ""}, {1, kV4, "RoCE v2", ""}},
       1},
      {"empty table", "Ethernet", {}, -1},
      {"unknown link layer", "Unknown", {{0, kV4, "RoCE v2", "eth0"}}, -1},
  };
  for (const Case& c : cases) {
    absl::StatusOr<int> got = ChooseGidIndex(c.link_layer, c.table);
    if (c.want < 0) {
      EXPECT_FALSE(got.ok()) << c.name << ": chose " << *got;
    } else {
      ASSERT_TRUE(got.ok()) << c.name << ": " << got.status();
      EXPECT_EQ(*got, c.want) << c.name;
    }
  }
}

void Write(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << text << "\n";
}

TEST(ChooseGidIndexFromSysfs, ReadsARxeLikeTree) {
  const std::filesystem::path root =
      std::filesystem::path(::testing::TempDir()) / "probe_gid_sysfs";
  std::filesystem::remove_all(root);
  const std::filesystem::path port = root / "class/infiniband/rxe0/ports/1";
  Write(port / "link_layer", "Ethernet");
  Write(port / "gids/0", kLinkLocal);
  Write(port / "gids/1", kV4);
  Write(port / "gids/2", kZero);
  Write(port / "gid_attrs/types/0", "RoCE v2");
  Write(port / "gid_attrs/types/1", "RoCE v2");
  Write(port / "gid_attrs/ndevs/0", "veth0");
  Write(port / "gid_attrs/ndevs/1", "veth0");
  HostFsImpl fs(root.string());
  absl::StatusOr<int> g = ChooseGidIndexFromSysfs(fs, "rxe0", 1);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(*g, 1);
  EXPECT_FALSE(ChooseGidIndexFromSysfs(fs, "rxe0", 2).ok());
  EXPECT_FALSE(ChooseGidIndexFromSysfs(fs, "mlx5_0", 1).ok());
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace fabric::probes
