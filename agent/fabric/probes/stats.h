// The arithmetic of the reports, kept pure so it can be checked against known answers. The
// definitions follow perftest's (see README.md), except where perftest is wrong: the standard
// deviation is computed in floating point, and percentiles index only the samples kept.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/fabric/probes/params.h"

namespace fabric::probes {

// Latency from per-iteration samples in microseconds (one round trip / 2, or a full read).
// Sorts, drops the two largest samples as perftest does (LAT_MEASURE_TAIL: a preempted
// iteration or a page fault must not move the max and the average), then: min, max, typical =
// median (mean of the middle two for an even count), average, population standard deviation,
// p99 and p99.9 by nearest rank (sorted[ceil(p * n) - 1]). Needs at least three samples.
absl::StatusOr<LatencyResult> ComputeLatency(std::vector<double> samples_us);

// Samples from post timestamps as perftest takes them: sample i is the time between post i and
// post i + 1 (a whole ping-pong), divided by `rtt_factor` (2 for write/send, 1 for read).
std::vector<double> SamplesFromPosts(const std::vector<int64_t>& post_ns, int rtt_factor);

// One poll of the completion queue that returned completions: when, and how many messages had
// completed in total by then.
struct CompletionMark {
  int64_t t_ns = 0;
  uint64_t messages = 0;
};

// Bandwidth of `messages` of `size` bytes between the first post and the last completion
// (perftest's average: bytes x iterations / (last completion - first post); Gb/s counts 10^9
// bits of payload). The peak is the best rate over one interval between successive completion
// polls, the first interval starting at the first post; it needs `marks` (cumulative, in time
// order) and is absent without them.
absl::StatusOr<BandwidthResult> ComputeBandwidth(uint64_t size, uint64_t messages,
                                                 int64_t first_post_ns, int64_t last_done_ns,
                                                 const std::vector<CompletionMark>& marks);

}  // namespace fabric::probes
