// The GID parsers against arbitrary bytes: no crash, whatever parses formats back to text that
// parses to the same bytes, and a global IPv6 GID's text is an address holding those bytes.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "agent/common/ip.h"
#include "agent/rdma/gid.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view s(reinterpret_cast<const char*>(data), size);
  if (absl::StatusOr<fabric::rdma::GidBytes> g = fabric::rdma::ParseGid(s); g.ok()) {
    (void)fabric::rdma::GidIpv4(*g);
    if (std::optional<std::string> v6 = fabric::rdma::GidIpv6(*g)) {
      absl::StatusOr<fabric::IpAddress> ip = fabric::ParseIp(*v6);
      if (!ip.ok() || ip->family != AF_INET6 || std::memcmp(ip->addr.s6_addr, g->data(), 16) != 0 ||
          fabric::rdma::IsEmptyGidSlot(*g)) {
        std::abort();
      }
    }
    absl::StatusOr<fabric::rdma::GidBytes> again =
        fabric::rdma::ParseGid(fabric::rdma::FormatGid(*g));
    if (!again.ok() || *again != *g) std::abort();
  }
  (void)fabric::rdma::ParseGidKind(s);
  return 0;
}
