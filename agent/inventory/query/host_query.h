// Queries of the host model that every floor above the inventory asks: which netdevs are cabled,
// which accelerators count as GPUs, which ports a fabric job would use. Reads of the model only;
// what to choose among them is policy's (agent/policy).
#pragma once

#include <string>
#include <vector>

#include "fabric/v1/host.pb.h"
#include "fabric/v1/select.pb.h"

namespace fabric {

// Why `policy.deny` excludes this port: "denied by config (mlx5_0)", "(mlx5_0:1)" or
// "(netdev eth0)", matching the device, the port, its netdev or a software device's parent
// netdev; empty when it does not.
std::string DeniedBy(const v1::SelectionPolicy& policy, const v1::RdmaDevice& dev,
                     const v1::Port& port);

// The netdevs cabled to a switch, in the model's order: those of a PCI function that is not an
// SR-IOV virtual function, and not upper devices (macvlan, VLAN). The agent listens for LLDP on
// them; `fabricctl neighbors` lists them.
std::vector<std::string> PhysicalNetdevs(const v1::Host& host);

// PCI addresses of the host's compute accelerators (management displays left out), in the
// model's order: what NFD and the metrics count.
std::vector<std::string> ComputeGpus(const v1::Host& host);
// The GPUs NCCL and RCCL drive (NVIDIA and AMD), in the model's order: what `--gpus=all` means.
// Other accelerators (Intel Gaudi, Tenstorrent ...) are listed and can be named explicitly, but
// "all" must not hand them a NIC that two GPUs then share.
std::vector<std::string> CollectiveGpus(const v1::Host& host);

// The ports a fabric job would use, in natural device order: ACTIVE, not on an SR-IOV VF, not
// denied by `policy` and not front-end (their netdev, or a software device's parent, carries the
// default route). NFD's `nics` label counts their devices; the probe schedule probes from them.
struct BackendPort {
  const v1::RdmaDevice* device;
  const v1::Port* port;
};
std::vector<BackendPort> BackendPorts(const v1::Host& host, const v1::SelectionPolicy& policy);

}  // namespace fabric
