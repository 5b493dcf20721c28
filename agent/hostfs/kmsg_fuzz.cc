// /dev/kmsg records are kernel text plus whatever a root user wrote: the parser answers or
// refuses, never reads past the input, and what it accepts is consistent with its input.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "agent/hostfs/kmsg.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view record(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<fabric::KmsgRecord> r = fabric::ParseKmsgRecord(record);
  if (!r.ok()) return 0;
  // Unescaping only shortens text, and a record is bounded.
  if (size > fabric::kKmsgRecordMax) abort();
  if (r->message.size() + r->subsystem.size() + r->device.size() > size) abort();
  if (r->level < 0 || r->level > 7 || r->facility < 0 || r->facility > 0xff) abort();
  if (record.find('\n') == std::string_view::npos) abort();
  return 0;
}
