// A state file is whatever lies under the state directory: parsing and loading it answers or
// refuses, never crashes, and what loads saves and loads again to the same findings.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "agent/policy/health/memory.h"

namespace {

bool Same(const std::vector<fabric::v1::Finding>& a, const std::vector<fabric::v1::Finding>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].SerializeAsString() != b[i].SerializeAsString()) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using fabric::FindingMemory;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<fabric::v1::HealthMemoryState> state = FindingMemory::ParseState(bytes);
  if (!state.ok()) return 0;
  fabric::MemoryOptions options;
  options.max_findings = 64;
  options.max_series = 64;
  options.max_events_per_series = 16;
  const fabric::MemoryClock now{absl::Hours(24 * 30), absl::FromUnixSeconds(1700000000)};
  FindingMemory m(options);
  // Another boot always loads empty.
  absl::StatusOr<FindingMemory::Loaded> other = m.Load(*state, "\x01other", now);
  if (other.ok() && (!other->reset || m.size() != 0)) abort();
  absl::StatusOr<FindingMemory::Loaded> loaded = m.Load(*state, state->boot_id(), now);
  if (!loaded.ok()) {
    if (m.size() != 0 || m.series() != 0) abort();  // Refused: left empty.
    return 0;
  }
  const std::vector<fabric::v1::Finding> first = m.Findings(now);
  FindingMemory again(options);
  absl::StatusOr<FindingMemory::Loaded> reloaded =
      again.Load(m.Save(state->boot_id()), state->boot_id(), now);
  if (!reloaded.ok() || reloaded->reset) abort();
  if (!Same(again.Findings(now), first)) abort();
  // It goes on working: what was loaded is a memory like any other.
  const fabric::MemoryClock later{now.boot + absl::Minutes(1), now.wall + absl::Minutes(1)};
  for (const fabric::v1::Finding& f : first) {
    m.Event("fuzz", f, later);
    m.Flap(f.subject(), "fuzz", later);
  }
  m.Update("fuzz", first, later);
  if (m.size() > options.max_findings || m.series() > options.max_series) abort();
  for (const fabric::v1::Finding& f : m.Findings(later)) {
    if (f.first_seen().seconds() > f.last_seen().seconds()) abort();
  }
  return 0;
}
