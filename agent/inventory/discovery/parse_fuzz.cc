// libFuzzer target for every parser of sysfs/procfs bytes. The first byte picks the parser so one
// corpus covers them all; parsers must return an error, never crash, on any input.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "agent/inventory/discovery/parse.h"
#include "agent/rdma/gid.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  using namespace ::fabric;  // NOLINT
  const std::string_view s(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 17) {
    case 0:
      (void)ParseInt(s);
      break;
    case 1:
      (void)ParseHex(s);
      break;
    case 2:
      (void)ParsePciAddress(s);
      break;
    case 3:
      (void)ParseRateGbps(s);
      (void)RateLanes(s);
      break;
    case 4:
      (void)ParsePortState(s);
      break;
    case 5:
      (void)ParsePhysState(s);
      break;
    case 6:
      (void)ParseLinkLayer(s);
      break;
    case 7:
      (void)ParseNodeType(s);
      break;
    case 8:
      if (auto gid = rdma::ParseGid(s); gid.ok()) (void)rdma::GidIpv4(*gid);
      break;
    case 9:
      (void)ParseGidType(s, v1::LINK_LAYER_ETHERNET);
      break;
    case 10:
      (void)ParsePciLinkSpeed(s);
      break;
    case 11:
      (void)ParseMac(s);
      break;
    case 12:
      (void)ParseGuid(s);
      break;
    case 13:
      (void)ParseIdList(s);
      break;
    case 14:
      if (auto routes = ParseProcNetRoute(s); routes.ok()) {
        for (const auto& r : *routes) (void)MaskToPrefixLen(r.mask);
      }
      break;
    case 15:
      (void)ParseIpv6DefaultRouteIfaces(s);
      break;
    case 16:
      (void)ParseProcModules(s);
      (void)ParseIpv4(s);
      break;
  }
  return 0;
}
