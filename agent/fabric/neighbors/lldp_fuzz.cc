// libFuzzer target for the LLDP parser: any host or switch on the segment can send these bytes.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "agent/common/k8s_label.h"
#include "agent/fabric/neighbors/lldp.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  if (auto n = fabric::neighbors::ParseLldpFrame(bytes); n.ok()) {
    // Every rendered string is bounded, and the label value is always a valid one.
    if (n->system_name.size() > fabric::neighbors::kMaxLldpText ||
        n->chassis_id.size() > fabric::neighbors::kMaxLldpText ||
        !fabric::IsValidLabelValue(fabric::neighbors::SwitchLabelValue(*n))) {
      __builtin_trap();
    }
  }
  (void)fabric::neighbors::ParseLldpdu(bytes);
  return 0;
}
