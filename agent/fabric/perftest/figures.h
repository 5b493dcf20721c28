// perftest's arithmetic, exactly (print_report_bw, print_report_lat, print_report_lat_duration in
// perftest_parameters.c, the same in 6.06 and 6.29), so that the same run gives the same numbers
// on either tool. Timestamps are ticks of one clock of `hz` ticks per second (perftest: TSC
// cycles; integer divisions happen in ticks, as perftest's do in cycles).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/fabric/perftest/wire.h"

namespace fabric::perftest {

struct BwRun {
  uint64_t size = 0;
  // Messages timed: iterations x QPs, or with -D the messages completed in the sampled window.
  uint64_t messages = 0;
  // Peak runs: posted[i] before post i and completed[j] at the poll that saw message j complete
  // (one entry per message; only every cq_mod-th and the last are read). Without peak, or with
  // -D: posted[0] at the start and completed[0] at the end of the window.
  std::vector<uint64_t> posted;
  std::vector<uint64_t> completed;
  uint64_t cq_mod = 1;
  uint64_t post_list = 1;
  bool peak = true;  // -N, -D, more than 20000 iterations: none (0.00)
  bool gbits = false;
  double hz = 0;
};

// Average = size x messages / (last completion - first post); peak = size / the smallest mean
// gap from a post to a later moderated completion, in whole ticks; message rate in Mpps.
absl::StatusOr<BwReport> ComputeBw(const BwRun& run);

struct LatFigures {
  uint64_t size = 0;
  uint64_t iters = 0;
  double t_min = 0, t_max = 0, typical = 0, average = 0, stdev = 0, p99 = 0, p999 = 0;  // usec
};

// From the post times of `iters` ping-pongs (or reads): samples are the gaps between successive
// posts divided by `rtt_factor` (2 for write and send: half a round trip; 1 for read); sorted, the
// two largest dropped; typical is the median in whole ticks; the standard deviation sums
// squares of differences truncated to whole microseconds (perftest's int); percentiles index
// sorted[ceil(n x p)]. Needs at least 4 posts.
absl::StatusOr<LatFigures> ComputeLat(uint64_t size, const std::vector<uint64_t>& posted,
                                      int rtt_factor, double hz);

// -D latency: the window's ticks over the iterations completed in it, and transactions per second.
struct LatDurationFigures {
  uint64_t size = 0;
  uint64_t iters = 0;
  double average = 0;  // usec
  double tps = 0;
};
absl::StatusOr<LatDurationFigures> ComputeLatDuration(uint64_t size, uint64_t iters,
                                                      uint64_t window_ticks, int rtt_factor,
                                                      double hz);

}  // namespace fabric::perftest
