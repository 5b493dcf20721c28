#include "agent/rdma/gid.h"

#include <netinet/in.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/common/excerpt.h"
#include "agent/common/ip.h"
#include "agent/common/strings.h"

namespace fabric::rdma {
namespace {

// Surrounding white space, and NULs after the value (some drivers' sysfs values end "\n\0").
std::string_view TrimSpace(std::string_view s) {
  while (!s.empty() && s.back() == '\0') s.remove_suffix(1);
  while (!s.empty() && absl::ascii_isspace(static_cast<unsigned char>(s.front()))) {
    s.remove_prefix(1);
  }
  while (!s.empty() && absl::ascii_isspace(static_cast<unsigned char>(s.back()))) {
    s.remove_suffix(1);
  }
  return s;
}

absl::Status Invalid(std::string_view what, std::string_view s) {
  return absl::InvalidArgumentError(absl::StrCat("not ", Av(what), ": ", Excerpt(s)));
}

}  // namespace

absl::StatusOr<GidBytes> ParseGid(std::string_view s) {
  // Fixed layout "xxxx:xxxx:...:xxxx" (39 characters): parsed in place, as GID tables are
  // discovery's hottest loop.
  const std::string_view t = TrimSpace(s);
  if (t.size() != 39) return Invalid("a GID", s);
  GidBytes gid;
  for (size_t i = 0; i < 8; ++i) {
    if (i < 7 && t[5 * i + 4] != ':') return Invalid("a GID", s);
    int v = 0;
    for (size_t k = 0; k < 4; ++k) {
      const int d = HexDigit(t[5 * i + k]);
      if (d < 0) return Invalid("a GID", s);
      v = v * 16 + d;
    }
    gid[2 * i] = static_cast<uint8_t>(v >> 8);
    gid[2 * i + 1] = static_cast<uint8_t>(v & 0xff);
  }
  return gid;
}

std::string FormatGid(const GidBytes& gid) {
  std::string out;
  out.reserve(39);
  for (size_t i = 0; i < 8; ++i) {
    if (i > 0) out += ':';
    absl::StrAppendFormat(&out, "%02x%02x", gid[2 * i], gid[2 * i + 1]);
  }
  return out;
}

bool IsZeroGid(const GidBytes& gid) {
  return std::all_of(gid.begin(), gid.end(), [](uint8_t b) { return b == 0; });
}

bool IsEmptyGidSlot(const GidBytes& gid) {
  return std::all_of(gid.begin() + 8, gid.end(), [](uint8_t b) { return b == 0; });
}

bool IsLinkLocalGid(const GidBytes& gid) { return gid[0] == 0xfe && (gid[1] & 0xc0) == 0x80; }

bool IsGlobalIpv6Gid(const GidBytes& gid) {
  return !IsEmptyGidSlot(gid) && !GidIpv4(gid) && !IsLinkLocalGid(gid);
}

std::optional<std::string> GidIpv6(const GidBytes& gid) {
  if (!IsGlobalIpv6Gid(gid)) return std::nullopt;
  in6_addr a;
  std::memcpy(a.s6_addr, gid.data(), gid.size());
  return IpToString(AF_INET6, a);
}

std::optional<std::string> GidIpv4(const GidBytes& gid) {
  for (size_t i = 0; i < 10; ++i) {
    if (gid[i] != 0) return std::nullopt;
  }
  if (gid[10] != 0xff || gid[11] != 0xff) return std::nullopt;
  return absl::StrFormat("%d.%d.%d.%d", gid[12], gid[13], gid[14], gid[15]);
}

GidBytes Ipv4MappedGid(const std::array<uint8_t, 4>& ipv4) {
  GidBytes g{};
  g[10] = 0xff;
  g[11] = 0xff;
  std::copy(ipv4.begin(), ipv4.end(), g.begin() + 12);
  return g;
}

absl::StatusOr<GidKind> ParseGidKind(std::string_view s) {
  const std::string_view t = TrimSpace(s);
  if (t == "IB/RoCE v1") return GidKind::kIbOrRoceV1;
  if (t == "RoCE v2") return GidKind::kRoceV2;
  if (t == "IB") return GidKind::kIb;
  if (t == "RoCE v1") return GidKind::kRoceV1;
  return Invalid("a GID type", s);
}

}  // namespace fabric::rdma
