#include "agent/fabric/probes/stats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

namespace fabric::probes {
namespace {

TEST(ComputeLatency, DropsTheTwoLargestAndKnowsTheAnswers) {
  // 1..100 plus two outliers that must not show anywhere.
  std::vector<double> s(100);
  std::iota(s.begin(), s.end(), 1.0);
  s.push_back(5000);
  s.push_back(9000);
  absl::StatusOr<LatencyResult> r = ComputeLatency(s);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->samples, 100u);
  EXPECT_DOUBLE_EQ(r->min_us, 1);
  EXPECT_DOUBLE_EQ(r->max_us, 100);
  EXPECT_DOUBLE_EQ(r->typical_us, 50.5);  // even count: mean of the middle two
  EXPECT_DOUBLE_EQ(r->avg_us, 50.5);
  // Population standard deviation of 1..100: sqrt((100^2 - 1) / 12).
  EXPECT_NEAR(r->stdev_us, std::sqrt(9999.0 / 12), 1e-9);
  EXPECT_DOUBLE_EQ(r->p99_us, 99);    // nearest rank: ceil(0.99 * 100) = 99th
  EXPECT_DOUBLE_EQ(r->p999_us, 100);  // ceil(0.999 * 100) = 100th
}

TEST(ComputeLatency, OddCountMedianAndUnsortedInput) {
  absl::StatusOr<LatencyResult> r = ComputeLatency({3, 1, 2, 100, 200});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->samples, 3u);
  EXPECT_DOUBLE_EQ(r->typical_us, 2);
  EXPECT_DOUBLE_EQ(r->max_us, 3);
  EXPECT_DOUBLE_EQ(r->avg_us, 2);
  // perftest's integer arithmetic would give 0 here; the real value is sqrt(2/3).
  EXPECT_NEAR(r->stdev_us, std::sqrt(2.0 / 3), 1e-12);
}

TEST(ComputeLatency, FractionalStdevIsNotTruncated) {
  // Samples 1.0 and 1.5 repeated: stdev 0.25 exactly.
  std::vector<double> s;
  for (int i = 0; i < 50; ++i) {
    s.push_back(1.0);
    s.push_back(1.5);
  }
  s.push_back(1e6);
  s.push_back(1e6);
  absl::StatusOr<LatencyResult> r = ComputeLatency(s);
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->stdev_us, 0.25);
  EXPECT_DOUBLE_EQ(r->avg_us, 1.25);
  EXPECT_DOUBLE_EQ(r->typical_us, 1.25);
}

TEST(ComputeLatency, PercentilesOfALargeSet) {
  std::vector<double> s(10002);
  std::iota(s.begin(), s.end(), 1.0);  // 1..10002; 10001 and 10002 dropped
  absl::StatusOr<LatencyResult> r = ComputeLatency(s);
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->p99_us, 9900);
  EXPECT_DOUBLE_EQ(r->p999_us, 9990);
  EXPECT_DOUBLE_EQ(r->max_us, 10000);
}

TEST(ComputeLatency, TooFewSamples) {
  EXPECT_FALSE(ComputeLatency({}).ok());
  EXPECT_FALSE(ComputeLatency({1, 2}).ok());
  EXPECT_TRUE(ComputeLatency({1, 2, 3}).ok());
}

TEST(SamplesFromPosts, HalvesRoundTripsButNotReads) {
  const std::vector<int64_t> posts = {0, 2000, 5000, 9000};
  EXPECT_EQ(SamplesFromPosts(posts, 2), (std::vector<double>{1, 1.5, 2}));
  EXPECT_EQ(SamplesFromPosts(posts, 1), (std::vector<double>{2, 3, 4}));
  EXPECT_TRUE(SamplesFromPosts({5}, 2).empty());
}

TEST(ComputeBandwidth, AverageAndMessageRate) {
  // 1000 messages of 125000 bytes (10^9 bits) in one second: 1 Gb/s, 0.001 Mpps.
  absl::StatusOr<BandwidthResult> r = ComputeBandwidth(125000, 1000, 0, 1'000'000'000, {});
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->avg_gbps, 1.0);
  EXPECT_DOUBLE_EQ(r->msg_rate_mpps, 0.001);
  EXPECT_FALSE(r->peak_gbps.has_value());
}

TEST(ComputeBandwidth, PeakIsTheBestCompletionInterval) {
  // 100 messages of 1250 bytes (10^4 bits each). Intervals: 40 in 0.4 ms (1 Gb/s), 40 in
  // 0.2 ms (2 Gb/s), 20 in 0.4 ms (0.5 Gb/s).
  const std::vector<CompletionMark> marks = {{400'000, 40}, {600'000, 80}, {1'000'000, 100}};
  absl::StatusOr<BandwidthResult> r = ComputeBandwidth(1250, 100, 0, 1'000'000, marks);
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->avg_gbps, 1.0);
  ASSERT_TRUE(r->peak_gbps.has_value());
  EXPECT_DOUBLE_EQ(*r->peak_gbps, 2.0);
}

TEST(ComputeBandwidth, SameInstantMarksJoinTheNextInterval) {
  // A second poll at the same nanosecond must not divide by zero or make an infinite peak.
  const std::vector<CompletionMark> marks = {{500, 5}, {500, 10}, {1000, 20}};
  absl::StatusOr<BandwidthResult> r = ComputeBandwidth(125, 20, 0, 1000, marks);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->peak_gbps.has_value());
  EXPECT_TRUE(std::isfinite(*r->peak_gbps));
  // 15 messages (5 polled at 500 ns again, then 10 more) x 1000 bits over 500 ns = 30 Gb/s.
  EXPECT_DOUBLE_EQ(*r->peak_gbps, 30.0);
}

TEST(ComputeBandwidth, RejectsEmptyWindows) {
  EXPECT_FALSE(ComputeBandwidth(100, 0, 0, 10, {}).ok());
  EXPECT_FALSE(ComputeBandwidth(100, 10, 10, 10, {}).ok());
}

}  // namespace
}  // namespace fabric::probes
