// libFuzzer target for the agent config's `probes` section (operators' bytes): the config parser,
// which checks the section (a valid config must pass ValidateSchedule), and what the agent derives
// from a valid schedule; and the peer parser on the raw bytes. Nothing may crash; a schedule that
// passes the checks must yield parameters the engine accepts.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "agent/config/config.h"
#include "agent/fabric/probe_schedule/schedule.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fabric::probes;  // NOLINT
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)ParsePeer(text, 18515);
  absl::StatusOr<fabric::v1::AgentConfig> config = fabric::ParseConfig(text);
  if (!config.ok()) return 0;
  const fabric::v1::ProbeSchedule& s = config->probes();
  // ParseConfig checks every section: what it accepts passes the schedule's checks.
  if (!ValidateSchedule(s).ok()) std::abort();
  for (TestKind t : Tests(s)) {
    for (Transport tr : {Transport::kRdma, Transport::kTcp}) {
      if (!ValidateParams(ScheduledParams(s, t, tr)).ok()) std::abort();
    }
  }
  for (const std::string& p : s.peers()) {
    if (!ParsePeer(p, PeerPort(s)).ok()) std::abort();
  }
  if (NextRoundDelay(s, 0.5) <= absl::ZeroDuration()) std::abort();
  return 0;
}
