// What one test against a responder is asked to do: the client's side of RunProbe (probe.h) and
// of a stock perftest peer (agent/fabric/perftest/peer.h), below both so that each takes it
// without the other.
#pragma once

#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "agent/fabric/probes/device_locks.h"
#include "agent/fabric/probes/net.h"
#include "agent/fabric/probes/params.h"

namespace fabric::probes {

struct ProbeSpec {
  ProbeParams params;
  std::string host;  // the responder
  uint16_t port = kDefaultPort;
  Endpoint local;
  // The responder's device to test against; empty: the responder's choice.
  std::string remote_device;
  // Optional: Cancel() from another thread ends the probe with Cancelled.
  const Canceller* cancel = nullptr;
  // Optional: the shared secret's file (auth.h), read on every call. Set: the responder must
  // prove it knows the same secret, and this side proves it too.
  std::string secret_file;
  // A refused connection (nothing listens) fails at once, as perftest does; retried for this
  // long when set (a responder that is starting).
  absl::Duration connect_retry = absl::ZeroDuration();
  // The responder is a stock perftest server of the test (a "perftest:" peer): perftest's own
  // protocol (agent/fabric/perftest/peer.h); no remote device and no secret (a stock server has
  // neither).
  bool perftest = false;
  // Optional: the device lock this test holds; its connection is admitted to it (DeviceLocks),
  // so that a responder sharing the locks (this agent's own) serves it instead of "busy".
  DeviceLocks::Hold* hold = nullptr;
};

}  // namespace fabric::probes
