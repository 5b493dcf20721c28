// The GID parsers against arbitrary bytes: no crash, and whatever parses formats back to text
// that parses to the same bytes.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "agent/rdma/gid.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view s(reinterpret_cast<const char*>(data), size);
  if (absl::StatusOr<fabric::rdma::GidBytes> g = fabric::rdma::ParseGid(s); g.ok()) {
    (void)fabric::rdma::GidIpv4(*g);
    absl::StatusOr<fabric::rdma::GidBytes> again =
        fabric::rdma::ParseGid(fabric::rdma::FormatGid(*g));
    if (!again.ok() || *again != *g) std::abort();
  }
  (void)fabric::rdma::ParseGidKind(s);
  return 0;
}
