// What a caller may ask to announce, one rule for every entry point: the agent's Announce RPC,
// `fabricctl announce` and fabric-cni. Announcing an address claims it for this MAC on the whole
// segment, so only addresses configured on the interface itself are announced: anything else is
// ARP/ND cache poisoning on request.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/fabric/announce/announce.h"

namespace fabric::announce {

// Addresses one request may name (an interface rarely has more than a handful).
inline constexpr size_t kMaxAnnounceAddresses = 32;

// The kernel's dev_valid_name(): 1 to 15 bytes, not "." or "..", no '/', ':', NUL or
// whitespace (the kernel's isspace: \t \n \v \f \r, space and 0xa0). InvalidArgument naming
// `what` (e.g. "ifname", "CNI_IFNAME") and the rule broken.
absl::Status CheckIfname(std::string_view name, std::string_view what = "ifname");

// Why `a` is never announced: multicast, limited broadcast (255.255.255.255), unspecified
// (0.0.0.0, ::), loopback (127/8, ::1), IPv4-mapped IPv6 or IPv6 link-local (fe80::/10: only
// global addresses are announced); empty when it may be.
std::string AddressClassProblem(const Address& a);

// The addresses of `iface` (from DescribeInterface, with its addresses) to announce for the
// textual `ips`: all of them when `ips` is empty, else exactly those named, each with the
// interface's prefix length. Checked in this order, before anything is sent:
//   ResourceExhausted  more than kMaxAnnounceAddresses;
//   InvalidArgument    not an IP address, given twice, an AddressClassProblem, or the subnet
//                      broadcast address of one of the interface's IPv4 prefixes;
//   PermissionDenied   not configured on the interface right now;
//   FailedPrecondition nothing left to announce (no `ips`, and the interface has no address).
absl::StatusOr<std::vector<Address>> ChooseOwnAddresses(const Target& iface,
                                                        const std::vector<std::string>& ips);

// Refuses IPv6 addresses of `iface` that will never be announced, by their state on `link` now:
// FailedPrecondition when duplicate address detection failed; with `ipv6` (the plan's) off, for
// one the caller `named` (the default set just leaves them out), and when no address is left.
// PermissionDenied when one is gone from the interface. Tentative addresses pass: the Job waits
// for DAD to finish (up to 3 s).
absl::Status CheckAnnounceable(Link& link, const Target& iface, bool ipv6, bool named);

}  // namespace fabric::announce
