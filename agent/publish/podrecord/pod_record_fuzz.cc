// ParseRecord over arbitrary bytes (the records directory is world-readable, its files written by
// fabric-cni as root but read in every pod): no crash, no unbounded work; what parses renders and
// parses back the same.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "agent/publish/podrecord/pod_record.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<fabric::podrecord::PodRecord> r = fabric::podrecord::ParseRecord(bytes);
  if (!r.ok()) return 0;
  const std::string again = fabric::podrecord::RecordJson(*r);
  absl::StatusOr<fabric::podrecord::PodRecord> back = fabric::podrecord::ParseRecord(again);
  if (!back.ok() || fabric::podrecord::RecordJson(*back) != again) std::abort();
  return 0;
}
