// Kernel log text is whatever a driver (or a root user) printed: matching answers or not, never
// reads past the line, and what it reports is consistent with the line.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "agent/policy/health/log_rules.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  // The first line is the message, the rest the record's DEVICE= value.
  const size_t nl = in.find('\n');
  const std::string_view message = in.substr(0, nl);
  const std::string_view dict =
      nl == std::string_view::npos ? std::string_view() : in.substr(nl + 1);
  std::optional<fabric::LogMatch> m = fabric::MatchNicLog(message, dict);
  if (!m.has_value()) return 0;
  if (m->rule == nullptr) abort();
  // The device comes from the line or the dictionary, never from nowhere.
  if (!m->device.empty() && message.find(m->device) == std::string_view::npos &&
      dict.find(m->device) == std::string_view::npos) {
    abort();
  }
  fabric::LogDedup dedup;
  if (!dedup.Observe(m->rule->code, m->device, absl::UnixEpoch()).report) abort();
  return 0;
}
