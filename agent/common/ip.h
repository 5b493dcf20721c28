// IP addresses as text and back, with the checks outside bytes need (length, embedded NUL), for
// the agent, fabricctl and the CNI plugin (free of protobuf).
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace fabric {

struct IpAddress {
  int family = 0;   // AF_INET or AF_INET6
  in6_addr addr{};  // AF_INET: the first 4 bytes, network order
};

// "10.0.0.1" or "fd00::1" (inet_pton's forms, no zone, no prefix). InvalidArgument otherwise,
// quoting an excerpt: "not an IP address: \"...\"".
absl::StatusOr<IpAddress> ParseIp(std::string_view text);

// inet_ntop of `addr` (AF_INET: its first 4 bytes); "<family N>" for another family.
std::string IpToString(int family, const in6_addr& addr);

// "HOST:PORT", "[V6]:PORT" or ":PORT" (every address), as every flag that names a TCP endpoint
// takes it: an IPv6 address goes in brackets; the port is 0..65535 (0 only where `allow_zero`,
// for listeners that let the kernel pick). The host is not resolved. InvalidArgument says what is
// wrong with an excerpt of the text and the accepted forms.
struct HostPort {
  std::string host;  // Without brackets; empty for ":PORT".
  uint16_t port = 0;
  bool bracketed = false;
};
absl::StatusOr<HostPort> ParseHostPort(std::string_view text, bool allow_zero = true);

// Dotted quad, surrounding white space allowed -> host byte order. Leading "+" or empty octets
// are refused.
absl::StatusOr<uint32_t> ParseIpv4(std::string_view s);
// Host byte order -> "a.b.c.d".
std::string FormatIpv4(uint32_t addr);
// "a.b.c.d/len" with the host bits cleared.
std::string FormatCidr(uint32_t addr, int prefix_len);

}  // namespace fabric
