#include "agent/fabric/probes/stats.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace fabric::probes {
namespace {

// perftest's LAT_MEASURE_TAIL.
constexpr size_t kDroppedTail = 2;

double NearestRank(const std::vector<double>& sorted, size_t n, double p) {
  size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(n)));
  rank = std::clamp<size_t>(rank, 1, n);
  return sorted[rank - 1];
}

}  // namespace

absl::StatusOr<LatencyResult> ComputeLatency(std::vector<double> samples_us) {
  if (samples_us.size() < kDroppedTail + 1) {
    return absl::InvalidArgumentError(absl::StrCat("need at least ", kDroppedTail + 1,
                                                   " latency samples, got ", samples_us.size()));
  }
  std::sort(samples_us.begin(), samples_us.end());
  const size_t n = samples_us.size() - kDroppedTail;
  LatencyResult r;
  r.samples = n;
  r.min_us = samples_us[0];
  r.max_us = samples_us[n - 1];
  r.typical_us = n % 2 == 1 ? samples_us[n / 2] : (samples_us[n / 2 - 1] + samples_us[n / 2]) / 2;
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += samples_us[i];
  r.avg_us = sum / static_cast<double>(n);
  double sq = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = samples_us[i] - r.avg_us;
    sq += d * d;
  }
  r.stdev_us = std::sqrt(sq / static_cast<double>(n));
  r.p99_us = NearestRank(samples_us, n, 0.99);
  r.p999_us = NearestRank(samples_us, n, 0.999);
  return r;
}

std::vector<double> SamplesFromPosts(const std::vector<int64_t>& post_ns, int rtt_factor) {
  std::vector<double> out;
  if (post_ns.size() < 2 || rtt_factor < 1) return out;
  out.reserve(post_ns.size() - 1);
  for (size_t i = 0; i + 1 < post_ns.size(); ++i) {
    out.push_back(static_cast<double>(post_ns[i + 1] - post_ns[i]) / 1000.0 / rtt_factor);
  }
  return out;
}

absl::StatusOr<BandwidthResult> ComputeBandwidth(uint64_t size, uint64_t messages,
                                                 int64_t first_post_ns, int64_t last_done_ns,
                                                 const std::vector<CompletionMark>& marks) {
  if (messages == 0) return absl::InvalidArgumentError("no message completed");
  if (last_done_ns <= first_post_ns) {
    return absl::InvalidArgumentError("the measured window is empty (clock did not advance)");
  }
  const double seconds = static_cast<double>(last_done_ns - first_post_ns) / 1e9;
  const double bytes = static_cast<double>(size) * static_cast<double>(messages);
  BandwidthResult r;
  r.avg_gbps = bytes * 8 / seconds / 1e9;
  r.msg_rate_mpps = static_cast<double>(messages) / seconds / 1e6;
  if (!marks.empty()) {
    double peak = 0;
    int64_t t = first_post_ns;
    uint64_t done = 0;
    for (const CompletionMark& m : marks) {
      if (m.messages > done && m.t_ns > t) {
        const double gbps = static_cast<double>(m.messages - done) * static_cast<double>(size) * 8 /
                            (static_cast<double>(m.t_ns - t) / 1e9) / 1e9;
        peak = std::max(peak, gbps);
      }
      // Completions polled at the same instant as the previous ones join the next interval.
      if (m.t_ns > t) {
        t = m.t_ns;
        done = m.messages;
      }
    }
    r.peak_gbps = std::max(peak, r.avg_gbps);
  }
  return r;
}

}  // namespace fabric::probes
