// Who the probe responder serves: an allow-list of networks (--allow, --probe-allow; by default
// the subnets this host has addresses in) and a per-peer rate limit (--rate, --probe-rate).
// Both are checked before the responder touches a device.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/common/cidr.h"

namespace fabric::probes {

class AllowList {
 public:
  // "10.0.0.0/24,fd00::/64,10.1.2.3" (an address alone is one host). Empty entries and bad
  // networks are errors naming the entry.
  static absl::StatusOr<AllowList> Parse(std::string_view text);
  // The subnets this host has addresses in (getifaddrs: every interface that is up, IPv4 and
  // IPv6, loopback included).
  static absl::StatusOr<AllowList> HostSubnets();

  // `peer`: a numeric address as PeerAddress gives it (IPv4, IPv6, IPv4-mapped IPv6).
  bool Allows(std::string_view peer) const;
  // "10.0.0.0/24, 127.0.0.0/8, ::1/128"
  std::string ToString() const;
  const std::vector<IpNet>& nets() const { return nets_; }

 private:
  void Add(const IpNet& n);
  std::vector<IpNet> nets_;
};

// A token bucket per peer address: at most `per_minute` tests in a burst, refilled at that rate.
// Thread-safe; at most kMaxPeers buckets (full ones are dropped first; past that, new peers are
// refused until some refill), so a flood of addresses cannot grow memory.
class RateLimiter {
 public:
  static constexpr size_t kMaxPeers = 4096;
  explicit RateLimiter(uint32_t per_minute) : per_minute_(per_minute) {}
  // Takes a token for `peer` at `now`; false when its bucket is empty.
  bool Take(const std::string& peer, absl::Time now);
  uint32_t per_minute() const { return per_minute_; }

 private:
  struct Bucket {
    double tokens = 0;
    absl::Time at;
  };
  double Refill(Bucket& b, absl::Time now) const;
  const uint32_t per_minute_;
  std::mutex mu_;
  std::map<std::string, Bucket> buckets_;
};

}  // namespace fabric::probes
