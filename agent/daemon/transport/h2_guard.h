// Watches the bytes a client sends to the gRPC server for the HTTP/2 rapid reset (CVE-2023-44487):
// streams opened and at once cancelled (RST_STREAM), which gRPC 1.51 answers with a call each and
// no limit. Measured (tests/bench/soak_bench --bursts=reset): one connection of 100,000 such
// streams took the agent to 1.85 GB and 21 CPU-seconds. The relay (agent/daemon/transport/relay.h)
// feeds every client byte through this guard and closes a connection that resets streams faster
// than its budget. Only frame headers are read (9 bytes each); payloads are skipped, never parsed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/time/time.h"
#include "agent/common/token_bucket.h"

namespace fabric {

class H2Guard {
 public:
  // A token bucket per connection: `per_second` RST_STREAM frames a second, up to `burst` at
  // once. A well-behaved client cancels at most the streams it has open (--max-streams).
  H2Guard(double per_second, double burst);

  enum class Verdict { kOk, kResetFlood, kNotHttp2 };
  // The next bytes of the client's stream, in order.
  Verdict Feed(std::string_view bytes, absl::Time now);
  uint64_t resets() const { return resets_; }
  uint64_t frames() const { return frames_; }

 private:
  TokenBucket resets_allowed_;
  size_t preface_seen_ = 0;  // Of the 24-byte client connection preface.
  unsigned char header_[9] = {};
  size_t header_len_ = 0;
  uint64_t skip_ = 0;  // Payload bytes of the current frame still to pass.
  uint64_t resets_ = 0;
  uint64_t frames_ = 0;
  Verdict verdict_ = Verdict::kOk;  // Once not kOk, it stays.
};

}  // namespace fabric
