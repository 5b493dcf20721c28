#include "agent/fabric/perftest/figures.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace fabric::perftest {
namespace {

using ::testing::HasSubstr;

BwRun MakeRun(std::vector<uint64_t> posted, std::vector<uint64_t> completed, uint64_t cq_mod = 1) {
  BwRun r;
  r.size = 65536;
  r.messages = posted.size();
  r.posted = std::move(posted);
  r.completed = std::move(completed);
  r.cq_mod = cq_mod;
  r.hz = 1e9;  // ticks are nanoseconds
  return r;
}

TEST(PerftestBw, AverageFromFirstPostToLastCompletion) {
  const BwReport r = *ComputeBw(MakeRun({0, 10, 20, 30}, {100, 200, 300, 400}));
  // 4 x 65536 bytes in 400 ns: 655.36 GB/s = 625000 MB/s (2^20) and 10 Mpps.
  EXPECT_DOUBLE_EQ(r.average, 625000.0);
  EXPECT_DOUBLE_EQ(r.msg_rate, 10.0);
  EXPECT_EQ(r.iters, 4u);
  EXPECT_EQ(r.size, 65536u);
  // Peak: the best post-to-completion mean, 100 ns per message (post 0 -> completion 0).
  EXPECT_DOUBLE_EQ(r.peak, 625000.0);
  BwRun g = MakeRun({0, 10, 20, 30}, {50, 200, 300, 400});
  g.gbits = true;
  const BwReport gr = *ComputeBw(g);
  EXPECT_DOUBLE_EQ(gr.average, 65536.0 * 4 * 8 / 400);  // bits per ns = Gb/s
  EXPECT_DOUBLE_EQ(gr.peak, 65536.0 * 8 / 50);
}

TEST(PerftestBw, PeakReadsOnlyModeratedCompletions) {
  // cq_mod 2 over 5 messages: completions are stamped at messages 1, 3 and the explicitly
  // signaled last one, 4. Entries 0 and 2 are never written by perftest: a tiny value there must
  // not be read.
  BwRun r = MakeRun({0, 10, 20, 30, 40}, {1, 100, 2, 200, 260}, 2);
  const BwReport b = *ComputeBw(r);
  // i=0,j=1: 100/2 = 50; i=2,j=3: 180/2 = 90; i=4,j=4: 220; i=0,j=4: 52 -> 50 ns per message.
  EXPECT_DOUBLE_EQ(b.peak, 65536.0 * 1e9 / (50 * 1048576.0));
  // Integer ticks as perftest's cycles: i=1,j=1 would be (100-10)/1 = 90; i=1,j=3: 190/3 = 63.
  r.posted = {0, 10, 20, 30, 40};
  r.completed = {0, 101, 0, 200, 260};
  EXPECT_DOUBLE_EQ(ComputeBw(r)->peak, 65536.0 * 1e9 / (50 * 1048576.0));  // 101/2 = 50
}

TEST(PerftestBw, WithoutPeakOneWindow) {
  BwRun r = MakeRun({1000}, {1000 + 3'000'000'000ull});
  r.messages = 150000;  // -D: completed in the sampled window
  r.peak = false;
  r.gbits = true;
  const BwReport b = *ComputeBw(r);
  EXPECT_DOUBLE_EQ(b.peak, 0);
  EXPECT_NEAR(b.average, 150000.0 * 65536 * 8 / 3e9, 1e-9);
}

TEST(PerftestBw, BadRunsAreErrors) {
  BwRun none = MakeRun({}, {});
  EXPECT_FALSE(ComputeBw(none).ok());
  BwRun short_run = MakeRun({0, 1, 2}, {5});
  EXPECT_THAT(ComputeBw(short_run).status().message(), HasSubstr("fewer timestamps"));
  BwRun backwards = MakeRun({10}, {5});
  EXPECT_THAT(ComputeBw(backwards).status().message(), HasSubstr("empty window"));
  BwRun no_clock = MakeRun({0}, {5});
  no_clock.hz = 0;
  EXPECT_FALSE(ComputeBw(no_clock).ok());
}

TEST(PerftestLat, AsPrintReportLat) {
  // 1 tick = 1 usec. Gaps 10 20 10 60 10: sorted 10 10 10 | 20 60 dropped as the tail.
  const LatFigures f = *ComputeLat(2, {0, 10, 30, 40, 100, 110}, 1, 1e6);
  EXPECT_EQ(f.iters, 6u);
  EXPECT_DOUBLE_EQ(f.t_min, 10);
  EXPECT_DOUBLE_EQ(f.t_max, 20);  // sorted[n]: the largest kept is followed by one dropped
  EXPECT_DOUBLE_EQ(f.typical, 10);
  EXPECT_DOUBLE_EQ(f.average, 10);
  EXPECT_DOUBLE_EQ(f.stdev, 0);
  EXPECT_DOUBLE_EQ(f.p99, 20);
  EXPECT_DOUBLE_EQ(f.p999, 20);
}

TEST(PerftestLat, HalfRoundTripsAndTruncatedDeviation) {
  // Gaps 2 4 6 8 100 200 ticks, half round trips: kept 1 2 3 4 usec.
  const LatFigures f = *ComputeLat(2, {0, 2, 6, 12, 20, 120, 320}, 2, 1e6);
  EXPECT_DOUBLE_EQ(f.typical, 2.5);  // even count: mean of the middle two, (6 + 4) / 2 ticks
  EXPECT_DOUBLE_EQ(f.average, 2.5);
  // perftest truncates each difference to an int: 1, 0, 0, -1 -> sqrt(2 / 4).
  EXPECT_DOUBLE_EQ(f.stdev, std::sqrt(0.5));
  EXPECT_DOUBLE_EQ(f.t_max, 50);
  EXPECT_DOUBLE_EQ(f.p99, 50);  // sorted[ceil(4 x 0.99)] = sorted[4]
  EXPECT_THAT(ComputeLat(2, {0, 1, 2}, 2, 1e6).status().message(), HasSubstr("at least 4"));
  EXPECT_FALSE(ComputeLat(2, {0, 5, 3, 9}, 2, 1e6).ok());
}

// A jittery run (a busy VM): a squared deviation beyond int's range is INT_MIN, as perftest's
// x86 build computes it (its stdev then prints as -nan or a wrong small figure), never UB.
TEST(PerftestLat, DeviationsBeyondIntAreWhatPerftestsIntMakesOfThem) {
  // Gaps 10 100000 10 200000 300000: kept 10 10 100000, average 33340.
  const LatFigures f = *ComputeLat(2, {0, 10, 100010, 100020, 300020, 600020}, 1, 1e6);
  EXPECT_DOUBLE_EQ(f.average, 33340);
  const double squares = 2.0 * 33330 * 33330 + std::numeric_limits<int>::min();
  EXPECT_DOUBLE_EQ(f.stdev, std::sqrt(squares / 3));
  // All beyond: the sum is negative and the deviation not a number, as stock prints it.
  const LatFigures g = *ComputeLat(2, {0, 10, 20, 200020, 500020, 900020}, 1, 1e6);
  EXPECT_TRUE(std::isnan(g.stdev));
}

TEST(PerftestLat, DurationWindow) {
  const LatDurationFigures f = *ComputeLatDuration(2, 1000, 3'000'000, 2, 1e6);
  EXPECT_DOUBLE_EQ(f.average, 1500);  // 3 s / 1000 / 2 in usec
  EXPECT_DOUBLE_EQ(f.tps, 1000 / 3.0);
  EXPECT_FALSE(ComputeLatDuration(2, 0, 5, 2, 1e6).ok());
}

}  // namespace
}  // namespace fabric::perftest
