// A token bucket: `per_second` tokens a second, at most `burst` held. Not thread-safe.
#pragma once

#include <algorithm>

#include "absl/time/time.h"

namespace fabric {

class TokenBucket {
 public:
  TokenBucket(double per_second, double burst)
      : per_second_(per_second), burst_(burst), tokens_(burst) {}
  // Takes one token at `now`; false when none is left.
  bool Take(absl::Time now) {
    if (last_ != absl::InfinitePast() && now > last_) {
      tokens_ = std::min(burst_, tokens_ + per_second_ * absl::ToDoubleSeconds(now - last_));
    }
    last_ = std::max(last_, now);
    if (tokens_ < 1) return false;
    tokens_ -= 1;
    return true;
  }

 private:
  double per_second_;
  double burst_;
  double tokens_;
  absl::Time last_ = absl::InfinitePast();
};

}  // namespace fabric
