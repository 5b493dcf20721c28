// The probes' clock: CLOCK_MONOTONIC_RAW through clock_gettime (the vDSO on x86 and arm64, tens
// of nanoseconds a read). Raw, so NTP slewing never stretches a measurement; the cycle counter
// would need calibration and is not portable.
#pragma once

#include <time.h>

#include <algorithm>
#include <cstdint>

#include "absl/time/time.h"

namespace fabric::probes {

inline constexpr const char* kClockName = "CLOCK_MONOTONIC_RAW";

inline int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// A point on the same clock after which a step has failed.
class Deadline {
 public:
  static Deadline In(absl::Duration d) {
    return Deadline(NowNs() + absl::ToInt64Nanoseconds(std::max(d, absl::ZeroDuration())));
  }
  static Deadline At(int64_t ns) { return Deadline(ns); }
  int64_t ns() const { return ns_; }
  bool Passed() const { return NowNs() >= ns_; }
  bool Passed(int64_t now) const { return now >= ns_; }
  // For poll(2): at least 1 ms while not passed, so a short wait still waits.
  int RemainingMs() const {
    const int64_t left = ns_ - NowNs();
    if (left <= 0) return 0;
    return static_cast<int>(std::min<int64_t>((left + 999'999) / 1'000'000, 1 << 30));
  }

 private:
  explicit Deadline(int64_t ns) : ns_(ns) {}
  int64_t ns_;
};

}  // namespace fabric::probes
