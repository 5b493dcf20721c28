// Kernel uevents (NETLINK_KOBJECT_UEVENT): how the agent learns that an RDMA device or a PCI
// function came or went. Read from the kernel's own multicast group, not udev's, because
// containers (the DaemonSet) have no udevd.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "agent/inventory/discovery/refresh.h"

namespace fabric {

struct Uevent {
  std::string action;                      // "add", "remove", "change", "bind", "move" ...
  std::string devpath;                     // "/devices/pci0000:00/.../infiniband/mlx5_0"
  std::string subsystem;                   // "infiniband", "net", "pci" ...
  std::map<std::string, std::string> env;  // Every KEY=VALUE, SUBSYSTEM included.
};

// Parses one datagram: "ACTION@DEVPATH\0KEY=VALUE\0...". Messages from udev's group (they start
// with "libudev\0") and anything malformed are InvalidArgument.
absl::StatusOr<Uevent> ParseUevent(std::string_view datagram);

// Whether an event can change the inventory: RDMA devices (infiniband, infiniband_verbs), net
// devices, and PCI functions being added, removed, bound or unbound.
bool AffectsInventory(const Uevent& e);

// What an event AffectsInventory() accepts names: a netdev (INTERFACE), an RDMA device (the
// devpath's last part), the uverbs nodes; a PCI function added, removed or (un)bound asks for a
// full rescan (its SR-IOV set and any accelerator on it are re-read with everything else).
void AddToScope(const Uevent& e, ChangeScope* scope);

}  // namespace fabric
