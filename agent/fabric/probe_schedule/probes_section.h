// The config's `probes` section (fabric.v1.ProbeSchedule): its checks, which ParseConfig applies,
// and the defaults of its unset fields. The schedule that acts on it is the probe engine's
// (agent/fabric/probe_schedule/schedule.h); these stay in the probes namespace, as its users are.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/fabric/probes/params.h"
#include "fabric/v1/select.pb.h"

namespace fabric::probes {

inline constexpr uint32_t kDefaultHistory = 512;
inline constexpr uint32_t kMaxHistory = 100000;

// "HOST", "HOST:PORT", "[V6]:PORT" or a bare IPv6 address; "perftest:" before any of them: the
// peer runs a stock perftest server of the test (ib_write_bw ...; agent/fabric/perftest/peer.h),
// not our responder. `name` keeps the text as given.
inline constexpr std::string_view kPerftestPeerPrefix = "perftest:";
struct Peer {
  std::string name;
  std::string host;
  uint16_t port = 0;
  bool perftest = false;
  bool operator==(const Peer&) const = default;
};
absl::StatusOr<Peer> ParsePeer(std::string_view text, uint16_t default_port);

// The schedule's `memory` values besides "host" (the default, also when empty).
inline constexpr std::string_view kMemoryGpuDmabuf = "gpu-dmabuf";
inline constexpr std::string_view kMemoryGpuPeermem = "gpu-peermem";

// InvalidArgument naming the bad key ("probes.tests[1]: ...").
absl::Status ValidateSchedule(const v1::ProbeSchedule& s);

// Whether the schedule has anything to probe (static peers or a DNS name).
bool ScheduleEnabled(const v1::ProbeSchedule& s);

uint16_t PeerPort(const v1::ProbeSchedule& s);
absl::Duration Interval(const v1::ProbeSchedule& s);
double Jitter(const v1::ProbeSchedule& s);
absl::Duration StepTimeout(const v1::ProbeSchedule& s);
uint32_t HistorySize(const v1::ProbeSchedule& s);
std::vector<TestKind> Tests(const v1::ProbeSchedule& s);

// Parameters for one scheduled test: perftest's defaults, bounded for a background schedule
// (bandwidth 1000 iterations), with the schedule's size, iterations or duration.
ProbeParams ScheduledParams(const v1::ProbeSchedule& s, TestKind test, Transport transport);

}  // namespace fabric::probes
