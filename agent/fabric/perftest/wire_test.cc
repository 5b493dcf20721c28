#include "agent/fabric/perftest/wire.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

namespace fabric::perftest {
namespace {

using ::testing::HasSubstr;

std::span<const uint8_t> Bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

std::string Padded(std::string_view s, size_t n) {
  std::string out(s);
  out.resize(n, '\0');
  return out;
}

TEST(PerftestVersion, DecodesAsPerftestReadsIt) {
  struct Case {
    std::string bytes;
    bool ok;
    double value;
    std::string error;
  };
  const Case cases[] = {
      {Padded("6.06", 16), true, 6.06, ""},
      {Padded("6.29", 16), true, 6.29, ""},
      {Padded("5.70", 16), true, 5.70, ""},
      {Padded("6.28-rc1", 16), true, 6.28, ""},  // atof stops at the first non-number
      {Padded("5.60", 16), false, 0, "5.60 is older than 5.70"},
      {Padded("", 16), false, 0, "not a version string"},
      {Padded("hello", 16), false, 0, "is not a number"},
      {Padded("6.06", 15), false, 0, "15 bytes"},
      {std::string("6.0\x01", 4) + std::string(12, '\0'), false, 0, "not a version string"},
      {std::string(16, '9'), true, 9999999999999999.0, ""},  // no NUL: all 16 bytes
  };
  for (const Case& c : cases) {
    absl::StatusOr<Version> v = DecodeVersion(Bytes(c.bytes));
    ASSERT_EQ(v.ok(), c.ok) << c.bytes << ": " << v.status();
    if (c.ok) {
      EXPECT_DOUBLE_EQ(v->value, c.value) << c.bytes;
    } else {
      EXPECT_THAT(v.status().message(), HasSubstr(c.error)) << c.bytes;
    }
  }
  const auto ours = EncodeVersion(kOurVersion);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(ours.data()), ours.size()),
            Padded("6.29", 16));
}

TEST(PerftestVersion, ThresholdsPickTheExchanges) {
  auto v = [](std::string_view t) { return *DecodeVersion(Bytes(Padded(t, 16))); };
  EXPECT_FALSE(Negotiates(v("6.06")));
  EXPECT_FALSE(Negotiates(v("6.27")));
  EXPECT_TRUE(Negotiates(v("6.28")));
  EXPECT_TRUE(Negotiates(v("6.29")));
  EXPECT_EQ(CmKeySize(v("6.28")), 56u);
  EXPECT_EQ(CmKeySize(v("6.29")), 64u);
}

TEST(PerftestMtu, TextOfTheEnum) {
  EXPECT_EQ(EncodeMtu(5), (std::array<uint8_t, 2>{'5', 0}));
  EXPECT_EQ(EncodeMtu(3), (std::array<uint8_t, 2>{'3', 0}));
  EXPECT_EQ(*DecodeMtu(Bytes(std::string("4\0", 2))), 4);
  EXPECT_EQ(*DecodeMtu(Bytes(std::string("1\0\0\0", 4))), 1);
  for (std::string bad : {std::string("0\0", 2), std::string("6\0", 2), std::string("\0\0", 2),
                          std::string("45", 2), std::string("x\0", 2)}) {
    EXPECT_FALSE(DecodeMtu(Bytes(bad)).ok()) << bad;
  }
  EXPECT_EQ(*DecodeU32(EncodeU32(4096)), 4096u);
  EXPECT_EQ(*DecodePageSize(EncodeU32(65536)), 65536u);
  for (uint32_t bad : {0u, 512u, 4095u, 1u << 21, 0xffffffffu}) {
    EXPECT_THAT(DecodePageSize(EncodeU32(bad)).status().message(), HasSubstr("not a page size"))
        << bad;
  }
  EXPECT_EQ(EncodeU32(64), (std::array<uint8_t, 4>{0, 0, 0, 64}));
}

Key SampleKey() {
  Key k;
  k.lid = 0x1a;
  k.out_reads = 0x10;
  k.qpn = 0x000123;
  k.psn = 0xabcdef;
  k.rkey = 0x00201f00;
  k.vaddr = 0x00005588a1b2c000;
  for (size_t i = 0; i < 16; ++i) k.gid[i] = static_cast<uint8_t>(i == 10 || i == 11 ? 0xff : i);
  k.srqn = 0;
  return k;
}

// The bytes perftest's sprintf makes (KEY_PRINT_FMT / KEY_PRINT_FMT_GID).
TEST(PerftestKey, TextAsPerftestPrintsIt) {
  const Key k = SampleKey();
  const std::vector<uint8_t> plain = EncodeKey(k, false);
  EXPECT_EQ(plain.size(), kKeySize);
  EXPECT_EQ(std::string(plain.begin(), plain.end() - 1),
            "001a:0010:000123:abcdef:00201f00:00005588a1b2c000:00000000");
  const std::vector<uint8_t> gid = EncodeKey(k, true);
  EXPECT_EQ(gid.size(), kKeySizeGid);
  EXPECT_EQ(std::string(gid.begin(), gid.end() - 1),
            "001a:0010:000123:abcdef:00201f00:00005588a1b2c000:"
            "00:01:02:03:04:05:06:07:08:09:ff:ff:0c:0d:0e:0f:00000000:");
  EXPECT_EQ(*DecodeKey(gid, true), k);
  Key no_gid = k;
  no_gid.gid = {};
  EXPECT_EQ(*DecodeKey(plain, false), no_gid);
}

TEST(PerftestKey, RefusesWhatPerftestWouldMisread) {
  const std::vector<uint8_t> good = EncodeKey(SampleKey(), true);
  struct Case {
    std::string name;
    std::vector<uint8_t> bytes;
    bool gid;
    std::string error;
  };
  std::vector<Case> cases;
  cases.push_back({"truncated", {good.begin(), good.end() - 5}, true, "103 bytes, not 108"});
  cases.push_back({"gid form where none is read", good, false, "both sides need -x"});
  cases.push_back({"no gid where one is read", EncodeKey(SampleKey(), false), true, "not 108"});
  std::vector<uint8_t> no_nul = good;
  no_nul.back() = ':';
  cases.push_back({"no NUL", no_nul, true, "NUL"});
  std::vector<uint8_t> bad_hex = good;
  bad_hex[6] = 'g';
  cases.push_back({"bad hex", bad_hex, true, "out_reads is not 4 hex digits"});
  std::vector<uint8_t> bad_sep = good;
  bad_sep[4] = '-';
  cases.push_back({"bad separator", bad_sep, true, "after lid"});
  std::vector<uint8_t> garbage(kKeySize, 'z');
  garbage.back() = 0;
  cases.push_back({"garbage", garbage, false, "hex digits"});
  for (const Case& c : cases) {
    absl::StatusOr<Key> k = DecodeKey(c.bytes, c.gid);
    ASSERT_FALSE(k.ok()) << c.name;
    EXPECT_THAT(k.status().message(), HasSubstr(c.error)) << c.name;
  }
}

TEST(PerftestKey, BinaryFormOverRdmaCm) {
  const Key k = SampleKey();
  for (size_t size : {size_t{56}, size_t{64}}) {
    const std::vector<uint8_t> b = EncodeCmKey(k, 3, size);
    ASSERT_EQ(b.size(), size);
    EXPECT_EQ(b[3], 0x1a);                          // lid, big-endian at 0
    EXPECT_EQ(b[size == 64 ? 63 : 55], 3);          // gid_index last
    EXPECT_EQ(b[size == 64 ? 40 + 10 : 42], 0xff);  // the GID after vaddr (and 6.29's marker)
    EXPECT_EQ(*DecodeCmKey(b), k);
  }
  EXPECT_FALSE(DecodeCmKey(std::vector<uint8_t>(55)).ok());
  std::vector<uint8_t> big_qpn = EncodeCmKey(k, 0, 56);
  big_qpn[8] = 1;  // qpn > 24 bits
  EXPECT_FALSE(DecodeCmKey(big_qpn).ok());
}

TEST(PerftestReport, FieldsByTheirOwnExchanges) {
  BwReport r{65536, 5000, 11000.5, 10990.25, 0.175849};
  const auto fields = EncodeBwReport(r);
  ASSERT_EQ(fields.size(), 5u);
  using Field = std::array<uint8_t, 8>;
  EXPECT_EQ(fields[0], (Field{0, 0, 0, 0, 0, 1, 0, 0}));  // 65536 big-endian
  EXPECT_EQ(fields[1], (Field{0, 0, 0, 0, 0, 0, 0x13, 0x88}));
  // 10990.25 is 0x40c5772000000000 in IEEE-754, sent big-endian.
  EXPECT_EQ(fields[3], (Field{0x40, 0xc5, 0x77, 0x20, 0, 0, 0, 0}));
  std::vector<uint8_t> all;
  for (const auto& f : fields) all.insert(all.end(), f.begin(), f.end());
  EXPECT_EQ(*DecodeBwReport(all), r);
  all.pop_back();
  EXPECT_FALSE(DecodeBwReport(all).ok());
  std::vector<uint8_t> nan(40, 0xff);
  EXPECT_THAT(DecodeBwReport(nan).status().message(), HasSubstr("finite"));
}

TEST(PerftestNegotiate, LayoutOfPerftest628) {
  Negotiate n;
  n.report_fmt = kReportGbits;
  n.size = 65536;
  n.iters = 5000;
  n.num_of_qps = 2;
  n.device_attr[kMaxQpRdAtomOffset] = 16;  // host order (little-endian)
  n.mlx5dv_comp_mask = 0x10;
  const std::vector<uint8_t> b = EncodeNegotiate(n);
  ASSERT_EQ(b.size(), kNegotiateSizeMlx5dv);
  EXPECT_EQ(b[11], kVerbWrite);  // verb @8, big-endian
  EXPECT_EQ(b[15], kTstBandwidth);
  EXPECT_EQ(b[27], kReportGbits);
  EXPECT_EQ(b[32 + 5], 0x01);  // size 65536 @32
  EXPECT_EQ(b[55], 2);         // num_of_qps @52
  EXPECT_EQ(b[59], 5);         // duration @56, 5 even without -D
  EXPECT_EQ(b[80 + kMaxQpRdAtomOffset], 16);
  EXPECT_EQ(b[319], 0x10);  // comp mask @312
  absl::StatusOr<Negotiate> back = DecodeNegotiate(b);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, n);
  EXPECT_EQ(back->MaxQpRdAtom(), 16);
  // The 312-byte build (no mlx5dv).
  n.mlx5dv = false;
  n.mlx5dv_comp_mask = 0;
  EXPECT_EQ(*DecodeNegotiate(EncodeNegotiate(n)), n);
  EXPECT_THAT(DecodeNegotiate(std::vector<uint8_t>(316)).status().message(),
              HasSubstr("316 bytes"));
  std::vector<uint8_t> bad_verb = b;
  bad_verb[11] = 9;
  EXPECT_THAT(DecodeNegotiate(bad_verb).status().message(), HasSubstr("verb = 9"));
}

TEST(PerftestNegotiate, FirstMismatchInPerftestsWords) {
  Negotiate a, b;
  EXPECT_EQ(FirstMismatch(a, b), std::nullopt);
  b.size = 2;
  b.report_fmt = kReportGbits;
  // report_fmt comes before size in perftest's order.
  EXPECT_EQ(FirstMismatch(a, b), " report_fmt mismatch: local=MBS, remote=GBS");
  b.report_fmt = a.report_fmt;
  EXPECT_EQ(FirstMismatch(a, b), " size mismatch: local=65536, remote=2");
  b = a;
  b.verb = kVerbRead;
  EXPECT_EQ(FirstMismatch(a, b), " verb mismatch: local=WRITE, remote=READ");
  b = a;
  b.device_attr[0] = 1;  // the device is compared apart (out_reads), never fatal
  b.mlx5dv = false;
  EXPECT_EQ(FirstMismatch(a, b), std::nullopt);
}

// What a real perftest 6.28 ib_write_bw client (built from tag perftest-26.01.5, with mlx5dv)
// sent on rxe0 in the VM rig, run as `ib_write_bw -d rxe0 -n 5000 -s 65536 10.77.0.1` against
// a recorder: version, page size, cache line, MTU, then its negotiation struct.
TEST(PerftestNegotiate, RecordedFrom628Client) {
  std::ifstream f(std::string(FABRIC_PERFTEST_TESTDATA) + "/perftest-6.28-client-prologue.bin",
                  std::ios::binary);
  const std::vector<uint8_t> b((std::istreambuf_iterator<char>(f)), {});
  ASSERT_EQ(b.size(), 16u + 4 + 4 + 2 + kNegotiateSizeMlx5dv);
  std::span<const uint8_t> at(b);
  absl::StatusOr<Version> v = DecodeVersion(at.subspan(0, 16));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->text, "6.28");
  EXPECT_TRUE(Negotiates(*v));
  EXPECT_EQ(*DecodeU32(at.subspan(16, 4)), 4096u);
  EXPECT_EQ(*DecodeU32(at.subspan(20, 4)), 64u);
  EXPECT_EQ(*DecodeMtu(at.subspan(24, 2)), 3);  // rxe on a 1500-byte netdev: 1024
  absl::StatusOr<Negotiate> n = DecodeNegotiate(at.subspan(26));
  ASSERT_TRUE(n.ok()) << n.status();
  Negotiate want;  // write_bw's defaults with -n 5000 -s 65536
  want.device_attr = n->device_attr;
  EXPECT_EQ(FirstMismatch(want, *n), std::nullopt);
  EXPECT_TRUE(n->mlx5dv);
  EXPECT_EQ(n->mlx5dv_comp_mask, 0u);  // not a Mellanox device
  EXPECT_EQ(n->MaxQpRdAtom(), 128);    // rxe's
  // And it re-encodes to the same bytes.
  EXPECT_EQ(EncodeNegotiate(*n), std::vector<uint8_t>(b.begin() + 26, b.end()));
}

}  // namespace
}  // namespace fabric::perftest
