#include "agent/fabric/probes/wire.h"

#include <gtest/gtest.h>

namespace fabric::probes::wire {
namespace {

ProbeParams SomeParams() {
  ProbeParams p = DefaultParams(TestKind::kReadBw);
  p.size = 4096;
  p.iterations = 12345;
  p.num_qps = 4;
  p.rdma_cm = true;
  p.post_list = 8;
  p.cq_mod = 16;
  return p;
}

QpInfo SomeQpInfo() {
  QpInfo q;
  q.mtu = 5;
  q.global = true;
  for (uint32_t i = 0; i < 3; ++i) {
    QpEndpoint e;
    e.qpn = 0x123456 + i;
    e.psn = 0xabcdef - i;
    e.gid[10] = 0xff;
    e.gid[11] = 0xff;
    e.gid[15] = static_cast<uint8_t>(i);
    e.lid = 7;
    e.rkey = 0xdeadbeef;
    e.addr = 0x7f0000001000ull + i * 4096;
    e.size = 4096;
    q.qps.push_back(e);
  }
  return q;
}

Hello AuthHello(const std::string& device) {
  Hello h{SomeParams(), device};
  h.auth = true;
  for (uint8_t i = 0; i < kNonceSize; ++i) h.nonce[i] = static_cast<uint8_t>(0xa0 + i);
  return h;
}

Challenge SomeChallenge() {
  Challenge c;
  for (uint8_t i = 0; i < kNonceSize; ++i) c.nonce[i] = i;
  for (uint8_t i = 0; i < kMacSize; ++i) c.mac[i] = static_cast<uint8_t>(0xff - i);
  return c;
}

TEST(Wire, RoundTripsEveryMessage) {
  const std::vector<Message> messages = {Hello{SomeParams(), ""},
                                         Hello{SomeParams(), "mlx5_1"},
                                         Accept{4791},
                                         Reject{"parameters differ"},
                                         SomeQpInfo(),
                                         Sync{7},
                                         Done{true, 99, ""},
                                         Done{false, 0, "completion error"},
                                         AuthHello(""),
                                         AuthHello("mlx5_1"),
                                         SomeChallenge(),
                                         Proof{SomeChallenge().mac}};
  for (const Message& m : messages) {
    const std::vector<uint8_t> frame = Encode(m);
    absl::StatusOr<Message> back = Decode(frame);
    ASSERT_TRUE(back.ok()) << TypeName(TypeOf(m)) << ": " << back.status();
    EXPECT_TRUE(*back == m) << TypeName(TypeOf(m));
  }
}

TEST(Wire, DurationModeHello) {
  ProbeParams p = DefaultParams(TestKind::kWriteLat);
  p.iterations = 0;
  p.duration = absl::Seconds(3);
  p.margin = absl::Milliseconds(500);
  absl::StatusOr<Message> back = Decode(Encode(Hello{p, ""}));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(std::get<Hello>(*back).params, p);
}

TEST(Wire, RejectsTruncatedFrames) {
  const std::vector<uint8_t> frame = Encode(SomeQpInfo());
  for (size_t n = 0; n < frame.size(); ++n) {
    EXPECT_FALSE(Decode(std::span(frame).first(n)).ok()) << n << " bytes";
  }
}

TEST(Wire, RejectsTrailingBytes) {
  std::vector<uint8_t> frame = Encode(Sync{1});
  frame.push_back(0);
  EXPECT_FALSE(Decode(frame).ok());
  // The same byte counted in the header length: the body has a trailing byte.
  frame[11] += 1;
  EXPECT_FALSE(Decode(frame).ok());
}

TEST(Wire, RejectsWrongMagicVersionAndType) {
  std::vector<uint8_t> frame = Encode(Sync{1});
  auto bad_magic = frame;
  bad_magic[0] ^= 1;
  absl::StatusOr<Message> m = Decode(bad_magic);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("magic"), std::string::npos);
  auto bad_version = frame;
  bad_version[5] = 2;
  m = Decode(bad_version);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("version"), std::string::npos);
  auto bad_type = frame;
  bad_type[7] = 99;
  EXPECT_FALSE(Decode(bad_type).ok());
  bad_type[7] = 0;
  EXPECT_FALSE(Decode(bad_type).ok());
}

TEST(Wire, RejectsAbsurdBodyLength) {
  std::vector<uint8_t> head = Encode(Sync{1});
  head.resize(kHeaderSize);
  head[8] = 0x7f;  // 2 GB body
  absl::StatusOr<Header> h = DecodeHeader(head);
  EXPECT_FALSE(h.ok());
  head[8] = 0;
  head[9] = 1;  // 0x00010001: 64 KiB + 1
  head[10] = 0;
  head[11] = 1;
  EXPECT_FALSE(DecodeHeader(head).ok());
}

// Overwrites the big-endian field at `offset` (in the body) of a Hello frame.
std::vector<uint8_t> HelloWith(size_t offset, uint64_t value, int bytes) {
  std::vector<uint8_t> f = Encode(Hello{SomeParams(), ""});
  for (int i = 0; i < bytes; ++i) {
    f[kHeaderSize + offset + i] = static_cast<uint8_t>(value >> (8 * (bytes - 1 - i)));
  }
  return f;
}

TEST(Wire, RejectsHostileHelloFields) {
  EXPECT_TRUE(Decode(HelloWith(0, 5, 1)).ok());
  EXPECT_FALSE(Decode(HelloWith(0, 0, 1)).ok());      // test 0
  EXPECT_FALSE(Decode(HelloWith(0, 7, 1)).ok());      // test 7
  EXPECT_FALSE(Decode(HelloWith(1, 3, 1)).ok());      // transport 3
  EXPECT_FALSE(Decode(HelloWith(2, 0x80, 1)).ok());   // unknown flag
  EXPECT_FALSE(Decode(HelloWith(3, 1, 1)).ok());      // reserved byte
  EXPECT_FALSE(Decode(HelloWith(4, 0, 8)).ok());      // size 0
  EXPECT_FALSE(Decode(HelloWith(4, ~0ull, 8)).ok());  // size 2^64 - 1
  EXPECT_FALSE(Decode(HelloWith(4, kMaxSize + 1, 8)).ok());
  EXPECT_FALSE(Decode(HelloWith(12, 0, 8)).ok());         // no iterations, no duration
  EXPECT_FALSE(Decode(HelloWith(12, ~0ull, 8)).ok());     // absurd iterations
  EXPECT_FALSE(Decode(HelloWith(28, 0, 4)).ok());         // tx depth 0
  EXPECT_FALSE(Decode(HelloWith(28, 1u << 31, 4)).ok());  // absurd tx depth
  EXPECT_FALSE(Decode(HelloWith(44, 0, 4)).ok());         // 0 QPs
  EXPECT_FALSE(Decode(HelloWith(44, 100000, 4)).ok());    // 100000 QPs
  // Iterations and a duration together.
  EXPECT_FALSE(Decode(HelloWith(20, 1000, 4)).ok());
}

TEST(Wire, HelloDeviceIsOptionalAndChecked) {
  // Without a device the body keeps its fixed size (what a responder of an older build reads).
  EXPECT_EQ(Encode(Hello{SomeParams(), ""}).size(), kHeaderSize + 48);
  const std::vector<uint8_t> named = Encode(Hello{SomeParams(), "mlx5_10"});
  ASSERT_EQ(named.size(), kHeaderSize + 48 + 2 + 7);
  absl::StatusOr<Message> back = Decode(named);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(std::get<Hello>(*back).device, "mlx5_10");

  // Hand-made device texts: empty, a path, a control character, too long, cut short.
  auto with_text = [](const std::string& text, int cut = 0) {
    std::vector<uint8_t> f = Encode(Hello{SomeParams(), ""});
    f.push_back(static_cast<uint8_t>(text.size() >> 8));
    f.push_back(static_cast<uint8_t>(text.size()));
    f.insert(f.end(), text.begin(), text.end() - cut);
    const uint32_t body = static_cast<uint32_t>(f.size() - kHeaderSize);
    for (int i = 0; i < 4; ++i) f[8 + i] = static_cast<uint8_t>(body >> (24 - 8 * i));
    return f;
  };
  EXPECT_TRUE(Decode(with_text("rxe0")).ok());
  EXPECT_FALSE(Decode(with_text("")).ok());
  EXPECT_FALSE(Decode(with_text("../../mlx5_0")).ok());
  EXPECT_FALSE(Decode(with_text("mlx5\n0")).ok());
  EXPECT_FALSE(Decode(with_text(std::string(64, 'a'))).ok());
  EXPECT_TRUE(Decode(with_text(std::string(63, 'a'))).ok());
  EXPECT_FALSE(Decode(with_text("mlx5_0", 2)).ok());
}

TEST(Wire, DeviceNames) {
  EXPECT_TRUE(IsValidDeviceName("mlx5_0"));
  EXPECT_TRUE(IsValidDeviceName("bnxt_re0"));
  EXPECT_TRUE(IsValidDeviceName("rdmap1s0f0.1-x"));
  EXPECT_FALSE(IsValidDeviceName(""));
  EXPECT_FALSE(IsValidDeviceName("mlx5 0"));
  EXPECT_FALSE(IsValidDeviceName("a/b"));
  EXPECT_FALSE(IsValidDeviceName(std::string("a\0b", 3)));
}

TEST(Wire, RejectsInconsistentQpInfo) {
  std::vector<uint8_t> f = Encode(SomeQpInfo());
  auto more = f;
  more[kHeaderSize + 3] = 200;  // claims 200 QPs in a body holding 3
  EXPECT_FALSE(Decode(more).ok());
  auto zero = f;
  zero[kHeaderSize + 2] = 0;
  zero[kHeaderSize + 3] = 0;
  EXPECT_FALSE(Decode(zero).ok());
  auto mtu = f;
  mtu[kHeaderSize] = 9;
  EXPECT_FALSE(Decode(mtu).ok());
  auto qpn = f;
  qpn[kHeaderSize + 4] = 0x01;  // QP number above 24 bits
  EXPECT_FALSE(Decode(qpn).ok());
}

TEST(Wire, TextIsBoundedAndSanitized) {
  std::vector<uint8_t> f = Encode(Reject{std::string("bad\nline\x1b[31m")});
  absl::StatusOr<Message> m = Decode(f);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(std::get<Reject>(*m).reason, "bad?line?[31m");
  // A text length beyond its bound.
  std::vector<uint8_t> body = {0x10, 0x00};  // 4096
  body.resize(2 + 4096, 'a');
  EXPECT_FALSE(DecodeBody(Type::kReject, body).ok());
  // A text length beyond the body.
  EXPECT_FALSE(DecodeBody(Type::kReject, std::vector<uint8_t>{0x00, 0x05, 'a'}).ok());
  // Long texts are cut when encoding rather than refused by the peer.
  absl::StatusOr<Message> cut = Decode(Encode(Reject{std::string(5000, 'x')}));
  ASSERT_TRUE(cut.ok());
  EXPECT_EQ(std::get<Reject>(*cut).reason.size(), kMaxText);
}

TEST(Wire, DoneFlagMustBeBoolean) {
  std::vector<uint8_t> f = Encode(Done{true, 1, ""});
  f[kHeaderSize] = 2;
  EXPECT_FALSE(Decode(f).ok());
}

// The secret exchange's messages: fixed sizes, every byte carried, nothing else accepted.
TEST(Wire, AuthMessagesHaveFixedLayouts) {
  // Flags bit 1 says a nonce follows the fixed body, before the optional device.
  const std::vector<uint8_t> hello = Encode(AuthHello("rxe0"));
  ASSERT_EQ(hello.size(), kHeaderSize + 48 + kNonceSize + 2 + 4);
  EXPECT_EQ(hello[kHeaderSize + 2], 1 | 2);  // rdma_cm | auth
  EXPECT_EQ(hello[kHeaderSize + 48], 0xa0);
  EXPECT_EQ(hello[kHeaderSize + 48 + kNonceSize - 1], 0xaf);
  const std::vector<uint8_t> challenge = Encode(SomeChallenge());
  ASSERT_EQ(challenge.size(), kHeaderSize + kNonceSize + kMacSize);
  EXPECT_EQ(challenge[7], 7);
  EXPECT_EQ(challenge[kHeaderSize + kNonceSize], 0xff);
  const std::vector<uint8_t> proof = Encode(Proof{SomeChallenge().mac});
  ASSERT_EQ(proof.size(), kHeaderSize + kMacSize);
  EXPECT_EQ(proof[7], 8);
  for (const std::vector<uint8_t>& frame : {hello, challenge, proof}) {
    for (size_t n = 0; n < frame.size(); ++n) {
      EXPECT_FALSE(Decode(std::span(frame).first(n)).ok()) << n << " bytes";
    }
    std::vector<uint8_t> longer = frame;
    longer.push_back(0);
    longer[11] = static_cast<uint8_t>(longer[11] + 1);
    EXPECT_FALSE(Decode(longer).ok());
  }
  // A hello that claims a nonce but carries none.
  std::vector<uint8_t> no_nonce = Encode(Hello{SomeParams(), ""});
  no_nonce[kHeaderSize + 2] |= 2;
  EXPECT_FALSE(Decode(no_nonce).ok());
  // Unknown hello flags stay refused.
  std::vector<uint8_t> bad_flags = Encode(Hello{SomeParams(), ""});
  bad_flags[kHeaderSize + 2] |= 4;
  EXPECT_FALSE(Decode(bad_flags).ok());
}

}  // namespace
}  // namespace fabric::probes::wire
