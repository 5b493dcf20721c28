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
