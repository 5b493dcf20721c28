// IPv4 networks in CIDR form, for the GID subnet logic of select.cc and env.cc.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "agent/common/strings.h"
#include "agent/discovery/parse.h"

namespace fabric {

struct Ipv4Net {
  uint32_t addr = 0;  // Host byte order, host bits cleared.
  int len = 0;

  static uint32_t Mask(int len) { return len <= 0 ? 0 : ~uint32_t{0} << (32 - len); }
  uint32_t first() const { return addr; }
  uint32_t last() const { return addr | ~Mask(len); }
  bool Contains(uint32_t a) const { return (a & Mask(len)) == addr; }
  std::string ToString() const { return FormatCidr(addr, len); }
};

// "10.224.0.0/24" -> {0x0ae00000, 24}. Host bits are cleared ("10.0.0.7/24" -> 10.0.0.0/24), as
// connected subnets may be written with the interface's own address.
inline absl::StatusOr<Ipv4Net> ParseIpv4Cidr(std::string_view s) {
  size_t slash = s.find('/');
  if (slash == std::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("not a CIDR (no '/'): \"", Av(s), "\""));
  }
  absl::StatusOr<uint32_t> addr = ParseIpv4(s.substr(0, slash));
  if (!addr.ok()) return addr.status();
  int len = 0;
  if (!absl::SimpleAtoi(Av(s.substr(slash + 1)), &len) || len < 0 || len > 32) {
    return absl::InvalidArgumentError(absl::StrCat("bad prefix length in \"", Av(s), "\""));
  }
  return Ipv4Net{*addr & Ipv4Net::Mask(len), len};
}

// The smallest network holding every address from `first` to `last`.
inline Ipv4Net CoveringNet(uint32_t first, uint32_t last) {
  uint32_t diff = first ^ last;
  int len = diff == 0 ? 32 : __builtin_clz(diff);
  return Ipv4Net{first & Ipv4Net::Mask(len), len};
}

}  // namespace fabric
