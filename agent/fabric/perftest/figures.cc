#include "agent/fabric/perftest/figures.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace fabric::perftest {
namespace {

constexpr double kMbytes = 0x100000;    // MB/sec: 2^20 bytes
constexpr double kGbits = 125000000.0;  // Gb/sec: 10^9 bits
constexpr size_t kLatTail = 2;          // LAT_MEASURE_TAIL: the largest samples dropped

// C's (int) of a double as perftest's x86 build computes it: a value outside int's range (a
// jittery run's squared deviation) becomes INT_MIN, the "integer indefinite" of cvttsd2si, and
// perftest then prints a deviation of -nan. In C++ that conversion is undefined, so it is spelled.
int PerftestInt(double v) {
  if (!(v > -2147483649.0 && v < 2147483648.0)) return std::numeric_limits<int>::min();
  return static_cast<int>(v);
}

}  // namespace

absl::StatusOr<BwReport> ComputeBw(const BwRun& run) {
  if (run.hz <= 0) return absl::InvalidArgumentError("bandwidth: no clock rate");
  if (run.messages == 0) return absl::InvalidArgumentError("bandwidth: no message completed");
  if (run.cq_mod == 0 || run.post_list == 0)
    return absl::InvalidArgumentError("bandwidth: zero moderation");
  const uint64_t n = run.messages;
  const size_t last = run.peak ? n - 1 : 0;
  if (run.posted.empty() || run.completed.size() <= last || (run.peak && run.posted.size() < n)) {
    return absl::InvalidArgumentError("bandwidth: fewer timestamps than messages");
  }
  if (run.completed[last] <= run.posted[0])
    return absl::InvalidArgumentError("bandwidth: an empty window");
  const double ff = run.gbits ? kGbits : kMbytes;
  const double ticks = static_cast<double>(run.completed[last] - run.posted[0]);
  BwReport r;
  r.size = run.size;
  r.iters = n;
  r.average = static_cast<double>(run.size) * static_cast<double>(n) * run.hz / (ticks * ff);
  r.msg_rate = static_cast<double>(n) * run.hz / (ticks * 1e6);
  if (!run.peak) return r;
  // The best mean time per message from any post to a moderated completion at or after it, in
  // whole ticks (perftest's cycles_t division).
  uint64_t best = std::numeric_limits<uint64_t>::max();
  auto consider = [&](uint64_t i, uint64_t j) {
    if (run.completed[j] < run.posted[i]) return;  // a clock step: perftest would wrap
    best = std::min(best, (run.completed[j] - run.posted[i]) / (j - i + 1));
  };
  for (uint64_t i = 0; i < n; i += run.post_list) {
    const uint64_t first = (i + 1 + run.cq_mod - 1) / run.cq_mod * run.cq_mod - 1;
    for (uint64_t j = first; j < n; j += run.cq_mod) consider(i, j);
    if (n % run.cq_mod) consider(i, n - 1);  // the last, signaled explicitly
  }
  if (best == 0 || best == std::numeric_limits<uint64_t>::max()) return r;  // peak stays 0.00
  const auto up = static_cast<uint64_t>(run.size) * static_cast<uint64_t>(run.hz);
  r.peak = static_cast<double>(up) / (static_cast<double>(best) * ff);
  return r;
}

absl::StatusOr<LatFigures> ComputeLat(uint64_t size, const std::vector<uint64_t>& posted,
                                      int rtt_factor, double hz) {
  if (hz <= 0 || rtt_factor < 1) return absl::InvalidArgumentError("latency: no clock rate");
  if (posted.size() < kLatTail + 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "latency: ", posted.size(), " iterations, at least ", kLatTail + 2, " needed"));
  }
  std::vector<uint64_t> delta;
  delta.reserve(posted.size() - 1);
  for (size_t i = 0; i + 1 < posted.size(); ++i) {
    if (posted[i + 1] < posted[i])
      return absl::InvalidArgumentError("latency: post times go backwards");
    delta.push_back(posted[i + 1] - posted[i]);
  }
  std::sort(delta.begin(), delta.end());
  const size_t n = delta.size() - kLatTail;
  const double q = hz / 1e6 * rtt_factor;  // ticks per reported microsecond
  const uint64_t median = (n - 1) % 2 ? (delta[n / 2] + delta[n / 2 - 1]) / 2 : delta[n / 2];
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += static_cast<double>(delta[i]) / q;
  const double average = sum / static_cast<double>(n);
  double squares = 0;
  for (size_t i = 0; i < n; ++i) {
    const int diff = PerftestInt(average - static_cast<double>(delta[i]) / q);
    squares += PerftestInt(std::pow(diff, 2));
  }
  LatFigures f;
  f.size = size;
  f.iters = posted.size();
  f.t_min = static_cast<double>(delta[0]) / q;
  f.t_max = static_cast<double>(delta[n]) / q;
  f.typical = static_cast<double>(median) / q;
  f.average = average;
  f.stdev = std::sqrt(squares / static_cast<double>(n));
  f.p99 = static_cast<double>(delta[static_cast<size_t>(std::ceil(n * 0.99))]) / q;
  f.p999 = static_cast<double>(delta[static_cast<size_t>(std::ceil(n * 0.999))]) / q;
  return f;
}

absl::StatusOr<LatDurationFigures> ComputeLatDuration(uint64_t size, uint64_t iters,
                                                      uint64_t window_ticks, int rtt_factor,
                                                      double hz) {
  if (hz <= 0 || rtt_factor < 1) return absl::InvalidArgumentError("latency: no clock rate");
  if (iters == 0 || window_ticks == 0)
    return absl::InvalidArgumentError("latency: nothing completed in the window");
  const double mhz = hz / 1e6;
  LatDurationFigures f;
  f.size = size;
  f.iters = iters;
  f.average = static_cast<double>(window_ticks) / mhz / rtt_factor / static_cast<double>(iters);
  f.tps = static_cast<double>(iters) / (static_cast<double>(window_ticks) / hz);
  return f;
}

}  // namespace fabric::perftest
