// PCIe distance between GPUs and NICs, in the classes `nvidia-smi topo -m` prints.
#pragma once

#include <string>
#include <string_view>

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

// Classifies two functions by where they sit in an NCCL topology file (nccl_topo.h), as NCCL
// does: under one <pci> switch PIX, under nested ones PXB, meeting only at a <cpu> PHB (NCCL's
// path through the CPU), under different <cpu>s SYS. `file` names the file in the reason.
Distance ClassifyByNcclTopology(const v1::NcclTopoDevice& a, const v1::NcclTopoDevice& b,
                                std::string_view file);

// Whether the host's pairs are classified by its NCCL topology file: the PCI tree is virtual
// (VirtualPciTree) and the file was read (now or, stale, before).
bool PairedByNcclTopology(const v1::Host& host);

// What is wrong with the configured NCCL topology file, empty when nothing is: its last read
// failed, and whether an older read is used instead.
std::string NcclTopologyProblem(const v1::Host& host);

// The topology file jobs are given (NCCL_TOPO_FILE, and mounted into pods at its own path): the
// host's when read now, else empty (NCCL given a path it cannot read searches without it).
std::string NcclTopoFileForJobs(const v1::Host& host);

// Fills host->topology: every compute accelerator against every RDMA device with a PCI
// function, accelerators by PCI address, devices in host order. Where PairedByNcclTopology, by
// the file; a function the file does not name is then unclassified (ranked as far as it gets).
void BuildTopology(v1::Host* host);

// Why PCIe distance says nothing here, empty when it does: every GPU and every RDMA NIC sits
// directly on a root bus, with no root port or switch above it. Discrete devices on real PCIe
// always hang below a root port; a virtual machine's passed-through devices do not (Hyper-V's
// vPCI puts each in its own domain, other hypervisors flatten them onto bus 0), so every pair
// reads as the same class and pairing by distance would be blind.
std::string VirtualPciTree(const v1::Host& host);

// "PIX", "PXB", ... for humans.
std::string DistanceName(v1::DistanceClass d);

}  // namespace fabric
