// What changed between two snapshots of a host: the changes of a WatchInventory event, and the
// health findings for GID tables that moved under running jobs.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "fabric/v1/agent.pb.h"
#include "fabric/v1/health.pb.h"
#include "fabric/v1/host.pb.h"

namespace fabric {

// The differences from `before` to `after`, in a stable order: by kind, in this order, and within a
// kind in natural order of the subject (mlx5_2 before mlx5_10, then by port number).
//   KIND_DEVICE_REMOVED, KIND_DEVICE_ADDED     an RDMA device by name
//   KIND_PORT_STATE       "mlx5_1:1"  "ACTIVE" -> "DOWN" (PortStateName). A port that only one
//                         side has (its device on both) has the empty string on the other side.
//   KIND_PORT_RATE        "mlx5_1:1"  "400" -> "200" (Gb/s, %g; empty when unknown)
//   KIND_GID_TABLE        "mlx5_1:1"  any GID entry differs; old/new_roce_v2_ipv4_gid_index are
//                         RoceV2Ipv4GidIndex before and after, old/new value "3 (10.0.1.5)" that
//                         GID (empty when none)
//   KIND_NETDEV_REMOVED, KIND_NETDEV_ADDED     a netdev by name
//   KIND_NETDEV_ADDRESSES "eth1"  the netdev's IPv4 addresses (from the GID entries that name it)
//                         and connected subnets (CIDR), sorted and comma-joined
//   KIND_ACCELERATOR_REMOVED, KIND_ACCELERATOR_ADDED   by PCI address
//   KIND_OTHER            at most one, subject "", new_value the top-level Host fields that differ
//                         beyond the changes above, comma-joined in field order, e.g.
//                         "rdma_devices,gpudirect,topology"
// Devices, ports, netdevs and accelerators are matched by key (name, number, name, PCI address),
// so a reordering alone is no change. A field counts as covered when its change is reported above:
// a port's phys_state with a state change, its rate text with a rate change.
std::vector<v1::InventoryChange> DiffHosts(const v1::Host& before, const v1::Host& after);

// Whether the two devices' ports (by number) have the same GID entries, as KIND_GID_TABLE judges.
bool SameGidTables(const v1::RdmaDevice& a, const v1::RdmaDevice& b);

// Where the port's RoCE v2 IPv4 GID sits: the lowest index of a RoCE v2 entry with an IPv4
// address whose netdev is the port's own netdev (port.netdev, else the device's parent_netdev),
// as selection picks it; when neither is known, of any netdev. nullopt when there is none.
std::optional<uint32_t> RoceV2Ipv4GidIndex(const v1::RdmaDevice& dev, const v1::Port& port);

// WARNING findings (check "gid_table", subject "mlx5_1:1") for ports whose RoCE v2 IPv4 GID moved,
// disappeared or changed address since `at_start`: jobs started before then use a stale
// NCCL_IB_GID_INDEX or address. A change that leaves that entry as it was (other entries added or
// removed, e.g. a macvlan's) and a GID that appears where there was none are not reported; nor
// are ports that only one of the two hosts has (device removal is reported elsewhere).
std::vector<v1::Finding> GidChangeFindings(const v1::Host& at_start, const v1::Host& now);

}  // namespace fabric
