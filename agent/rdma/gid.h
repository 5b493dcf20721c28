// GIDs as the kernel shows them in sysfs, free of protobuf: the CNI plugin, the probe tool and
// discovery parse them here and nowhere else.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace fabric::rdma {

using GidBytes = std::array<uint8_t, 16>;

// A GID as the kernel prints it ("fe80:0000:...:0001", 8 groups of 4 hex digits, any case; a
// trailing newline, and NULs after it, are accepted). Anything else is InvalidArgument ("not a
// GID: ...").
absl::StatusOr<GidBytes> ParseGid(std::string_view s);
// The kernel's form: lower case, 8 groups of 4 digits.
std::string FormatGid(const GidBytes& gid);
// All 16 bytes zero.
bool IsZeroGid(const GidBytes& gid);
// An empty table slot, as ibv_devinfo treats it: the interface id (low 64 bits, bytes 8..15) is
// zero. Unused slots read as all zeros, or on InfiniBand as the subnet prefix alone
// (fe80:0000:0000:0000:0000:0000:0000:0000).
bool IsEmptyGidSlot(const GidBytes& gid);
// fe80::/10.
bool IsLinkLocalGid(const GidBytes& gid);
// A routable IPv6 GID: not empty, not IPv4-mapped, not link-local.
bool IsGlobalIpv6Gid(const GidBytes& gid);
// The compressed IPv6 text of a global IPv6 GID ("2001:db8::1"), else nullopt.
std::optional<std::string> GidIpv6(const GidBytes& gid);
// "a.b.c.d" when the GID is IPv4-mapped (::ffff:a.b.c.d), else nullopt.
std::optional<std::string> GidIpv4(const GidBytes& gid);
// The GID a RoCE v2 port holds for an IPv4 address: ::ffff:a.b.c.d (`ipv4` in network order).
GidBytes Ipv4MappedGid(const std::array<uint8_t, 4>& ipv4);

// gid_attrs/types/N. "IB/RoCE v1" is IB on an InfiniBand port and RoCE v1 on an Ethernet port;
// older kernels also print "IB" and "RoCE v1".
enum class GidKind { kIbOrRoceV1, kIb, kRoceV1, kRoceV2 };
absl::StatusOr<GidKind> ParseGidKind(std::string_view s);

}  // namespace fabric::rdma
