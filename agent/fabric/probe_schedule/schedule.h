// The agent's probe schedule, as pure functions: the config section's checks and defaults, which
// local ports probe which peers with which parameters, when the next round starts, the results
// as the API's messages, their bounded history, and the health findings they imply. The threads,
// sockets and DNS are the daemon's (agent/daemon/workers/prober.h).
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/fabric/gpumem/gpu_request.h"
#include "agent/fabric/probe_schedule/probes_section.h"
#include "agent/fabric/probe_schedule/result_proto.h"
#include "agent/fabric/probes/params.h"
#include "fabric/v1/health.pb.h"
#include "fabric/v1/host.pb.h"
#include "fabric/v1/probe.pb.h"
#include "fabric/v1/select.pb.h"

namespace fabric::probes {

// The time from one round's start to the next: interval x (1 + (2u - 1) x jitter), `u` uniform
// in [0, 1) (the caller's random draw, so tests choose it).
absl::Duration NextRoundDelay(const v1::ProbeSchedule& s, double u);

// A local port the schedule probes from.
struct ProbeSource {
  std::string device;  // Empty: the TCP transport (no RDMA device on this host).
  uint32_t port = 0;
  bool operator==(const ProbeSource&) const = default;
};
// schedule.devices (port 1 of each, or the first ACTIVE port), else the ports BackendPorts()
// returns, one per device; no RDMA device at all: one TCP source.
std::vector<ProbeSource> ProbeSources(const v1::Host& host, const v1::SelectionPolicy& policy,
                                      const v1::ProbeSchedule& s);

// The peer's device to ask for: "same" (default) gives `local_device`, "" or "any" nothing.
std::string RemoteDevice(const v1::ProbeSchedule& s, const std::string& local_device);

// The local buffer of one scheduled test from `device` (the schedule's `memory`): the memory of
// the GPU paired with the device (PairingOf: the first such GPU in PCI order), NVIDIA's through
// CUDA or AMD's through ROCm, for RDMA bandwidth tests when GPU memory is asked. Otherwise
// nullopt, host memory, and `*why` says why when GPU memory was asked ("no GPU is paired with
// mlx5_4"); empty when host memory was asked or the test is a latency test (they poll their
// buffer from the CPU, in host memory by design).
std::optional<gpumem::GpuRequest> ScheduledGpu(const v1::Host& host,
                                               const v1::SelectionPolicy& policy,
                                               const v1::ProbeSchedule& s,
                                               const std::string& device, TestKind test,
                                               Transport transport, std::string* why);

// Fills port_rate_gbps, fraction_of_rate and degraded for an RDMA bandwidth result, from the
// local port in `host`; a `degraded_fraction` of 0 never marks a port degraded.
void RateShare(const v1::Host& host, double degraded_fraction, v1::ProbeResult* r);

// The latest successful RDMA bandwidth result of each (device, port, peer, test), newest first
// in `results`: a "probe" WARNING for every port whose latest result is degraded.
std::vector<v1::Finding> DegradedFindings(const std::vector<v1::ProbeResult>& newest_first);

// The results kept, newest first, bounded. Thread-safe.
class ResultHistory {
 public:
  explicit ResultHistory(uint32_t capacity = kDefaultHistory) : capacity_(capacity) {}
  // Assigns the id; returns the stored result.
  v1::ProbeResult Add(v1::ProbeResult r);
  void SetCapacity(uint32_t capacity);
  // Newest first; empty filter fields (port 0) match everything; limit 0: all.
  std::vector<v1::ProbeResult> List(std::string_view peer = {}, std::string_view device = {},
                                    std::string_view test = {}, uint32_t limit = 0,
                                    uint32_t port = 0) const;

 private:
  mutable std::mutex mu_;
  uint32_t capacity_;
  uint64_t next_id_ = 1;
  std::deque<v1::ProbeResult> results_;  // Newest first.
};

}  // namespace fabric::probes
