#include "agent/daemon/transport/h2_guard.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/testing/hostile.h"

namespace fabric {
namespace {

const std::string kPreface(testing::kH2Preface);

std::string Frame(unsigned char type, uint32_t stream, const std::string& payload) {
  return testing::H2Frame(type, 0, stream, payload);
}

std::string Reset(uint32_t stream) { return testing::H2RstStream(stream); }

TEST(H2Guard, CountsFramesAcrossArbitrarySplits) {
  // A payload that looks like frame headers must be skipped, not parsed.
  const std::string fake_rst = Reset(1);
  std::string bytes = kPreface + Frame(0x4, 0, "") + Frame(0x1, 1, fake_rst + fake_rst) +
                      Frame(0x0, 1, std::string(70000 % 16384, 'x')) + Reset(1) + Reset(3);
  for (size_t chunk : {1u, 2u, 7u, 9u, 24u, 1000u, 100000u}) {
    H2Guard g(100, 100);
    const absl::Time t = absl::UnixEpoch();
    for (size_t i = 0; i < bytes.size(); i += chunk) {
      ASSERT_EQ(g.Feed(std::string_view(bytes).substr(i, chunk), t), H2Guard::Verdict::kOk);
    }
    EXPECT_EQ(g.frames(), 5u) << "chunk " << chunk;
    EXPECT_EQ(g.resets(), 2u) << "chunk " << chunk;
  }
}

TEST(H2Guard, Table) {
  struct Case {
    const char* name;
    double per_second, burst;
    int resets;
    absl::Duration spacing;
    H2Guard::Verdict want;
  } cases[] = {
      {"within the burst", 10, 50, 50, absl::ZeroDuration(), H2Guard::Verdict::kOk},
      {"one over the burst", 10, 50, 51, absl::ZeroDuration(), H2Guard::Verdict::kResetFlood},
      {"paced at the rate", 10, 5, 1000, absl::Milliseconds(100), H2Guard::Verdict::kOk},
      {"twice the rate", 10, 5, 1000, absl::Milliseconds(50), H2Guard::Verdict::kResetFlood},
      {"rapid reset", 128, 256, 100000, absl::Microseconds(1), H2Guard::Verdict::kResetFlood},
  };
  for (const Case& c : cases) {
    H2Guard g(c.per_second, c.burst);
    absl::Time t = absl::UnixEpoch();
    H2Guard::Verdict v = g.Feed(kPreface, t);
    for (int i = 0; i < c.resets && v == H2Guard::Verdict::kOk; ++i) {
      t += c.spacing;
      v = g.Feed(Reset(2 * static_cast<uint32_t>(i) + 1), t);
    }
    EXPECT_EQ(v, c.want) << c.name;
  }
}

TEST(H2Guard, NotHttp2AndTheVerdictStays) {
  H2Guard g(1, 1);
  EXPECT_EQ(g.Feed("GET / HTTP/1.1\r\n", absl::UnixEpoch()), H2Guard::Verdict::kNotHttp2);
  EXPECT_EQ(g.Feed(kPreface, absl::UnixEpoch()), H2Guard::Verdict::kNotHttp2);
  H2Guard flood(1, 1);
  EXPECT_EQ(flood.Feed(kPreface + Reset(1) + Reset(3), absl::UnixEpoch()),
            H2Guard::Verdict::kResetFlood);
  EXPECT_EQ(flood.Feed(Frame(0x4, 0, ""), absl::UnixEpoch() + absl::Hours(1)),
            H2Guard::Verdict::kResetFlood);
}

}  // namespace
}  // namespace fabric
