// Internal: the two transports' halves of a test, after the hello. probe.cc drives them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/fabric/probes/net.h"
#include "agent/fabric/probes/params.h"
#include "agent/fabric/probes/stats.h"

namespace fabric::probes {

// What a client's run measured, before the statistics.
struct Measurement {
  // Bandwidth: messages completed in the measured window, its first post and last completion,
  // and one mark per completion poll (cumulative from the window's start).
  uint64_t messages = 0;
  int64_t first_ns = 0;
  int64_t last_ns = 0;
  std::vector<CompletionMark> marks;
  // Latency: the post time of each measured iteration.
  std::vector<int64_t> posts;
  // Bandwidth with stamped posts (iterations mode): the time before each message's post, in
  // posting order across QPs (perftest's tposted, which its peak reads).
  std::vector<int64_t> post_ns;
};

// Turns a measurement into figures (bandwidth or latency per the test).
absl::Status FillResult(const ProbeParams& p, const Measurement& m, ProbeResult* r);

// The RDMA half: resources, connection and the measurement loops of one test.
class RdmaTest {
 public:
  enum class Role { kClient, kServer };
  // Opens what can be opened before the peer is known, so that a missing device or a down port
  // is reported before the test is accepted: the device, memory, CQs and QPs; with rdma_cm the
  // event channel, and on the server the listener bound to `cm_bind` (port: cm_port()).
  static absl::StatusOr<std::unique_ptr<RdmaTest>> Prepare(Role role, const ProbeParams& p,
                                                           const Endpoint& local,
                                                           const std::string& cm_bind,
                                                           const Canceller* cancel);
  virtual ~RdmaTest() = default;

  virtual uint16_t cm_port() const = 0;
  // Connects the QPs (exchange and INIT/RTR/RTS, or rdma_cm), exchanges rkeys and addresses,
  // then a barrier. `peer` is the peer's address (rdma_cm resolves it).
  virtual absl::Status Connect(Channel& ch, const std::string& peer, uint16_t cm_port) = 0;
  virtual absl::StatusOr<Measurement> RunClient() = 0;
  // The server's part until its loop ends; the caller then exchanges Done.
  virtual absl::Status RunServer(Channel& ch) = 0;
  // Releases every resource in reverse order of creation; failures (EIO after a device was
  // removed) are returned, and nothing is leaked either way.
  virtual absl::Status Release() = 0;

  virtual const std::string& device() const = 0;
  virtual int gid_index() const = 0;
  virtual uint8_t port() const = 0;
  // Where the buffer is: "host memory", or the GPU's name (VerbsResources::memory).
  virtual std::string memory() const = 0;
};

// The TCP half, over the control connection itself once both sides passed the barrier.
absl::StatusOr<Measurement> RunTcpClient(Channel& ch, const ProbeParams& p);
absl::Status RunTcpServer(Channel& ch, const ProbeParams& p);

}  // namespace fabric::probes
