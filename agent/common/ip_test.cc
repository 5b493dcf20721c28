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

TEST(ParseHostPort, TheFormsEveryEndpointFlagTakes) {
  const struct {
    std::string_view text;
    std::string host;
    uint16_t port;
    bool bracketed;
  } ok[] = {{"127.0.0.1:5051", "127.0.0.1", 5051, false},
            {"node-7.example:65535", "node-7.example", 65535, false},
            {":0", "", 0, false},
            {"[::1]:9464", "::1", 9464, true},
            {"[fe80::1%eth0]:1", "fe80::1%eth0", 1, true}};
  for (const auto& c : ok) {
    absl::StatusOr<HostPort> hp = ParseHostPort(c.text);
    ASSERT_TRUE(hp.ok()) << c.text << ": " << hp.status();
    EXPECT_EQ(hp->host, c.host) << c.text;
    EXPECT_EQ(hp->port, c.port) << c.text;
    EXPECT_EQ(hp->bracketed, c.bracketed) << c.text;
  }
  const struct {
    std::string_view text;
    std::string_view why;
  } bad[] = {{"127.0.0.1:99999", "not a number in range"},
             {"127.0.0.1", "no :PORT"},
             {"::1:80", "goes in brackets"},
             {"[::1]80", "no :PORT after ]"},
             {"[::1:80", "no closing ]"},
             {"[]:80", "empty IPv6"},
             {"host:", "not a number"},
             {"host:+80", "not a number"},
             {"host:8o", "not a number"},
             {std::string_view("a\0b:80", 6), "NUL"}};
  for (const auto& c : bad) {
    absl::StatusOr<HostPort> hp = ParseHostPort(c.text);
    ASSERT_FALSE(hp.ok()) << c.text;
    EXPECT_EQ(hp.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(hp.status().message()).find(c.why), std::string::npos) << hp.status();
    EXPECT_NE(std::string(hp.status().message()).find("expected HOST:PORT"), std::string::npos);
  }
  EXPECT_FALSE(ParseHostPort("node:0", /*allow_zero=*/false).ok());
  // A long bad value is quoted short, not echoed whole.
  const std::string huge(5000, 'x');
  EXPECT_LT(ParseHostPort(huge).status().message().size(), 300u);
}

}  // namespace
}  // namespace fabric
