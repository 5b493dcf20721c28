// Host discovery: RDMA devices, ports, GID tables, netdevs, SR-IOV, accelerators, GPUDirect
// readiness and GPU-NIC topology, read from a sysfs and a procfs root into the host model.
#pragma once

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "agent/hostfs/host_fs.h"
#include "fabric/v1/host.pb.h"

namespace fabric {

// Discovers the host below `sysfs` and `procfs`. Only a sysfs root that cannot be read at all is
// an error: any missing or malformed file leaves its field unset with a FieldProblem saying why.
absl::StatusOr<v1::Host> Discover(const HostFs& sysfs, const HostFs& procfs);

// Calls `fn` for every FieldProblem in `host`, with where it sits: "host", "mlx5_1",
// "mlx5_1 pci", "mlx5_1:1", a netdev's name or an accelerator's PCI address.
void ForEachProblem(
    const v1::Host& host,
    const std::function<void(const std::string& where, const v1::FieldProblem& problem)>& fn);

}  // namespace fabric
