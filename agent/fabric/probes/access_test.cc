// The responder's allow-list and rate limit, the secret file and the HMAC exchange's encoding
// (checked against MACs computed independently with Python's hmac module).
#include "agent/fabric/probes/access.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "agent/fabric/probes/auth.h"

namespace fabric::probes {
namespace {

TEST(AllowList, ParsesIpv4AndIpv6Networks) {
  absl::StatusOr<AllowList> a = AllowList::Parse("10.0.0.7/24, fd00:1::/64,192.168.1.5");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->ToString(), "10.0.0.0/24, fd00:1::/64, 192.168.1.5/32");
  EXPECT_TRUE(a->Allows("10.0.0.1"));
  EXPECT_TRUE(a->Allows("10.0.0.255"));
  EXPECT_TRUE(a->Allows("::ffff:10.0.0.9"));  // a dual-stack socket's view of an IPv4 peer
  EXPECT_FALSE(a->Allows("10.0.1.1"));
  EXPECT_TRUE(a->Allows("fd00:1::abcd"));
  EXPECT_TRUE(a->Allows("fd00:1::abcd%eth0"));
  EXPECT_FALSE(a->Allows("fd00:2::1"));
  EXPECT_TRUE(a->Allows("192.168.1.5"));
  EXPECT_FALSE(a->Allows("192.168.1.6"));
  EXPECT_FALSE(a->Allows("127.0.0.1"));
  EXPECT_FALSE(a->Allows("not an address"));
  EXPECT_FALSE(a->Allows(""));
}

TEST(AllowList, OddPrefixesAndEverything) {
  absl::StatusOr<AllowList> a = AllowList::Parse("10.0.0.0/23,2001:db8::/33");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->Allows("10.0.1.200"));
  EXPECT_FALSE(a->Allows("10.0.2.1"));
  EXPECT_TRUE(a->Allows("2001:db8:7fff::1"));
  EXPECT_FALSE(a->Allows("2001:db8:8000::1"));
  absl::StatusOr<AllowList> all = AllowList::Parse("0.0.0.0/0,::/0");
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_TRUE(all->Allows("203.0.113.9"));
  EXPECT_TRUE(all->Allows("2001:db8::1"));
  // 0.0.0.0/0 is every IPv4 address, not every IPv6 one.
  absl::StatusOr<AllowList> v4 = AllowList::Parse("0.0.0.0/0");
  ASSERT_TRUE(v4.ok());
  EXPECT_FALSE(v4->Allows("2001:db8::1"));
}

TEST(AllowList, BadEntriesAreNamed) {
  for (const char* bad : {"", "10.0.0.0/24,", "10.0.0.0/33", "fd00::/129", "10.0.0.0/x",
                          "10.0.0.256/24", "bogus", "10.0.0.0/24,,fd00::/8", "fd00:::1/64"}) {
    absl::StatusOr<AllowList> a = AllowList::Parse(bad);
    EXPECT_FALSE(a.ok()) << bad;
  }
  absl::StatusOr<AllowList> a = AllowList::Parse("10.0.0.0/24,bogus");
  ASSERT_FALSE(a.ok());
  EXPECT_TRUE(absl::StrContains(a.status().message(), "bogus")) << a.status();
}

TEST(AllowList, HostSubnetsHoldLoopback) {
  absl::StatusOr<AllowList> a = AllowList::HostSubnets();
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->Allows("127.0.0.1")) << a->ToString();
  EXPECT_TRUE(absl::StrContains(a->ToString(), "127.0.0.0/8")) << a->ToString();
  EXPECT_FALSE(a->Allows("203.0.113.9")) << a->ToString();  // TEST-NET-3: no host's subnet
}

TEST(RateLimiter, BurstThenRefill) {
  RateLimiter r(6);
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  for (int i = 0; i < 6; ++i) EXPECT_TRUE(r.Take("10.0.0.5", t0)) << i;
  EXPECT_FALSE(r.Take("10.0.0.5", t0));
  EXPECT_TRUE(r.Take("10.0.0.6", t0));  // per peer
  EXPECT_FALSE(r.Take("10.0.0.5", t0 + absl::Seconds(9)));
  EXPECT_TRUE(r.Take("10.0.0.5", t0 + absl::Seconds(10)));  // one token per 10 s
  EXPECT_FALSE(r.Take("10.0.0.5", t0 + absl::Seconds(11)));
  // A long pause refills only up to the burst.
  const absl::Time later = t0 + absl::Hours(1);
  for (int i = 0; i < 6; ++i) EXPECT_TRUE(r.Take("10.0.0.5", later)) << i;
  EXPECT_FALSE(r.Take("10.0.0.5", later));
  RateLimiter off(0);
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(off.Take("10.0.0.5", t0));
}

TEST(RateLimiter, ManyPeersStayBounded) {
  RateLimiter r(1);
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  for (size_t i = 0; i < RateLimiter::kMaxPeers; ++i) {
    ASSERT_TRUE(r.Take(absl::StrCat("peer", i), t0));
  }
  // Every bucket is empty: a new peer waits until some refill.
  EXPECT_FALSE(r.Take("new", t0));
  EXPECT_TRUE(r.Take("new", t0 + absl::Minutes(1)));
}

class SecretFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/probe_secret_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { (void)std::system(("rm -rf " + dir_).c_str()); }
  std::string Write(const std::string& name, const std::string& content) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << content;
    return path;
  }
  std::string dir_;
};

TEST_F(SecretFile, TrimsTrailingNewlines) {
  absl::StatusOr<std::string> s = LoadSecret(Write("a", "s3cret\n"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s, "s3cret");
  s = LoadSecret(Write("b", "two words\r\n\n"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s, "two words");
}

TEST_F(SecretFile, EmptyMissingOrHugeIsAnErrorNamingThePath) {
  for (const std::string& path : {Write("empty", ""), Write("newline", "\n"), dir_ + "/missing",
                                  Write("huge", std::string(5000, 'x'))}) {
    absl::StatusOr<std::string> s = LoadSecret(path);
    ASSERT_FALSE(s.ok()) << path;
    EXPECT_TRUE(absl::StrContains(s.status().message(), path)) << s.status();
  }
}

wire::Hello TableHello() {
  wire::Hello h;
  h.params = DefaultParams(TestKind::kWriteBw);
  h.params.transport = Transport::kTcp;
  h.params.size = 4096;
  h.params.iterations = 100;
  h.auth = true;
  for (uint8_t i = 0; i < 16; ++i) h.nonce[i] = i;
  return h;
}

wire::Nonce TableServerNonce() {
  wire::Nonce n;
  for (uint8_t i = 0; i < 16; ++i) n[i] = static_cast<uint8_t>(16 + i);
  return n;
}

std::string Hex(std::span<const uint8_t> b) {
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(b.data()), b.size()));
}

// The expected bytes and MACs come from Python (struct + hmac), from the format in wire.h and
// auth.h, not from this code.
TEST(HmacExchange, MatchesAnIndependentComputation) {
  const wire::Hello h = TableHello();
  EXPECT_EQ(Hex(wire::Encode(h)),
            "465052420001000100000040010202000000000000001000000000000000006400000000000007d0000"
            "00080000000640000000000000001000000010001020304050607080"
            "90a0b0c0d0e0f");
  EXPECT_EQ(Hex(ServerMac("s3cret", TableServerNonce(), h)),
            "0a923d7d4decd401c466bc742f86fb99f5ba765682c911037390b25899114614");
  EXPECT_EQ(Hex(ClientMac("s3cret", TableServerNonce(), h)),
            "d3714a197c1927f5d872ceed99808432f3fcf93e9d60e1041e6cf80c94f51119");
  wire::Hello with_device = h;
  with_device.device = "mlx5_0";
  EXPECT_EQ(Hex(ClientMac("s3cret", TableServerNonce(), with_device)),
            "936d914cca6f9deb6477fc11fa8a50c480ccf5d5ed56a9ed8bef4fcd674efd7d");
}

TEST(HmacExchange, EveryInputChangesTheMac) {
  const wire::Hello h = TableHello();
  const wire::Nonce sn = TableServerNonce();
  const wire::Mac base = ClientMac("s3cret", sn, h);
  EXPECT_TRUE(MacEqual(base, ClientMac("s3cret", sn, h)));
  EXPECT_FALSE(MacEqual(base, ClientMac("s3cres", sn, h)));
  EXPECT_FALSE(MacEqual(base, ServerMac("s3cret", sn, h)));  // the labels differ
  wire::Nonce sn2 = sn;
  sn2[15] ^= 1;
  EXPECT_FALSE(MacEqual(base, ClientMac("s3cret", sn2, h)));
  wire::Hello h2 = h;
  h2.nonce[0] ^= 1;
  EXPECT_FALSE(MacEqual(base, ClientMac("s3cret", sn, h2)));
  h2 = h;
  h2.params.size = 8192;
  EXPECT_FALSE(MacEqual(base, ClientMac("s3cret", sn, h2)));
  wire::Mac flipped = base;
  flipped[31] ^= 0x80;
  EXPECT_FALSE(MacEqual(base, flipped));
}

TEST(HmacExchange, NoncesAreFresh) {
  absl::StatusOr<wire::Nonce> a = RandomNonce();
  absl::StatusOr<wire::Nonce> b = RandomNonce();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(*a, *b);
}

}  // namespace
}  // namespace fabric::probes
