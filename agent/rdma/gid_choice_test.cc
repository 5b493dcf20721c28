#include "agent/rdma/gid_choice.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "agent/hostfs/host_fs.h"
#include "agent/rdma/test_gids.h"

namespace fabric::rdma {
namespace {

using namespace test_gids;  // NOLINT

// A table row as sysfs shows it; an empty type is an unreadable one.
struct Row {
  int index;
  const char* gid;
  const char* type;
  const char* ndev;
};

std::vector<GidSlot> Table(const std::vector<Row>& rows) {
  std::vector<GidSlot> out;
  for (const Row& r : rows) {
    GidSlot s;
    s.index = r.index;
    s.gid = *ParseGid(r.gid);
    if (absl::StatusOr<GidKind> k = ParseGidKind(r.type); k.ok()) s.kind = *k;
    s.netdev = r.ndev;
    out.push_back(s);
  }
  return out;
}

struct Case {
  const char* name;
  const char* link_layer;
  std::vector<Row> table;
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
      {"ipv6 only: the global v2 one",
       "Ethernet",
       {{0, kLinkLocal, "IB/RoCE v1", "eth2"},
        {1, kLinkLocal, "RoCE v2", "eth2"},
        {2, kV6, "IB/RoCE v1", "eth2"},
        {3, kV6, "RoCE v2", "eth2"}},
       3},
      {"ipv4 preferred over a lower-index ipv6",
       "Ethernet",
       {{0, kLinkLocal, "RoCE v2", "eth2"},
        {1, kV6, "RoCE v2", "eth2"},
        {5, kV4, "RoCE v2", "eth2"}},
       5},
      {"link-local only: none",
       "Ethernet",
       {{0, kLinkLocal, "IB/RoCE v1", "eth2"}, {1, kLinkLocal, "RoCE v2", "eth2"}},
       -1},
      {"ipv6 of another netdev: none",
       "Ethernet",
       {{0, kLinkLocal, "RoCE v2", "eth2"}, {1, kV6, "RoCE v2", "macvlan0"}},
       -1},
      {"ipv6 v1 only: none",
       "Ethernet",
       {{0, kLinkLocal, "IB/RoCE v1", "eth2"}, {1, kV6, "IB/RoCE v1", "eth2"}},
       -1},
      {"lowest of several ipv6",
       "Ethernet",
       {{0, kLinkLocal, "RoCE v2", "eth2"},
        {7, kV6Other, "RoCE v2", "eth2"},
        {4, kV6, "RoCE v2", "eth2"}},
       4},
      {"v1 only: none",
       "Ethernet",
       {{0, kLinkLocal, "IB/RoCE v1", "eth2"}, {1, kV4, "IB/RoCE v1", "eth2"}},
       -1},
      {"unreadable type: not v2",
       "Ethernet",
       {{0, kLinkLocal, "", "eth2"}, {1, kV4, "", "eth2"}},
       -1},
      {"unreadable ndevs still count",
       "Ethernet",
       {{0, kLinkLocal, "RoCE v2", ""}, {1, kV4, "RoCE v2", ""}},
       1},
      {"empty table", "Ethernet", {}, -1},
      {"unknown link layer", "Unknown", {{0, kV4, "RoCE v2", "eth0"}}, -1},
  };
  for (const Case& c : cases) {
    absl::StatusOr<int> got = ChooseGidIndex(c.link_layer, Table(c.table));
    if (c.want < 0) {
      EXPECT_FALSE(got.ok()) << c.name << ": chose " << *got;
    } else {
      ASSERT_TRUE(got.ok()) << c.name << ": " << got.status();
      EXPECT_EQ(*got, c.want) << c.name;
    }
  }
}

std::optional<int> Index(const std::optional<GidChoice>& c) {
  return c ? std::optional<int>(c->index) : std::nullopt;
}

TEST(ChooseRoceV2Gid, WantedAddressesAndNetdev) {
  const std::vector<GidSlot> t = Table({{0, kLinkLocal, "RoCE v2", "eth2"},
                                        {1, kV4, "RoCE v2", "eth2"},
                                        {2, kV4Other, "IB/RoCE v1", "macvlan0"},
                                        {3, kV4Other, "RoCE v2", "macvlan0"}});
  EXPECT_EQ(Index(ChooseRoceV2Gid(t, {})), 1);
  EXPECT_EQ(Index(ChooseRoceV2Gid(t, {.netdev = "eth2", .ipv4 = {}, .ipv6 = {}})), 1);
  EXPECT_EQ(Index(ChooseRoceV2Gid(t, {.netdev = "macvlan0", .ipv4 = {}, .ipv6 = {}})), 3);
  EXPECT_EQ(Index(ChooseRoceV2Gid(t, {.netdev = "", .ipv4 = {{192, 168, 1, 5}}, .ipv6 = {}})), 3);
  EXPECT_EQ(Index(ChooseRoceV2Gid(
                t, {.netdev = "", .ipv4 = {{10, 9, 9, 9}, {10, 77, 0, 1}}, .ipv6 = {}})),
            1);
  EXPECT_EQ(ChooseRoceV2Gid(t, {.netdev = "eth2", .ipv4 = {{192, 168, 1, 5}}, .ipv6 = {}}),
            std::nullopt);
  EXPECT_EQ(ChooseRoceV2Gid(t, {.netdev = "eth9", .ipv4 = {}, .ipv6 = {}}), std::nullopt);
}

TEST(ChooseRoceV2Gid, FamilyAndWantedIpv6) {
  const GidBytes v6 = *ParseGid(kV6);
  const GidBytes v6_other = *ParseGid(kV6Other);
  // A pod's macvlan with its own IPv6 GIDs beside the port's.
  const std::vector<GidSlot> t = Table({{0, kLinkLocal, "IB/RoCE v1", "eth2"},
                                        {1, kLinkLocal, "RoCE v2", "eth2"},
                                        {2, kV6, "IB/RoCE v1", "eth2"},
                                        {3, kV6, "RoCE v2", "eth2"},
                                        {4, kV6Other, "IB/RoCE v1", "macvlan0"},
                                        {5, kV6Other, "RoCE v2", "macvlan0"}});
  EXPECT_EQ(ChooseRoceV2Gid(t, {}), (GidChoice{3, GidFamily::kIpv6}));
  EXPECT_EQ(ChooseRoceV2Gid(t, {.netdev = "eth2", .ipv4 = {}, .ipv6 = {}}),
            (GidChoice{3, GidFamily::kIpv6}));
  EXPECT_EQ(ChooseRoceV2Gid(t, {.netdev = "", .ipv4 = {}, .ipv6 = {v6_other}}),
            (GidChoice{5, GidFamily::kIpv6}));
  EXPECT_EQ(ChooseRoceV2Gid(t, {.netdev = "", .ipv4 = {}, .ipv6 = {v6}}),
            (GidChoice{3, GidFamily::kIpv6}));
  // Only IPv4 wanted: no IPv6 GID stands in for it.
  EXPECT_EQ(ChooseRoceV2Gid(t, {.netdev = "", .ipv4 = {{10, 77, 0, 1}}, .ipv6 = {}}), std::nullopt);
  EXPECT_EQ(ChooseRoceV2Gid(t, {.netdev = "eth2", .ipv4 = {}, .ipv6 = {v6_other}}), std::nullopt);
  // A link-local address is never chosen, even when asked for.
  EXPECT_EQ(ChooseRoceV2Gid(t, {.netdev = "", .ipv4 = {}, .ipv6 = {*ParseGid(kLinkLocal)}}),
            std::nullopt);

  // Dual stack: the IPv4 GID wins over a lower-index IPv6 one, with or without wanted addresses.
  std::vector<GidSlot> dual = t;
  dual.push_back(Table({{9, kV4, "RoCE v2", "eth2"}})[0]);
  EXPECT_EQ(ChooseRoceV2Gid(dual, {}), (GidChoice{9, GidFamily::kIpv4}));
  EXPECT_EQ(ChooseRoceV2Gid(dual, {.netdev = "", .ipv4 = {{10, 77, 0, 1}}, .ipv6 = {v6}}),
            (GidChoice{9, GidFamily::kIpv4}));
  EXPECT_EQ(ChooseRoceV2Gid(dual, {.netdev = "", .ipv4 = {{10, 9, 9, 9}}, .ipv6 = {v6}}),
            (GidChoice{3, GidFamily::kIpv6}));
}

void Write(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << text << "\n";
}

TEST(ChooseGidIndexFromSysfs, ReadsARxeLikeTree) {
  const std::filesystem::path root = std::filesystem::path(::testing::TempDir()) / "rdma_gid_sysfs";
  std::filesystem::remove_all(root);
  const std::filesystem::path port = root / "class/infiniband/rxe0/ports/1";
  Write(port / "link_layer", "Ethernet");
  Write(port / "gids/0", kLinkLocal);
  Write(port / "gids/1", kV4);
  Write(port / "gids/2", kZero);
  Write(port / "gids/10", kV4Other);
  Write(port / "gids/11", "garbage");
  Write(port / "gids/12", kPrefixOnly);
  Write(port / "gid_attrs/types/0", "RoCE v2");
  Write(port / "gid_attrs/types/1", "RoCE v2");
  Write(port / "gid_attrs/types/10", "RoCE v2");
  Write(port / "gid_attrs/ndevs/0", "veth0");
  Write(port / "gid_attrs/ndevs/1", "veth0");
  Write(port / "gid_attrs/ndevs/10", "veth0");
  HostFsImpl fs(root.string());
  absl::StatusOr<int> g = ChooseGidIndexFromSysfs(fs, "rxe0", 1);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(*g, 1);
  EXPECT_FALSE(ChooseGidIndexFromSysfs(fs, "rxe0", 2).ok());
  EXPECT_FALSE(ChooseGidIndexFromSysfs(fs, "mlx5_0", 1).ok());

  // The table by index in natural order, empty (zero, prefix-only) and unparsable slots left out.
  absl::StatusOr<std::vector<GidSlot>> t = ReadGidTable(fs, "class/infiniband/rxe0/ports/1");
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->size(), 3u);
  EXPECT_EQ((*t)[0].index, 0);
  EXPECT_EQ((*t)[1].index, 1);
  EXPECT_EQ((*t)[2].index, 10);
  EXPECT_EQ((*t)[2].netdev, "veth0");
  EXPECT_EQ((*t)[2].kind, GidKind::kRoceV2);
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace fabric::rdma
