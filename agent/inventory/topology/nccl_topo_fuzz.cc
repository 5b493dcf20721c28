// A topology file is the operator's or a vendor's bytes: the parser answers or refuses, within
// its bounds, and what it answers classifies without surprises.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "agent/inventory/topology/nccl_topo.h"
#include "agent/inventory/topology/topology.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view xml(reinterpret_cast<const char*>(data), size);
  auto topo = fabric::ParseNcclTopology(xml);
  if (!topo.ok()) return 0;
  if (topo->devices().empty() || topo->devices_size() > fabric::kMaxNcclTopoDevices) abort();
  for (const auto& d : topo->devices()) {
    if (d.bus_id().size() != 12) abort();
    for (const auto& p : d.path()) {
      if (p.rfind("cpu ", 0) != 0 && p.rfind("pci ", 0) != 0) abort();
    }
  }
  const auto& a = topo->devices(0);
  const auto& b = topo->devices(topo->devices_size() - 1);
  if (fabric::ClassifyByNcclTopology(a, b, "f").distance == fabric::v1::DISTANCE_CLASS_UNSPECIFIED)
    abort();
  return 0;
}
