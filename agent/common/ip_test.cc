#include "agent/common/ip.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <sys/socket.h>

namespace fabric {
namespace {

TEST(ParseIp, BothFamiliesAndRoundTrip) {
  const struct {
    const char* text;
    int family;
  } ok[] = {{"10.0.0.1", AF_INET},
            {"255.255.255.255", AF_INET},
            {"fd00::1", AF_INET6},
            {"fe80::5054:ff:fe12:3456", AF_INET6},
            {"::ffff:10.77.0.1", AF_INET6}};
  for (const auto& c : ok) {
    absl::StatusOr<IpAddress> a = ParseIp(c.text);
    ASSERT_TRUE(a.ok()) << c.text << ": " << a.status();
    EXPECT_EQ(a->family, c.family) << c.text;
    EXPECT_EQ(IpToString(a->family, a->addr), c.text);
  }
}

TEST(ParseIp, RefusesWhatIsNotOneAddress) {
  for (std::string_view bad : {std::string_view(""), std::string_view("10.0.0"),
                               std::string_view("10.0.0.1/24"), std::string_view("fe80::1%eth0"),
                               std::string_view("1.2.3.4 "), std::string_view("10.0.0.1\0x", 11),
                               std::string_view("host.example"), std::string_view("1.2.3.256")}) {
    absl::StatusOr<IpAddress> a = ParseIp(bad);
    EXPECT_FALSE(a.ok()) << bad;
    if (!a.ok()) {
      EXPECT_NE(a.status().message().find("not an IP address"), std::string::npos);
    }
  }
  EXPECT_FALSE(ParseIp(std::string(100, '1')).ok());
}

TEST(IpToString, UnknownFamily) {
  in6_addr a{};
  EXPECT_EQ(IpToString(AF_UNIX, a), "<family 1>");
}

TEST(ParseIpv4, HostOrderAndStrictOctets) {
  EXPECT_EQ(*ParseIpv4("10.77.0.1\n"), 0x0a4d0001u);
  EXPECT_EQ(*ParseIpv4("0.0.0.0"), 0u);
  for (const char* bad : {"10.77.0", "10.77.0.1.2", "10.77..1", "10.77.0.256", "+1.2.3.4",
                          "1.2.3.0004", "a.b.c.d", ""}) {
    EXPECT_FALSE(ParseIpv4(bad).ok()) << bad;
  }
}

TEST(Ipv4, RoundTripsAndCidr) {
  EXPECT_EQ(FormatIpv4(*ParseIpv4("25.11.128.11")), "25.11.128.11");
  EXPECT_EQ(FormatCidr(*ParseIpv4("10.224.7.5"), 21), "10.224.0.0/21");
  EXPECT_EQ(FormatCidr(*ParseIpv4("10.224.7.5"), 0), "0.0.0.0/0");
  for (const char* bad : {"256.0.0.1", "1.2.3", "1.2.3.4.5", "a.b.c.d", "1..2.3", "+1.2.3.4"}) {
    EXPECT_FALSE(ParseIpv4(bad).ok()) << bad;
  }
}

TEST(FormatCidr, ClearsHostBits) {
  EXPECT_EQ(FormatIpv4(0x0a4d0001u), "10.77.0.1");
  EXPECT_EQ(FormatCidr(0x0a4d0007u, 24), "10.77.0.0/24");
  EXPECT_EQ(FormatCidr(0x0a4d0007u, 32), "10.77.0.7/32");
  EXPECT_EQ(FormatCidr(0x0a4d0007u, 0), "0.0.0.0/0");
}

}  // namespace
}  // namespace fabric
