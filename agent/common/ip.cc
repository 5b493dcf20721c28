#include "agent/common/ip.h"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <algorithm>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "agent/common/excerpt.h"
#include "agent/common/strings.h"

namespace fabric {

absl::StatusOr<IpAddress> ParseIp(std::string_view text) {
  IpAddress a;
  a.family = text.find(':') == std::string_view::npos ? AF_INET : AF_INET6;
  // inet_pton reads a C string: an embedded NUL would cut the text short unnoticed.
  if (text.size() > INET6_ADDRSTRLEN || text.find('\0') != std::string_view::npos ||
      inet_pton(a.family, std::string(text).c_str(), &a.addr) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("not an IP address: ", Excerpt(text)));
  }
  return a;
}

absl::StatusOr<HostPort> ParseHostPort(std::string_view text, bool allow_zero) {
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        Excerpt(text), ": ", Av(why), " (expected HOST:PORT, [V6]:PORT or :PORT, port ",
        allow_zero ? 0 : 1, "..65535)"));
  };
  HostPort out;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos) return bad("no closing ]");
    out.host = std::string(text.substr(1, close - 1));
    std::string_view rest = text.substr(close + 1);
    if (rest.empty() || rest.front() != ':') return bad("no :PORT after ]");
    if (out.host.empty()) return bad("empty IPv6 address");
    port = rest.substr(1);
    out.bracketed = true;
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) return bad("no :PORT");
    out.host = std::string(text.substr(0, colon));
    port = text.substr(colon + 1);
    if (out.host.find(':') != std::string::npos) {
      return bad("an IPv6 address goes in brackets, e.g. [::1]:9464");
    }
  }
  if (out.host.find('\0') != std::string::npos) return bad("NUL in the host");
  uint32_t n = 0;
  if (port.empty() || port.size() > 5 ||
      !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      !absl::SimpleAtoi(Av(port), &n) || n > 65535 || (n == 0 && !allow_zero)) {
    return bad("the port is not a number in range");
  }
  out.port = static_cast<uint16_t>(n);
  return out;
}

std::string IpToString(int family, const in6_addr& addr) {
  char buf[INET6_ADDRSTRLEN] = {};
  if ((family != AF_INET && family != AF_INET6) ||
      inet_ntop(family, &addr, buf, sizeof(buf)) == nullptr) {
    return absl::StrCat("<family ", family, ">");
  }
  return buf;
}

absl::StatusOr<uint32_t> ParseIpv4(std::string_view s) {
  const absl::string_view t = absl::StripAsciiWhitespace(Av(s));
  auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat("not an IPv4 address: ", Excerpt(s)));
  };
  std::vector<absl::string_view> octets = absl::StrSplit(t, '.');
  if (octets.size() != 4) return bad();
  uint32_t addr = 0;
  for (absl::string_view o : octets) {
    uint32_t v;
    if (o.empty() || o.size() > 3 || !absl::SimpleAtoi(o, &v) || v > 255 ||
        !absl::ascii_isdigit(static_cast<unsigned char>(o[0]))) {
      return bad();
    }
    addr = (addr << 8) | v;
  }
  return addr;
}

std::string FormatIpv4(uint32_t addr) {
  return absl::StrFormat("%d.%d.%d.%d", addr >> 24, (addr >> 16) & 0xff, (addr >> 8) & 0xff,
                         addr & 0xff);
}

std::string FormatCidr(uint32_t addr, int prefix_len) {
  uint32_t mask = prefix_len <= 0 ? 0 : ~uint32_t{0} << (32 - std::min(prefix_len, 32));
  return absl::StrCat(FormatIpv4(addr & mask), "/", prefix_len);
}

}  // namespace fabric
