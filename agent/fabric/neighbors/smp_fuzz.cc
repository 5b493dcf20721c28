// libFuzzer target for the SMP response decoders: a response is whatever the far node (or
// anything on the subnet that can answer QP0) puts in it.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "agent/fabric/neighbors/smp.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view mad(reinterpret_cast<const char*>(data), size);
  // The TID of the seeds (0x12345678); other values exercise the mismatch path.
  constexpr uint64_t kTid = 0x12345678;
  (void)fabric::neighbors::ParseNodeInfoResponse(mad, kTid);
  if (auto d = fabric::neighbors::ParseNodeDescriptionResponse(mad, kTid); d.ok()) {
    if (d->text.size() > 255) __builtin_trap();
  }
  (void)fabric::neighbors::SmpResponseData(mad, fabric::neighbors::kAttrPortInfo, kTid);
  return 0;
}
