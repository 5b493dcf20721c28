#include "agent/fabric/probes/access.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "agent/common/errno.h"
#include "agent/common/strings.h"

namespace fabric::probes {
namespace {

// Leading one bits of a netmask (contiguous ones, as the kernel keeps them).
int PrefixLen(const uint8_t* mask, size_t bytes) {
  int len = 0;
  for (size_t i = 0; i < bytes; ++i) len += __builtin_popcount(mask[i]);
  return len;
}

}  // namespace

absl::StatusOr<AllowList> AllowList::Parse(std::string_view text) {
  AllowList out;
  for (absl::string_view entry : absl::StrSplit(Av(text), ',')) {
    const std::string e(absl::StripAsciiWhitespace(entry));
    if (e.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("empty network in the allow-list \"", Av(text.substr(0, 64)), "\""));
    }
    absl::StatusOr<IpNet> n = ParseIpCidr(e);
    if (!n.ok()) return n.status();
    out.Add(*n);
  }
  return out;
}

absl::StatusOr<AllowList> AllowList::HostSubnets() {
  ifaddrs* ifa = nullptr;
  if (getifaddrs(&ifa) != 0) {
    return absl::InternalError(absl::StrCat("getifaddrs: ", ErrnoText(errno)));
  }
  AllowList out;
  for (ifaddrs* i = ifa; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_netmask == nullptr || (i->ifa_flags & IFF_UP) == 0) {
      continue;
    }
    IpNet n;
    if (i->ifa_addr->sa_family == AF_INET) {
      const auto* a = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
      const auto* m = reinterpret_cast<const sockaddr_in*>(i->ifa_netmask);
      n.v4 = true;
      n.addr[10] = n.addr[11] = 0xff;
      std::memcpy(&n.addr[12], &a->sin_addr, 4);
      n.len = 96 + PrefixLen(reinterpret_cast<const uint8_t*>(&m->sin_addr), 4);
    } else if (i->ifa_addr->sa_family == AF_INET6) {
      const auto* a = reinterpret_cast<const sockaddr_in6*>(i->ifa_addr);
      const auto* m = reinterpret_cast<const sockaddr_in6*>(i->ifa_netmask);
      std::memcpy(n.addr.data(), &a->sin6_addr, 16);
      n.len = PrefixLen(reinterpret_cast<const uint8_t*>(&m->sin6_addr), 16);
    } else {
      continue;
    }
    // Clear the host bits (the interface's own address names its subnet).
    for (int bit = 0; bit < 128; bit += 8) {
      const int k = std::clamp(n.len - bit, 0, 8);
      n.addr[bit / 8] = static_cast<uint8_t>(n.addr[bit / 8] & (0xff << (8 - k)));
    }
    out.Add(n);
  }
  freeifaddrs(ifa);
  return out;
}

void AllowList::Add(const IpNet& n) {
  if (std::find(nets_.begin(), nets_.end(), n) == nets_.end()) nets_.push_back(n);
}

bool AllowList::Allows(std::string_view peer) const {
  absl::StatusOr<std::array<uint8_t, 16>> a = IpNet::ParseAddress(peer);
  if (!a.ok()) return false;
  for (const IpNet& n : nets_) {
    if (n.Contains(*a)) return true;
  }
  return false;
}

std::string AllowList::ToString() const {
  if (nets_.empty()) return "nobody";
  return absl::StrJoin(nets_, ", ",
                       [](std::string* out, const IpNet& n) { out->append(n.ToString()); });
}

double RateLimiter::Refill(Bucket& b, absl::Time now) const {
  const double elapsed = std::max(0.0, absl::ToDoubleSeconds(now - b.at));
  b.tokens = std::min<double>(per_minute_, b.tokens + elapsed * per_minute_ / 60.0);
  b.at = now;
  return b.tokens;
}

bool RateLimiter::Take(const std::string& peer, absl::Time now) {
  if (per_minute_ == 0) return true;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = buckets_.find(peer);
  if (it == buckets_.end()) {
    if (buckets_.size() >= kMaxPeers) {
      for (auto j = buckets_.begin(); j != buckets_.end();) {
        j = Refill(j->second, now) >= per_minute_ ? buckets_.erase(j) : std::next(j);
      }
      if (buckets_.size() >= kMaxPeers) return false;
    }
    it = buckets_.emplace(peer, Bucket{static_cast<double>(per_minute_), now}).first;
  }
  if (Refill(it->second, now) < 1.0) return false;
  it->second.tokens -= 1.0;
  return true;
}

}  // namespace fabric::probes
