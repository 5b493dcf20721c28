#include "agent/inventory/discovery/parse.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace fabric {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using namespace ::fabric::v1;  // NOLINT

TEST(Trim, TrailingNulAfterTheNewline) {
  using namespace std::string_literals;
  struct Case {
    std::string in;
    std::string want;
  } cases[] = {
      {"mlx5_0\n", "mlx5_0"},
      {"mlx5_0\n\0"s, "mlx5_0"},
      {"mlx5_0\n\0\0"s, "mlx5_0"},
      {"mlx5_0\0"s, "mlx5_0"},
      {"  16 \n\0"s, "16"},
      {"\0"s, ""},
      {"a\0b\n"s, "a\0b"s},  // a NUL inside the value stays
      {"", ""},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(Trim(c.in), c.want) << ::testing::PrintToString(c.in);
  }
  // The parsers built on it accept such values.
  EXPECT_EQ(ParseInt("16\n\0"s).value_or(-1), 16);
  EXPECT_EQ(ParseHex("0x15b3\n\0"s).value_or(0), 0x15b3u);
  EXPECT_EQ(ParsePciAddress("0000:17:00.0\n\0"s).value_or(""), "0000:17:00.0");
  EXPECT_EQ(ParseLinkLayer("Ethernet\n\0"s).value_or(LINK_LAYER_UNSPECIFIED), LINK_LAYER_ETHERNET);
  EXPECT_EQ(ParsePortState("4: ACTIVE\n\0"s).value_or(PORT_STATE_UNSPECIFIED), PORT_STATE_ACTIVE);
  EXPECT_EQ(ParseGidType("RoCE v2\n\0"s, LINK_LAYER_ETHERNET).value_or(GID_TYPE_UNSPECIFIED),
            GID_TYPE_ROCE_V2);
}

TEST(ParsePciAddress, Forms) {
  struct Case {
    std::string in;
    std::string want;  // empty: error
  } cases[] = {
      {"0000:17:00.0", "0000:17:00.0"},
      {"17:00.0", "0000:17:00.0"},
      {"00000000:17:00.0", "0000:17:00.0"},
      {"0000:B7:1F.7\n", "0000:b7:1f.7"},
      {"0001:00:02.1", "0001:00:02.1"},
      {"00010000:00:02.1", ""},
      {"0000:17:00", ""},
      {"0000:17:20.0", ""},
      {"0000:17:00.8", ""},
      {"17.00.0", ""},
      {"", ""},
      {"zz:00.0", ""},
      {"000:17:00.0", ""},
      {"0000:17:00.0.1", ""},
      {"0000:017:00.0", ""},
  };
  for (const Case& c : cases) {
    auto got = ParsePciAddress(c.in);
    if (c.want.empty()) {
      EXPECT_FALSE(got.ok()) << c.in << " gave " << *got;
    } else {
      ASSERT_TRUE(got.ok()) << c.in << ": " << got.status();
      EXPECT_EQ(*got, c.want) << c.in;
    }
  }
}

TEST(RateLanes, Table) {
  const struct {
    const char* in;
    const char* want;
  } cases[] = {
      {"400 Gb/sec (4X NDR)\n", "4X NDR"},
      {"2.5 Gb/sec (1X SDR)", "1X SDR"},
      {"800 Gb/sec (8X XDR)", "8X XDR"},
      {"100 Gb/sec", ""},
      {"100 Gb/sec ()", ""},
      {"100 Gb/sec (4X )", ""},
      {"100 Gb/sec (X NDR)", ""},
      {"100 Gb/sec (4X N-R)", ""},
      {"(4X NDR)", ""},
      {"", ""},
      {"100 Gb/sec (4X NDR", ""},
  };
  for (const auto& c : cases) EXPECT_EQ(RateLanes(c.in), c.want) << c.in;
}

TEST(ParseRateGbps, Table) {
  struct Case {
    std::string in;
    double want;  // < 0: error
  } cases[] = {
      {"400 Gb/sec (4X NDR)\n", 400},
      {"2.5 Gb/sec (1X SDR)", 2.5},
      {"100 Gb/sec", 100},
      {"25 Gb/sec (1X EDR)", 25},
      {"fast\n", -1},
      {"400 Mb/sec", -1},
      {"", -1},
      {"-5 Gb/sec", -1},
      {"nan Gb/sec", -1},
  };
  for (const Case& c : cases) {
    auto got = ParseRateGbps(c.in);
    if (c.want < 0) {
      EXPECT_FALSE(got.ok()) << c.in;
    } else {
      ASSERT_TRUE(got.ok()) << c.in << ": " << got.status();
      EXPECT_DOUBLE_EQ(*got, c.want) << c.in;
    }
  }
}

TEST(ParsePortState, NumberAndWordMustAgree) {
  EXPECT_EQ(*ParsePortState("4: ACTIVE\n"), PORT_STATE_ACTIVE);
  EXPECT_EQ(*ParsePortState("1: DOWN"), PORT_STATE_DOWN);
  EXPECT_EQ(*ParsePortState("5: ACTIVE_DEFER"), PORT_STATE_ACTIVE_DEFER);
  EXPECT_FALSE(ParsePortState("4: DOWN").ok());
  EXPECT_FALSE(ParsePortState("banana").ok());
  EXPECT_FALSE(ParsePortState("9: ACTIVE").ok());
  auto bad = ParsePortState("banana\n");
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("\"banana\\n\""));
}

TEST(ParsePhysState, Table) {
  EXPECT_EQ(*ParsePhysState("5: LinkUp\n"), PHYS_STATE_LINK_UP);
  EXPECT_EQ(*ParsePhysState("3: Disabled"), PHYS_STATE_DISABLED);
  EXPECT_EQ(*ParsePhysState("2: Polling"), PHYS_STATE_POLLING);
  EXPECT_EQ(*ParsePhysState("7: Phy Test"), PHYS_STATE_PHY_TEST);
  EXPECT_FALSE(ParsePhysState("5: Polling").ok());
  EXPECT_FALSE(ParsePhysState("0: <unknown>").ok());
}

TEST(ParseLinkLayerAndNodeType, Table) {
  EXPECT_EQ(*ParseLinkLayer("InfiniBand\n"), LINK_LAYER_INFINIBAND);
  EXPECT_EQ(*ParseLinkLayer("Ethernet\n"), LINK_LAYER_ETHERNET);
  EXPECT_FALSE(ParseLinkLayer("ethernet").ok());
  EXPECT_EQ(*ParseNodeType("1: CA\n"), NODE_TYPE_CA);
  EXPECT_EQ(*ParseNodeType("4: RNIC"), NODE_TYPE_RNIC);
  EXPECT_FALSE(ParseNodeType("CA").ok());
  EXPECT_FALSE(ParseNodeType("12: CA").ok());
}

TEST(ParseGidType, DependsOnLinkLayer) {
  EXPECT_EQ(*ParseGidType("IB/RoCE v1\n", LINK_LAYER_INFINIBAND), GID_TYPE_IB);
  EXPECT_EQ(*ParseGidType("IB/RoCE v1\n", LINK_LAYER_ETHERNET), GID_TYPE_ROCE_V1);
  EXPECT_EQ(*ParseGidType("RoCE v2\n", LINK_LAYER_ETHERNET), GID_TYPE_ROCE_V2);
  EXPECT_FALSE(ParseGidType("RoCE v9\n", LINK_LAYER_ETHERNET).ok());
}

TEST(ParsePciLinkSpeed, Table) {
  EXPECT_DOUBLE_EQ(*ParsePciLinkSpeed("32.0 GT/s PCIe\n"), 32.0);
  EXPECT_DOUBLE_EQ(*ParsePciLinkSpeed("8 GT/s"), 8.0);
  EXPECT_DOUBLE_EQ(*ParsePciLinkSpeed("2.5 GT/s PCIe"), 2.5);
  EXPECT_FALSE(ParsePciLinkSpeed("Unknown\n").ok());
  EXPECT_FALSE(ParsePciLinkSpeed("Unknown speed").ok());
  EXPECT_FALSE(ParsePciLinkSpeed("").ok());
}

TEST(ParseNumbers, IntHexIdList) {
  EXPECT_EQ(*ParseInt("-1\n"), -1);
  EXPECT_EQ(*ParseInt("16"), 16);
  EXPECT_FALSE(ParseInt("abc\n").ok());
  EXPECT_FALSE(ParseInt("").ok());
  EXPECT_FALSE(ParseInt("1x").ok());
  EXPECT_EQ(*ParseHex("0x15b3\n"), 0x15b3u);
  EXPECT_EQ(*ParseHex("030200"), 0x030200u);
  EXPECT_FALSE(ParseHex("0xZZ\n").ok());
  EXPECT_FALSE(ParseHex("0x").ok());
  EXPECT_FALSE(ParseHex("-1").ok());
  EXPECT_THAT(*ParseIdList("0-1\n"), ElementsAre(0, 1));
  EXPECT_THAT(*ParseIdList("0,2-3,2"), ElementsAre(0, 2, 3));
  EXPECT_THAT(*ParseIdList("\n"), ElementsAre());
  EXPECT_FALSE(ParseIdList("3-1").ok());
  EXPECT_FALSE(ParseIdList("0-999999999").ok());
}

TEST(ParseMacAndGuid, Table) {
  EXPECT_EQ(*ParseMac("0C:42:A1:67:8E:3C\n"), "0c:42:a1:67:8e:3c");
  EXPECT_TRUE(ParseMac("00:00:10:49:fe:80:00:00:00:00:00:00:0c:42:a1:03:00:67:8e:3c").ok());
  EXPECT_FALSE(ParseMac("0c:42:a1:67:8e").ok());
  EXPECT_FALSE(ParseMac("0c:42:a1:67:8e:3g").ok());
  EXPECT_EQ(*ParseGuid("0C42:a103:0067:8e3c\n"), "0c42:a103:0067:8e3c");
  EXPECT_FALSE(ParseGuid("0c42:a103:0067").ok());
}

TEST(ParseProcNetRoute, DefaultAndConnected) {
  const std::string text =
      "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
      "eth0\t00000000\t013C000A\t0003\t0\t0\t0\t00000000\t0\t0\t0\n"
      "eth0\t003C000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n";
  auto routes = ParseProcNetRoute(text);
  ASSERT_TRUE(routes.ok()) << routes.status();
  ASSERT_EQ(routes->size(), 2u);
  EXPECT_EQ((*routes)[0].iface, "eth0");
  EXPECT_EQ((*routes)[0].destination, 0u);
  EXPECT_EQ(FormatIpv4((*routes)[0].gateway), "10.0.60.1");
  EXPECT_EQ(FormatIpv4((*routes)[1].destination), "10.0.60.0");
  EXPECT_EQ(*MaskToPrefixLen((*routes)[1].mask), 24);

  auto bad = ParseProcNetRoute(text + "garbage line\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("line 4"));
  std::vector<std::string> bad_lines;
  auto tolerant = ParseProcNetRoute(text + "garbage line\n", &bad_lines);
  ASSERT_TRUE(tolerant.ok());
  EXPECT_EQ(tolerant->size(), 2u);
  ASSERT_EQ(bad_lines.size(), 1u);
  EXPECT_THAT(bad_lines[0], HasSubstr("garbage"));
  EXPECT_FALSE(ParseProcNetRoute("").ok());
  EXPECT_FALSE(ParseProcNetRoute("eth0\t00000000\n").ok());
}

TEST(ParseIpv6DefaultRouteIfaces, Table) {
  const std::string text =
      "00000000000000000000000000000000 00 00000000000000000000000000000000 00 "
      "fe800000000000000000000000000001 00000400 00000001 00000000 00000003 eth0\n"
      "fe800000000000000000000000000000 40 00000000000000000000000000000000 00 "
      "00000000000000000000000000000000 00000100 00000001 00000000 00000001 eth0\n"
      "00000000000000000000000000000000 00 00000000000000000000000000000000 00 "
      "00000000000000000000000000000000 ffffffff 00000001 00000000 00200200 lo\n";
  EXPECT_THAT(*ParseIpv6DefaultRouteIfaces(text), ElementsAre("eth0"));
  EXPECT_FALSE(ParseIpv6DefaultRouteIfaces("junk\n").ok());
}

TEST(ParseProcModules, Table) {
  EXPECT_THAT(*ParseProcModules("nvidia_peermem 16384 0 - Live 0x0000000000000000\n"
                                "mlx5_ib 462848 0 - Live 0x0000000000000000\n"),
              ElementsAre("nvidia_peermem", "mlx5_ib"));
  EXPECT_FALSE(ParseProcModules("bad/name 1 0 - Live 0\n").ok());
  EXPECT_FALSE(ParseProcModules("lonely\n").ok());
}

TEST(MaskToPrefixLen, ContiguousOnly) {
  EXPECT_FALSE(MaskToPrefixLen(0xff00ff00).ok());
  EXPECT_EQ(*MaskToPrefixLen(0), 0);
  EXPECT_EQ(*MaskToPrefixLen(0xffffffff), 32);
}

}  // namespace
}  // namespace fabric
