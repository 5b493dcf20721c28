// What a stock-perftest exchange is run with on our side (peer.h runs the tests,
// connect.h the exchange up to connected QPs): apart so that both take it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "agent/fabric/probes/access.h"
#include "agent/fabric/probes/params.h"

namespace fabric::probes {

// perftest's code for the verb of `test` (perftest::kVerbWrite, ...).
int32_t PerftestVerb(TestKind test);

struct PerftestServerOptions {
  // The flags both ends were given (perftest 6.06 does not send them; 6.28+ negotiate):
  // write_bw, size, iterations or duration, QPs; a client's tx depth and CQ moderation.
  ProbeParams params;
  bool gbits = false;  // --report_gbits (negotiated with 6.28+)
  int mtu = 0;         // -m: bytes (256..4096; the port's active MTU when above it); 0: the port's
  bool warm_up = false;  // --perform_warm_up: a tx depth of messages per QP before timing
  bool duplex = false;   // -b: the bandwidth test both ways at once (6.06 does not send it)
  Endpoint local;        // with --use_cuda/--use_cuda_bus_id/--use_rocm: the buffer in GPU memory
  std::string bind;
  uint16_t port = 18515;
  std::optional<AllowList> allow;  // unset: this host's subnets
  // Server, TCP exchange: a socket already listening, kept by the caller across clients (the
  // agent's: a client that comes while the last test ends waits in its backlog); -1: listen on
  // bind:port for this client alone.
  int listener = -1;
  // Server: called once a client is admitted, with the device its test will use, before the
  // exchange; an error turns the client away. The agent takes its device lock here, so its own
  // probes and a stock client's test take turns (the lock outlives the call: the caller's).
  std::function<absl::Status(const std::string& device)> admit;
};

}  // namespace fabric::probes
