// The one rule for which GID of a port carries RDMA traffic, used by NIC selection (over the
// proto model), the probe tool and the CNI plugin (over sysfs): the lowest-index RoCE v2 GID that
// holds an IPv4-mapped address (::ffff:a.b.c.d); on a port without one (IPv6-only RoCE), the
// lowest-index RoCE v2 GID holding a global IPv6 address (not link-local, not an empty slot).
// Restricted to the GIDs of one netdev or to given addresses. An InfiniBand port uses index 0.
// Free of protobuf: the CNI plugin compiles it.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/rdma/gid.h"

namespace fabric {
class HostFs;
}

namespace fabric::rdma {

// One used entry of a port's GID table (IsEmptyGidSlot false).
struct GidSlot {
  int index = 0;
  GidBytes gid{};
  std::optional<GidKind> kind;  // nullopt: gid_attrs/types unreadable
  std::string netdev;           // gid_attrs/ndevs; empty when unreadable (InfiniBand)
};

struct GidWanted {
  // Only GIDs of this netdev: a macvlan's GID carries the macvlan's address, which the fabric may
  // not route to this port, and it disappears with the pod that owns it. Empty: any netdev.
  std::string netdev;
  // Only GIDs holding one of these addresses (network order), IPv4 ones preferred; both empty:
  // any IPv4-mapped GID, else any global IPv6 one.
  std::vector<std::array<uint8_t, 4>> ipv4;
  std::vector<GidBytes> ipv6;
};

enum class GidFamily { kIpv4, kIpv6 };

// The usable GID and the address family it carries.
struct GidChoice {
  int index = 0;
  GidFamily family = GidFamily::kIpv4;
  bool operator==(const GidChoice&) const = default;
};

// The usable GID, nullopt when the port has none.
std::optional<GidChoice> ChooseRoceV2Gid(const std::vector<GidSlot>& table,
                                         const GidWanted& wanted);

// The used entries of a port's GID table (empty slots left out: IsEmptyGidSlot), by index, with
// their types and netdevs. `port_dir` is the port's directory below `sysfs`
// ("class/infiniband/mlx5_0/ports/1", or the same through the PCI function). Unreadable entries are
// left out (the kernel returns EINVAL for a slot that is being changed); a missing table is the
// error.
absl::StatusOr<std::vector<GidSlot>> ReadGidTable(const HostFs& sysfs, std::string_view port_dir);

// The port's GID index when none was given (perftest's -x): 0 on InfiniBand; on RoCE the rule
// above over the GIDs of the port's own netdev, which is the netdev of entry 0 (the default GID
// belongs to it; unknown, any netdev counts). NotFound for a RoCE port without such a GID,
// FailedPrecondition for an unknown link layer, both saying to give the index.
absl::StatusOr<int> ChooseGidIndex(std::string_view link_layer, const std::vector<GidSlot>& table);
// Reads the port's link layer and GID table below `sysfs` and chooses.
absl::StatusOr<int> ChooseGidIndexFromSysfs(const HostFs& sysfs, std::string_view device, int port);

}  // namespace fabric::rdma
