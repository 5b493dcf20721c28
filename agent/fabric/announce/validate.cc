#include "agent/fabric/announce/validate.h"

#include <arpa/inet.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "agent/common/excerpt.h"
#include "agent/common/ip.h"
#include "agent/common/strings.h"

namespace fabric::announce {
namespace {

constexpr size_t kIfnameMax = 15;  // IFNAMSIZ - 1

bool KernelSpace(unsigned char u) {
  // lib/ctype.c marks these _S; 0xa0 (Latin-1 no-break space) among them.
  return u == ' ' || (u >= '\t' && u <= '\r') || u == 0xa0;
}

uint32_t V4Host(const Address& a) {
  uint32_t v;
  std::memcpy(&v, &a.addr, 4);
  return ntohl(v);
}

bool SameAddress(const Address& a, const Address& b) {
  const size_t n = a.family == AF_INET ? 4 : 16;
  return a.family == b.family && std::memcmp(&a.addr, &b.addr, n) == 0;
}

absl::StatusOr<Address> ParseIp(std::string_view text) {
  absl::StatusOr<IpAddress> ip = ::fabric::ParseIp(text);
  if (!ip.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ips: ", Av(Excerpt(text)), " is not an IP address"));
  }
  Address a;
  a.family = ip->family;
  a.addr = ip->addr;
  a.prefix_len = a.family == AF_INET ? 32 : 128;
  return a;
}

}  // namespace

absl::Status CheckIfname(std::string_view name, std::string_view what) {
  auto bad = [&](std::string_view rule) {
    return absl::InvalidArgumentError(
        absl::StrCat(Av(what), " ", Av(Excerpt(name, 32)), ": ", Av(rule)));
  };
  if (name.empty()) return absl::InvalidArgumentError(absl::StrCat(Av(what), " is empty"));
  if (name.size() > kIfnameMax) {
    return bad(absl::StrCat(name.size(), " bytes; an interface name has 1 to ", kIfnameMax));
  }
  if (name == "." || name == "..") return bad("\".\" and \"..\" are not interface names");
  for (char ch : name) {
    const auto u = static_cast<unsigned char>(ch);
    if (u == 0) return bad("contains a NUL byte");
    if (ch == '/') return bad("contains '/'");
    if (ch == ':') return bad("contains ':'");
    if (KernelSpace(u)) return bad("contains whitespace");
  }
  return absl::OkStatus();
}

std::string AddressClassProblem(const Address& a) {
  if (a.family == AF_INET) {
    const uint32_t v = V4Host(a);
    if (v == 0) return "the unspecified address";
    if (v == 0xffffffffu) return "the broadcast address";
    if ((v >> 24) == 127) return "a loopback address";
    if ((v >> 28) == 0xe) return "a multicast address";
    return "";
  }
  if (a.family != AF_INET6) return "not an IPv4 or IPv6 address";
  const in6_addr& x = a.addr;
  if (IN6_IS_ADDR_UNSPECIFIED(&x)) return "the unspecified address";
  if (IN6_IS_ADDR_LOOPBACK(&x)) return "the loopback address";
  if (IN6_IS_ADDR_MULTICAST(&x)) return "a multicast address";
  if (IN6_IS_ADDR_V4MAPPED(&x)) return "an IPv4-mapped address (give the IPv4 address)";
  if (IN6_IS_ADDR_LINKLOCAL(&x)) return "a link-local address (only global ones are announced)";
  return "";
}

absl::StatusOr<std::vector<Address>> ChooseOwnAddresses(const Target& iface,
                                                        const std::vector<std::string>& ips) {
  if (ips.size() > kMaxAnnounceAddresses) {
    return absl::ResourceExhaustedError(absl::StrCat("ips: ", ips.size(), " addresses; at most ",
                                                     kMaxAnnounceAddresses, " per request"));
  }
  if (ips.empty()) {
    if (iface.addresses.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat(iface.ifname, " has no global address to announce"));
    }
    return iface.addresses;
  }
  // Every address is checked before any ownership question, so a bad one is named as such.
  std::vector<Address> asked;
  for (const std::string& text : ips) {
    absl::StatusOr<Address> a = ParseIp(text);
    if (!a.ok()) return a.status();
    const std::string ip = IpToString(a->family, a->addr);
    if (std::string why = AddressClassProblem(*a); !why.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("ips: ", ip, " is ", why, ": only unicast addresses are announced"));
    }
    for (const Address& have : iface.addresses) {
      if (have.family != AF_INET || a->family != AF_INET || have.prefix_len >= 31) continue;
      const uint32_t host_mask = 0xffffffffu >> have.prefix_len;
      if ((V4Host(have) | host_mask) == V4Host(*a)) {
        return absl::InvalidArgumentError(absl::StrCat("ips: ", ip, " is the broadcast address of ",
                                                       iface.ifname, "'s ", have.ToString()));
      }
    }
    for (const Address& prev : asked) {
      if (SameAddress(prev, *a))
        return absl::InvalidArgumentError(absl::StrCat("ips: ", ip, " given twice"));
    }
    asked.push_back(*a);
  }
  for (Address& a : asked) {
    const Address* own = nullptr;
    for (const Address& have : iface.addresses) {
      if (SameAddress(have, a)) own = &have;
    }
    if (own == nullptr) {
      return absl::PermissionDeniedError(
          absl::StrCat(IpToString(a.family, a.addr), " is not configured on ", iface.ifname,
                       ": only addresses this host owns are announced"));
    }
    a.prefix_len = own->prefix_len;
  }
  return asked;
}

absl::Status CheckAnnounceable(Link& link, const Target& iface, bool ipv6, bool named) {
  size_t left = 0;
  for (const Address& a : iface.addresses) {
    if (a.family != AF_INET6) {
      ++left;
      continue;
    }
    const std::string ip = IpToString(AF_INET6, a.addr);
    if (!ipv6) {
      if (!named) continue;
      return absl::FailedPreconditionError(absl::StrCat(ip, ": IPv6 announcements are turned off"));
    }
    absl::StatusOr<bool> tentative = link.Tentative(a.addr);
    if (absl::IsFailedPrecondition(tentative.status())) {
      return absl::FailedPreconditionError(
          absl::StrCat(ip, ": ", tentative.status().message(), "; not announced"));
    }
    if (absl::IsNotFound(tentative.status())) {
      return absl::PermissionDeniedError(
          absl::StrCat(ip, " is no longer configured on ", iface.ifname));
    }
    ++left;
  }
  if (left == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(iface.ifname, " has no address to announce (IPv6 announcements are off)"));
  }
  return absl::OkStatus();
}

}  // namespace fabric::announce
