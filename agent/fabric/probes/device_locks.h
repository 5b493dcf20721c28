// One test at a time per device, shared by our responder, the stock-perftest responder and the
// agent's own probes; and the reasons a refused client is told.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "absl/time/time.h"

namespace fabric::probes {

inline constexpr uint16_t kDefaultPort = 18515;  // perftest's

// A responder refuses a test on a device that is already under test with a reason starting
// with this; the client then fails with ResourceExhausted, which a scheduler may retry.
inline constexpr char kBusyReason[] = "busy: ";
// A responder refuses a peer past its rate limit with a reason starting with this; the client
// fails with ResourceExhausted as for busy.
inline constexpr char kRateLimitReason[] = "rate limit: ";
// The default of --rate / --probe-rate: tests a minute per peer address.
inline constexpr uint32_t kDefaultRatePerMinute = 6;

// One test at a time per device: a responder's tests and a host's own probes (the agent's
// schedule) take the device's lock for the whole test. A host's own probe of its own responder
// is one test, not two: its hold admits its connection (Admit), and the responder's side of
// that very connection joins the hold instead of being refused as busy. Thread-safe.
class DeviceLocks {
 public:
  class Hold {
   public:
    Hold(Hold&& o) noexcept : locks_(std::exchange(o.locks_, nullptr)), key_(std::move(o.key_)) {}
    Hold& operator=(Hold&& o) noexcept {
      if (this != &o) {
        if (locks_ != nullptr) locks_->Release(key_);
        locks_ = std::exchange(o.locks_, nullptr);
        key_ = std::move(o.key_);
      }
      return *this;
    }
    Hold(const Hold&) = delete;
    ~Hold();
    // The connection ("ADDR:PORT" of the client's end) whose responder side may join this hold
    // once; set after connecting, before the hello.
    void Admit(const std::string& connection);

   private:
    friend class DeviceLocks;
    Hold(DeviceLocks* locks, std::string key) : locks_(locks), key_(std::move(key)) {}
    DeviceLocks* locks_;
    std::string key_;
  };
  // `key` is the device name ("tcp" for the TCP transport). Empty optional when it is held,
  // unless `connection` (the peer's "ADDR:PORT", as the responder sees it) is the one the
  // holder admitted: then the hold is shared for this test.
  std::optional<Hold> TryAcquire(const std::string& key, const std::string& connection = "");
  // Waits up to `timeout` for the device.
  std::optional<Hold> Acquire(const std::string& key, absl::Duration timeout);
  bool held(const std::string& key) const;

 private:
  struct Entry {
    int holders = 0;
    std::string admitted;  // empty: none
  };
  void Release(const std::string& key);
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Entry> busy_;
};

}  // namespace fabric::probes
