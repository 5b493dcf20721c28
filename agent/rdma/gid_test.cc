#include "agent/rdma/gid.h"

#include <gtest/gtest.h>

#include "agent/rdma/mtu.h"
#include "agent/rdma/test_gids.h"

namespace fabric::rdma {
namespace {

using namespace test_gids;  // NOLINT

std::optional<std::string> Ipv4OfGid(std::string_view text) {
  absl::StatusOr<GidBytes> g = ParseGid(text);
  if (!g.ok()) return std::nullopt;
  return GidIpv4(*g);
}

TEST(ParseGid, ParsesSysfsText) {
  auto g = ParseGid(kV4);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ((*g)[10], 0xff);
  EXPECT_EQ((*g)[12], 0x0a);
  EXPECT_EQ((*g)[15], 0x01);
  EXPECT_TRUE(ParseGid(std::string(kV4) + "\n").ok());
  EXPECT_TRUE(ParseGid("FE80:0000:0000:0000:5054:00FF:FE12:3456").ok());
  for (const char* bad :
       {"", "0000:0000", "0000:0000:0000:0000:0000:ffff:0a4d:000g",
        "0000-0000-0000-0000-0000-ffff-0a4d-0001", "::ffff:10.77.0.1", "fe80::1",
        "0000:0000:0000:0000:0000:ffff:0a4d:00011", "0000:0000:0000:0000:0000:ffff:0a4d:01 "}) {
    absl::StatusOr<GidBytes> got = ParseGid(bad);
    EXPECT_FALSE(got.ok()) << bad;
    if (!got.ok()) {
      EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_NE(got.status().message().find("not a GID"), std::string_view::npos);
    }
  }
}

TEST(ParseGid, Ipv4MappedAndZero) {
  auto v4 = ParseGid("0000:0000:0000:0000:0000:ffff:190b:800b\n");
  ASSERT_TRUE(v4.ok());
  EXPECT_EQ(GidIpv4(*v4), "25.11.128.11");
  EXPECT_FALSE(IsZeroGid(*v4));

  auto ll = ParseGid("fe80:0000:0000:0000:0e42:a1ff:fe67:8e3c");
  ASSERT_TRUE(ll.ok());
  EXPECT_EQ(GidIpv4(*ll), std::nullopt);

  auto zero = ParseGid("0000:0000:0000:0000:0000:0000:0000:0000\n");
  ASSERT_TRUE(zero.ok());
  EXPECT_TRUE(IsZeroGid(*zero));
  EXPECT_EQ(GidIpv4(*zero), std::nullopt);

  // ::ffff:0:0/96 needs the first 80 bits zero.
  auto not_mapped = ParseGid("0001:0000:0000:0000:0000:ffff:190b:800b");
  ASSERT_TRUE(not_mapped.ok());
  EXPECT_EQ(GidIpv4(*not_mapped), std::nullopt);

  for (const char* bad : {"zzzz", "fe80::1", "fe80:0:0:0:0:0:0:1", "",
                          "fe80:0000:0000:0000"
                          ":0000:0000:0000:0000:0000"}) {
    EXPECT_FALSE(ParseGid(bad).ok()) << bad;
  }
}

TEST(GidIpv4, OnlyIpv4Mapped) {
  EXPECT_EQ(Ipv4OfGid(kV4), "10.77.0.1");
  EXPECT_EQ(Ipv4OfGid(kV4Other), "192.168.1.5");
  EXPECT_FALSE(Ipv4OfGid(kLinkLocal).has_value());
  EXPECT_FALSE(Ipv4OfGid(kV6).has_value());
  EXPECT_FALSE(Ipv4OfGid(kZero).has_value());
  // ::ffff:0:a.b.c.d (IPv4-translated) is not IPv4-mapped.
  EXPECT_FALSE(Ipv4OfGid("0000:0000:0000:0000:ffff:0000:0a4d:0001").has_value());
}

TEST(FormatGid, RoundTripsTheKernelForm) {
  for (const char* text : {kZero, kLinkLocal, kV4, kV4Other, kV6}) {
    auto g = ParseGid(text);
    ASSERT_TRUE(g.ok()) << text;
    EXPECT_EQ(FormatGid(*g), text);
  }
  EXPECT_EQ(FormatGid(*ParseGid("FE80:0000:0000:0000:5054:00FF:FE12:3456")), kLinkLocal);
}

TEST(Ipv4MappedGid, IsWhatTheKernelPrints) {
  EXPECT_EQ(FormatGid(Ipv4MappedGid({10, 77, 0, 1})), kV4);
  EXPECT_EQ(GidIpv4(Ipv4MappedGid({192, 168, 1, 5})), "192.168.1.5");
}

TEST(ParseGid, TrailingNulAfterTheNewline) {
  const std::string v4 = std::string(kV4) + "\n";
  for (const std::string& text : {v4 + std::string(1, '\0'), v4 + std::string(2, '\0'),
                                  std::string(kV4) + std::string(1, '\0')}) {
    absl::StatusOr<GidBytes> g = ParseGid(text);
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_EQ(FormatGid(*g), kV4);
  }
  // A NUL inside the value is still garbage.
  EXPECT_FALSE(ParseGid(std::string(kV4).replace(4, 1, 1, '\0')).ok());
  EXPECT_EQ(*ParseGidKind(std::string("RoCE v2\n") + std::string(1, '\0')), GidKind::kRoceV2);
}

struct SlotCase {
  const char* gid;
  bool empty;
  bool link_local;
  const char* ipv6;  // GidIpv6; nullptr: none
};

TEST(GidSlots, EmptyLinkLocalAndGlobalIpv6) {
  const std::vector<SlotCase> cases = {
      {kZero, true, false, nullptr},
      {kPrefixOnly, true, true, nullptr},
      // Any prefix with a zero interface id is empty, as ibv_devinfo treats it.
      {"2001:0db8:0000:0001:0000:0000:0000:0000", true, false, nullptr},
      {kLinkLocal, false, true, nullptr},
      {"febf:0000:0000:0000:0000:0000:0000:0001", false, true, nullptr},  // fe80::/10 ends here
      {"fec0:0000:0000:0000:0000:0000:0000:0001", false, false, "fec0::1"},
      {kV4, false, false, nullptr},
      {kV6, false, false, "2001:db8::1"},
      {kV6Other, false, false, "2001:db8:a00:1:e42:a1ff:fe01:1"},
      {"fd00:0000:0000:0000:0000:0000:0000:0001", false, false, "fd00::1"},
      {"0000:0000:0000:0000:0000:0000:0000:0001", false, false, "::1"},
  };
  for (const SlotCase& c : cases) {
    absl::StatusOr<GidBytes> g = ParseGid(c.gid);
    ASSERT_TRUE(g.ok()) << c.gid;
    EXPECT_EQ(IsEmptyGidSlot(*g), c.empty) << c.gid;
    EXPECT_EQ(IsLinkLocalGid(*g), c.link_local) << c.gid;
    EXPECT_EQ(IsGlobalIpv6Gid(*g), c.ipv6 != nullptr) << c.gid;
    EXPECT_EQ(GidIpv6(*g), c.ipv6 ? std::optional<std::string>(c.ipv6) : std::nullopt) << c.gid;
  }
}

TEST(ParseGidKind, Table) {
  EXPECT_EQ(*ParseGidKind("IB/RoCE v1\n"), GidKind::kIbOrRoceV1);
  EXPECT_EQ(*ParseGidKind("RoCE v2\n"), GidKind::kRoceV2);
  EXPECT_EQ(*ParseGidKind("IB"), GidKind::kIb);
  EXPECT_EQ(*ParseGidKind("RoCE v1"), GidKind::kRoceV1);
  EXPECT_FALSE(ParseGidKind("RoCE v9\n").ok());
  EXPECT_FALSE(ParseGidKind("").ok());
  EXPECT_FALSE(ParseGidKind("roce v2").ok());
}

}  // namespace
}  // namespace fabric::rdma

namespace fabric::rdma {
namespace {

// iboe_get_mtu's table: the netdev MTU less 96 bytes of RoCE headers, rounded down to an IB MTU.
TEST(RoceActiveMtu, TheKernelsRule) {
  const struct {
    uint32_t netdev;
    std::optional<uint32_t> want;
  } cases[] = {{9000, 4096}, {4192, 4096},        {4191, 2048},     {4150, 2048},
               {1500, 1024}, {1120, 1024},        {1119, 512},      {608, 512},
               {352, 256},   {351, std::nullopt}, {0, std::nullopt}};
  for (const auto& c : cases) EXPECT_EQ(RoceActiveMtu(c.netdev), c.want) << c.netdev;
}

}  // namespace
}  // namespace fabric::rdma
