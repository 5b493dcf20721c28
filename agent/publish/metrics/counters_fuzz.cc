// libFuzzer target for ParseCounterValue, the parser of sysfs counter files. It must return a
// value or an error, never crash, and a value it accepts must be what the digits say.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "agent/publish/metrics/port_counters.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view s(reinterpret_cast<const char*>(data), size);
  auto v = fabric::metrics::ParseCounterValue(s);
  if (!v.ok()) return 0;
  // Accepted: decimal digits (leading zeros allowed) and at most one trailing newline, whose
  // value prints back as the same digits without the zeros.
  std::string_view digits = s;
  if (!digits.empty() && digits.back() == '\n') digits.remove_suffix(1);
  while (digits.size() > 1 && digits.front() == '0') digits.remove_prefix(1);
  if (absl::StrCat(*v) != std::string(digits)) std::abort();
  return 0;
}
