// The watchdog of the RDMA measurement loops (verbs_loops.cc).
#pragma once

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "agent/common/strings.h"
#include "agent/fabric/probes/clock.h"
#include "agent/fabric/probes/net.h"

namespace fabric::probes {

// Bounds a spin: expired once `timeout` passes without Progress(), on cancel, or when the
// peer closes the control connection or sends anything but a successful Done on it (no message
// is due during the measurement). The clock is read once every 64 idle ticks and the connection
// polled at most every 20 ms, so the spin stays tight.
class Spin {
 public:
  Spin(absl::Duration timeout, const Canceller* cancel, const Channel* watch = nullptr)
      : timeout_ns_(absl::ToInt64Nanoseconds(timeout)), cancel_(cancel), watch_(watch) {
    deadline_ = NowNs() + timeout_ns_;
    next_watch_ = deadline_ - timeout_ns_ + kWatchEveryNs;
  }
  void Progress() { progressed_ = true; }
  // A run that ends at a time (perftest's duration mode, from its own clock): the spin expires
  // then too, and ended() says that this, not a stall, ended it.
  void EndAt(int64_t ns) { end_ns_ = ns; }
  bool ended() const { return ended_; }
  bool Tick() {
    if ((++ticks_ & 63) != 0) return false;
    return Check();
  }
  absl::Status Why(std::string_view what) const {
    if (cancel_ != nullptr && cancel_->cancelled()) return absl::CancelledError("stopped");
    if (ended_) {
      return absl::DeadlineExceededError(
          absl::StrCat("the run's time was over while waiting for ", Av(what)));
    }
    if (peer_spoke_) {
      return absl::UnavailableError(absl::StrCat(
          "the peer closed the control connection or reported a failure while this side waited "
          "for ",
          Av(what)));
    }
    return absl::DeadlineExceededError(
        absl::StrCat("nothing happened for ", absl::FormatDuration(absl::Nanoseconds(timeout_ns_)),
                     " while waiting for ", Av(what), " (the peer is gone or stalled?)"));
  }

 private:
  static constexpr int64_t kWatchEveryNs = 20'000'000;
  bool Check() {
    if (cancel_ != nullptr && cancel_->cancelled()) return true;
    const int64_t now = NowNs();
    if (watch_ != nullptr && now >= next_watch_) {
      next_watch_ = now + kWatchEveryNs;
      switch (watch_->Peek()) {
        case Channel::Pending::kOther:
          peer_spoke_ = true;
          return true;
        case Channel::Pending::kSuccess:
          // The peer finished well, so what it sent last was acknowledged: its completion can
          // lag (rxe under load) but will come. Wait for it under the usual timeout.
          watch_ = nullptr;
          break;
        case Channel::Pending::kNothing:
        case Channel::Pending::kPartial:
          break;
      }
    }
    if (now >= end_ns_) {
      ended_ = true;
      return true;
    }
    if (progressed_) {
      progressed_ = false;
      deadline_ = now + timeout_ns_;
      return false;
    }
    return now >= deadline_;
  }
  int64_t timeout_ns_;
  int64_t deadline_;
  int64_t next_watch_;
  const Canceller* cancel_;
  const Channel* watch_;
  uint64_t ticks_ = 0;
  int64_t end_ns_ = INT64_MAX;
  bool ended_ = false;
  bool progressed_ = false;
  bool peer_spoke_ = false;
};

}  // namespace fabric::probes
