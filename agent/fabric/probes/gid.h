// GID index choice when -x is not given, as the agent's NIC selection chooses it: on a RoCE
// port the lowest-index RoCE v2 GID holding an IPv4-mapped address of the port's own netdev;
// on InfiniBand index 0. The table comes from sysfs (ports/<p>/gids/<i>,
// gid_attrs/types/<i>, gid_attrs/ndevs/<i>).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace fabric {
class HostFs;
}

namespace fabric::probes {

struct GidEntry {
  int index = 0;
  std::string gid;   // as sysfs prints it: "0000:0000:0000:0000:0000:ffff:0a4d:0001"
  std::string type;  // "RoCE v2", "IB/RoCE v1"; empty when unreadable (an unused entry)
  std::string ndev;  // netdev of the entry; empty when unreadable
};

// Parses sysfs's GID text (8 groups of 4 hex digits) into bytes.
std::optional<std::array<uint8_t, 16>> ParseGid(std::string_view text);
// The IPv4 address of an IPv4-mapped GID (::ffff:a.b.c.d), as "a.b.c.d"; nullopt otherwise.
std::optional<std::string> Ipv4OfGid(std::string_view text);

// The choice for a port. `link_layer` is sysfs's "InfiniBand" or "Ethernet". The port's own
// netdev is the one of its entry 0 (the default GID belongs to the port's netdev); entries of
// other netdevs (macvlans of pods) are skipped. NotFound for a RoCE port without such a GID.
absl::StatusOr<int> ChooseGidIndex(std::string_view link_layer, const std::vector<GidEntry>& table);

// Reads the port's link layer and GID table below `sysfs` and chooses.
absl::StatusOr<int> ChooseGidIndexFromSysfs(const HostFs& sysfs, std::string_view device, int port);

}  // namespace fabric::probes
