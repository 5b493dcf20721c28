// PCIe distance between GPUs and NICs, in the classes `nvidia-smi topo -m` prints.
#pragma once

#include <string>

#include "fabric/v1/host.pb.h"

namespace fabric {

struct Distance {
  v1::DistanceClass distance = v1::DISTANCE_CLASS_UNSPECIFIED;
  std::string reason;
};

// Classifies the path between two PCI functions from their `path` (root complex, then bridges)
// and NUMA nodes. sysfs does not say which bridge is a switch port, so the path is read the way
// PCIe builds it: the first bridge under a root complex is a root port, and below it bridges
// come in pairs, a switch's upstream port and one of its downstream ports. A switch counts as
// one bridge, so two functions under different downstream ports of one switch are PIX.
// `single_numa_node`: the host has one NUMA node, so unknown NUMA affinity still means NODE.
Distance ClassifyDistance(const v1::PciFunction& a, const v1::PciFunction& b,
                          bool single_numa_node);

// Fills host->topology: every compute accelerator against every RDMA device with a PCI
// function, accelerators by PCI address, devices in host order.
void BuildTopology(v1::Host* host);

// "PIX", "PXB", ... for humans.
std::string DistanceName(v1::DistanceClass d);

}  // namespace fabric
