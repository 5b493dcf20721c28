#include "agent/fabric/announce/frames.h"

#include <arpa/inet.h>

#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fabric::announce {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

const Mac kMac = {0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee};
const Mac kGwMac = {0x02, 0x11, 0x22, 0x33, 0x44, 0x55};

in_addr V4(const char* s) {
  in_addr a{};
  EXPECT_EQ(inet_pton(AF_INET, s, &a), 1) << s;
  return a;
}
in6_addr V6(const char* s) {
  in6_addr a{};
  EXPECT_EQ(inet_pton(AF_INET6, s, &a), 1) << s;
  return a;
}
bool Same6(const in6_addr& a, const char* b) {
  const in6_addr w = V6(b);
  return std::memcmp(&a, &w, sizeof(a)) == 0;
}
std::string Str(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }

// Expected frames, written out by hand (checksums computed separately, not by frames.cc).
const std::vector<uint8_t> kWantGarpRequest = {
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff,  // dst broadcast
    0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee,  // src
    0x08, 0x06,                          // ARP
    0x00, 0x01, 0x08, 0x00, 0x06, 0x04,  // Ethernet/IPv4, hlen 6, plen 4
    0x00, 0x01,                          // request
    0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee,  // sender MAC
    0x0a, 0x01, 0x02, 0x03,              // sender IP 10.1.2.3
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // target MAC zero
    0x0a, 0x01, 0x02, 0x03,              // target IP = sender IP
    0,    0,    0,    0,    0,    0,    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  // pad to 60
};
const std::vector<uint8_t> kWantGarpReply = {
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0xaa, 0xbb, 0xcc, 0xdd,
    0xee, 0x08, 0x06, 0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x02,  // reply
    0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee,                                // sender MAC
    0x0a, 0x01, 0x02, 0x03,                                            //
    0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee,  // target MAC = own (arping -A; Linux arp_is_garp)
    0x0a, 0x01, 0x02, 0x03,              //
    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,
    0,    0,    0,    0,    0,    0,    0,
};
const std::vector<uint8_t> kWantArpRequest = {
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0x08, 0x06,
    0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee,  //
    0x0a, 0x01, 0x02, 0x03,              // from 10.1.2.3
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  //
    0x0a, 0x01, 0x02, 0x01,              // who has 10.1.2.1
    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,
    0,    0,    0,    0,
};
const std::vector<uint8_t> kWantArpProbe = {
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0x08, 0x06,
    0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee,  //
    0x00, 0x00, 0x00, 0x00,              // sender IP 0.0.0.0 (RFC 5227)
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  //
    0x0a, 0x01, 0x02, 0x03,              //
    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,
    0,    0,    0,    0,
};
const std::vector<uint8_t> kWantUnsolicitedNa = {
    0x33, 0x33, 0x00, 0x00, 0x00, 0x01,  // all-nodes multicast MAC
    0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee,  //
    0x86, 0xdd,                          // IPv6
    0x60, 0x00, 0x00, 0x00,              // version 6
    0x00, 0x20,                          // payload 32
    0x3a, 0xff,                          // ICMPv6, hop limit 255
    0x20, 0x01, 0x0d, 0xb8, 0,    0,    0,    0,    0, 0, 0, 0, 0, 0, 0, 0x10,  // src 2001:db8::10
    0xff, 0x02, 0,    0,    0,    0,    0,    0,    0, 0, 0, 0, 0, 0, 0, 0x01,  // dst ff02::1
    0x88, 0x00,                                                                 // type 136, code 0
    0x5e, 0xa8,                                                                 // checksum
    0x20, 0x00, 0x00, 0x00,                                                     // Override only
    0x20, 0x01, 0x0d, 0xb8, 0,    0,    0,    0,    0, 0, 0, 0, 0, 0, 0, 0x10,  // target
    0x02, 0x01, 0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee,                             // TLLA option
};
const std::vector<uint8_t> kWantNeighborSolicitation = {
    0x33, 0x33, 0xff, 0x00, 0x00, 0x01,  // solicited-node MAC of 2001:db8::1
    0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee,  //
    0x86, 0xdd, 0x60, 0x00, 0x00, 0x00, 0x00, 0x20, 0x3a, 0xff, 0x20, 0x01, 0x0d,
    0xb8, 0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0x10,  // src
    0xff, 0x02, 0,    0,    0,    0,    0,    0,    0,    0,    0,    0x01, 0xff,
    0x00, 0x00, 0x01,        // ff02::1:ff00:1
    0x87, 0x00, 0x81, 0xb5,  // type 135, checksum
    0x00, 0x00, 0x00, 0x00,  // reserved
    0x20, 0x01, 0x0d, 0xb8, 0,    0,    0,    0,    0,    0,    0,    0,    0,
    0,    0,    0x01,                                // target 2001:db8::1
    0x01, 0x01, 0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee,  // SLLA option
};
// What a gateway answers: solicited NA (Router, Solicited, Override) with its TLLA.
const std::vector<uint8_t> kWantSolicitedNa = {
    0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0x02, 0x11, 0x22, 0x33, 0x44, 0x55, 0x86,
    0xdd, 0x60, 0x00, 0x00, 0x00, 0x00, 0x20, 0x3a, 0xff, 0x20, 0x01, 0x0d, 0xb8,
    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0x01,  // src 2001:db8::1
    0x20, 0x01, 0x0d, 0xb8, 0,    0,    0,    0,    0,    0,    0,    0,    0,
    0,    0,    0x10,                                // dst 2001:db8::10
    0x88, 0x00, 0xa3, 0xcc, 0xe0, 0x00, 0x00, 0x00,  //
    0x20, 0x01, 0x0d, 0xb8, 0,    0,    0,    0,    0,    0,    0,    0,    0,
    0,    0,    0x01,                                // target
    0x02, 0x01, 0x02, 0x11, 0x22, 0x33, 0x44, 0x55,  // TLLA
};

TEST(BuildTest, EveryByte) {
  struct Case {
    const char* name;
    std::vector<uint8_t> got;
    const std::vector<uint8_t>& want;
  };
  const Case cases[] = {
      {"garp request", BuildGratuitousArp(kMac, V4("10.1.2.3"), ArpForm::kRequest),
       kWantGarpRequest},
      {"garp reply", BuildGratuitousArp(kMac, V4("10.1.2.3"), ArpForm::kReply), kWantGarpReply},
      {"arp request", BuildArpRequest(kMac, V4("10.1.2.3"), V4("10.1.2.1")), kWantArpRequest},
      {"arp probe", BuildArpProbe(kMac, V4("10.1.2.3")), kWantArpProbe},
      {"unsolicited na", BuildUnsolicitedNa(kMac, V6("2001:db8::10")), kWantUnsolicitedNa},
      {"ns", BuildNeighborSolicitation(kMac, V6("2001:db8::10"), V6("2001:db8::1")),
       kWantNeighborSolicitation},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_THAT(c.got, ElementsAreArray(c.want));
  }
  EXPECT_EQ(kWantGarpRequest.size(), kMinFrameSize);
  EXPECT_EQ(kWantUnsolicitedNa.size(), 86u);
}

TEST(BuildTest, SolicitedNodeAddressUsesTheLow24Bits) {
  const in6_addr g = SolicitedNodeAddress(V6("fe80::12:34ab:cdef"));
  const in6_addr want = V6("ff02::1:ffab:cdef");
  EXPECT_EQ(std::memcmp(&g, &want, sizeof(g)), 0);
  std::vector<uint8_t> ns =
      BuildNeighborSolicitation(kMac, V6("2001:db8::10"), V6("fe80::12:34ab:cdef"));
  EXPECT_THAT(std::vector<uint8_t>(ns.begin(), ns.begin() + 6),
              ElementsAreArray({0x33, 0x33, 0xff, 0xab, 0xcd, 0xef}));
  EXPECT_EQ(ns[56], 0xdf);  // checksum computed independently
  EXPECT_EQ(ns[57], 0xa7);
}

TEST(ChecksumTest, KnownValuesAndVerification) {
  // Over the NA body with the checksum field zeroed: the value in the expected frame.
  std::vector<uint8_t> icmp(kWantUnsolicitedNa.begin() + 54, kWantUnsolicitedNa.end());
  const in6_addr src = V6("2001:db8::10"), dst = V6("ff02::1");
  EXPECT_EQ(Icmpv6Checksum(src, dst, icmp.data(), icmp.size()), 0);  // verifies as is
  icmp[2] = icmp[3] = 0;
  EXPECT_EQ(Icmpv6Checksum(src, dst, icmp.data(), icmp.size()), 0x5ea8);
  // Odd length: the last byte is padded with zero. 0x0100 + pseudo-header (len 1, nh 58).
  const in6_addr zero{};
  const uint8_t one[] = {0x01};
  EXPECT_EQ(Icmpv6Checksum(zero, zero, one, 1), static_cast<uint16_t>(~(0x0100 + 1 + 58)));
  // Any other pseudo-header fails verification.
  std::vector<uint8_t> body(kWantUnsolicitedNa.begin() + 54, kWantUnsolicitedNa.end());
  EXPECT_NE(Icmpv6Checksum(V6("2001:db8::11"), dst, body.data(), body.size()), 0);
}

TEST(ParseArpTest, RoundTripsEveryBuilder) {
  auto req = ParseArp(Str(kWantGarpRequest));
  ASSERT_TRUE(req.ok()) << req.status();
  EXPECT_EQ(req->op, kArpRequest);
  EXPECT_EQ(req->sender_mac, kMac);
  EXPECT_EQ(req->eth_src, kMac);
  EXPECT_EQ(req->eth_dst, (Mac{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}));
  EXPECT_EQ(req->sender_ip.s_addr, V4("10.1.2.3").s_addr);
  EXPECT_EQ(req->target_ip.s_addr, V4("10.1.2.3").s_addr);
  EXPECT_EQ(req->target_mac, Mac{});
  EXPECT_FALSE(req->vlan_id.has_value());

  auto reply = ParseArp(Str(kWantGarpReply));
  ASSERT_TRUE(reply.ok());
  EXPECT_EQ(reply->op, kArpReply);
  EXPECT_EQ(reply->target_mac, kMac);

  auto probe = ParseArp(Str(kWantArpProbe));
  ASSERT_TRUE(probe.ok());
  EXPECT_EQ(probe->sender_ip.s_addr, 0u);

  // Unpadded (42 bytes, as the kernel sends on veth) parses too.
  auto bare =
      ParseArp(Str(std::vector<uint8_t>(kWantArpRequest.begin(), kWantArpRequest.begin() + 42)));
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_EQ(bare->target_ip.s_addr, V4("10.1.2.1").s_addr);
}

TEST(ParseArpTest, VlanTag) {
  std::vector<uint8_t> f = kWantGarpRequest;
  // Insert 802.1Q, PCP 3, VID 100 (0x064) before the ARP ethertype.
  f.insert(f.begin() + 12, {0x81, 0x00, 0x60, 0x64});
  auto p = ParseArp(Str(f));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->vlan_id, 100);
  EXPECT_EQ(p->sender_ip.s_addr, V4("10.1.2.3").s_addr);
  // Stacked tags are rejected, clearly.
  f.insert(f.begin() + 12, {0x88, 0xa8, 0x00, 0x05});
  EXPECT_THAT(std::string(ParseArp(Str(f)).status().message()), HasSubstr("stacked VLAN"));
}

TEST(ParseArpTest, Malformed) {
  auto with = [](size_t at, uint8_t v) {
    std::vector<uint8_t> f = kWantGarpRequest;
    f[at] = v;
    return Str(f);
  };
  struct Case {
    const char* name;
    std::string frame;
    const char* error;
  };
  const Case cases[] = {
      {"empty", "", "too short"},
      {"ethernet only", Str(kWantGarpRequest).substr(0, 14), "truncated"},
      {"41 bytes", Str(kWantGarpRequest).substr(0, 41), "truncated"},
      {"ipv6 ethertype", with(13, 0xdd), "not ARP"},
      {"htype 6", with(15, 6), "htype 6"},
      {"ptype ipv6", with(16, 0x86), "ptype"},
      {"hlen 8", with(18, 8), "hlen 8"},
      {"plen 16", with(19, 16), "plen 16"},
      {"op 3", with(21, 3), "op 3"},
      {"truncated vlan",
       Str({0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0x81, 0x00, 0x00}),
       "truncated VLAN"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto p = ParseArp(c.frame);
    ASSERT_FALSE(p.ok());
    EXPECT_THAT(std::string(p.status().message()), HasSubstr(c.error));
  }
}

TEST(ParseNdTest, RoundTrips) {
  auto na = ParseNd(Str(kWantUnsolicitedNa));
  ASSERT_TRUE(na.ok()) << na.status();
  EXPECT_EQ(na->type, kNeighborAdvertisement);
  EXPECT_TRUE(na->override_flag);
  EXPECT_FALSE(na->router);
  EXPECT_FALSE(na->solicited);
  EXPECT_TRUE(Same6(na->target, "2001:db8::10"));
  EXPECT_TRUE(Same6(na->src, "2001:db8::10"));
  EXPECT_TRUE(Same6(na->dst, "ff02::1"));
  EXPECT_EQ(na->target_lladdr, kMac);
  EXPECT_FALSE(na->source_lladdr.has_value());

  auto ns = ParseNd(Str(kWantNeighborSolicitation));
  ASSERT_TRUE(ns.ok()) << ns.status();
  EXPECT_EQ(ns->type, kNeighborSolicitation);
  EXPECT_TRUE(Same6(ns->target, "2001:db8::1"));
  EXPECT_EQ(ns->source_lladdr, kMac);
  EXPECT_FALSE(ParseNeighborAdvert(Str(kWantNeighborSolicitation)).ok());

  auto sol = ParseNeighborAdvert(Str(kWantSolicitedNa));
  ASSERT_TRUE(sol.ok()) << sol.status();
  EXPECT_TRUE(sol->router && sol->solicited && sol->override_flag);
  EXPECT_EQ(sol->target_lladdr, kGwMac);
  EXPECT_EQ(sol->eth_src, kGwMac);

  // Trailing padding after the IPv6 payload is ignored.
  std::vector<uint8_t> padded = kWantSolicitedNa;
  padded.resize(padded.size() + 10, 0);
  EXPECT_TRUE(ParseNd(Str(padded)).ok());
}

TEST(ParseNdTest, NaWithoutOptions) {
  const std::vector<uint8_t> f = {
      0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0x02, 0x11, 0x22, 0x33, 0x44, 0x55, 0x86,
      0xdd, 0x60, 0x00, 0x00, 0x00, 0x00, 0x18, 0x3a, 0xff, 0x20, 0x01, 0x0d, 0xb8,
      0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0x01, 0x20,
      0x01, 0x0d, 0xb8, 0,    0,    0,    0,    0,    0,    0,    0,    0,    0,
      0,    0x10, 0x88, 0x00, 0x8e, 0x6f, 0x60, 0x00, 0x00, 0x00, 0x20, 0x01, 0x0d,
      0xb8, 0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0x01,
  };
  auto na = ParseNeighborAdvert(Str(f));
  ASSERT_TRUE(na.ok()) << na.status();
  EXPECT_FALSE(na->target_lladdr.has_value());
  EXPECT_TRUE(na->solicited);
}

TEST(ParseNdTest, Malformed) {
  auto with = [](size_t at, uint8_t v) {
    std::vector<uint8_t> f = kWantUnsolicitedNa;
    f[at] = v;
    return Str(f);
  };
  // An option of length 0 must be an error, not an endless loop; the checksum is fixed up so
  // that the option check is what rejects it.
  std::vector<uint8_t> zero_opt = kWantUnsolicitedNa;
  zero_opt[79] = 0;
  zero_opt[57] = static_cast<uint8_t>(zero_opt[57] + 1);  // 0x5ea8 + 0x0001 (one's complement)
  std::vector<uint8_t> long_opt = kWantUnsolicitedNa;
  long_opt[79] = 2;
  long_opt[57] = static_cast<uint8_t>(long_opt[57] - 1);
  struct Case {
    const char* name;
    std::string frame;
    const char* error;
  };
  const Case cases[] = {
      {"truncated ipv6 header", Str(kWantUnsolicitedNa).substr(0, 50), "truncated IPv6"},
      {"truncated payload", Str(kWantUnsolicitedNa).substr(0, 80), "exceeds the frame"},
      {"version 4", with(14, 0x40), "version 4"},
      {"next header udp", with(20, 17), "next header 17"},
      {"hop limit 64", with(21, 64), "hop limit 64"},
      {"payload 16", with(19, 16), "too short"},
      {"echo request", with(54, 128), "type 128"},
      {"code 1", with(55, 1), "code 1"},
      {"bad checksum", with(57, 0xa9), "checksum"},
      {"flipped target byte", with(77, 0x11), "checksum"},
      {"option length 0", Str(zero_opt), "length 0"},
      {"option too long", Str(long_opt), "runs past"},
      {"arp", Str(kWantGarpRequest), "not IPv6"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto p = ParseNd(c.frame);
    ASSERT_FALSE(p.ok());
    EXPECT_THAT(std::string(p.status().message()), HasSubstr(c.error));
  }
}

}  // namespace
}  // namespace fabric::announce
