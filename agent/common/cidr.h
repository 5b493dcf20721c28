// Networks in CIDR form: IPv4 (Ipv4Net) for the GID subnet logic of selection, and either family
// (IpNet) for the probe responder's allow-list.
#pragma once

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "agent/common/ip.h"
#include "agent/common/strings.h"

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

// An IPv4 or IPv6 network. IPv4 addresses are kept as IPv4-mapped IPv6 (::ffff:a.b.c.d) with the
// prefix length counted from 96, so that a dual-stack socket's peer matches either way.
struct IpNet {
  std::array<uint8_t, 16> addr{};  // host bits cleared
  int len = 0;                     // 0..128, in IPv6 terms
  bool v4 = false;                 // written as IPv4 (for ToString)

  // "10.0.0.5" or "fe80::1" (a zone suffix "%eth0" is ignored) -> 16 bytes; IPv4 mapped.
  static absl::StatusOr<std::array<uint8_t, 16>> ParseAddress(std::string_view s) {
    absl::StatusOr<IpAddress> ip = ParseIp(s.substr(0, std::min(s.size(), s.find('%'))));
    if (!ip.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("not an IP address: \"", Av(s.substr(0, 64)), "\""));
    }
    std::array<uint8_t, 16> a{};
    if (ip->family == AF_INET) {
      a[10] = a[11] = 0xff;
      std::memcpy(&a[12], &ip->addr, 4);
    } else {
      std::memcpy(a.data(), &ip->addr, 16);
    }
    return a;
  }
  bool Contains(const std::array<uint8_t, 16>& a) const {
    for (int bit = 0; bit < len; bit += 8) {
      const int n = std::min(8, len - bit);
      const uint8_t mask = static_cast<uint8_t>(0xff << (8 - n));
      if ((a[bit / 8] & mask) != addr[bit / 8]) return false;
    }
    return true;
  }
  std::string ToString() const {
    char buf[INET6_ADDRSTRLEN] = {};
    if (v4) {
      inet_ntop(AF_INET, &addr[12], buf, sizeof buf);
      return absl::StrCat(buf, "/", len - 96);
    }
    inet_ntop(AF_INET6, addr.data(), buf, sizeof buf);
    return absl::StrCat(buf, "/", len);
  }
  bool operator==(const IpNet&) const = default;
};

// "10.0.0.0/24", "fd00::/64"; host bits are cleared. An address without "/" is one host.
inline absl::StatusOr<IpNet> ParseIpCidr(std::string_view s) {
  const size_t slash = s.find('/');
  const std::string_view host = s.substr(0, slash);
  if (host.find(':') == std::string_view::npos && slash != std::string_view::npos) {
    // IPv4: the one home of IPv4 CIDR syntax.
    absl::StatusOr<Ipv4Net> n = ParseIpv4Cidr(s);
    if (!n.ok()) return n.status();
    IpNet out;
    out.v4 = true;
    out.len = 96 + n->len;
    out.addr[10] = out.addr[11] = 0xff;
    for (int i = 0; i < 4; ++i) out.addr[12 + i] = static_cast<uint8_t>(n->addr >> (24 - 8 * i));
    return out;
  }
  absl::StatusOr<std::array<uint8_t, 16>> a = IpNet::ParseAddress(host);
  if (!a.ok()) return a.status();
  IpNet out;
  out.v4 = host.find(':') == std::string_view::npos;
  const int max = out.v4 ? 32 : 128;
  int len = max;
  if (slash != std::string_view::npos &&
      (!absl::SimpleAtoi(Av(s.substr(slash + 1)), &len) || len < 0 || len > max)) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad prefix length in \"", Av(s.substr(0, 64)), "\""));
  }
  out.len = out.v4 ? 96 + len : len;
  for (int bit = 0; bit < 128; bit += 8) {
    const int n = std::clamp(out.len - bit, 0, 8);
    out.addr[bit / 8] = static_cast<uint8_t>((*a)[bit / 8] & (0xff << (8 - n)));
  }
  return out;
}

}  // namespace fabric
