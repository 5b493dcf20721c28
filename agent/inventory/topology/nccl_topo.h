// NCCL's topology file (the XML that NCCL_TOPO_FILE names, NCCL's src/graph/xml.cc format):
// cloud vendors publish one per VM shape because the VM's own PCI tree is virtual (every device
// on a root bus) and says nothing of which NIC is near which GPU. The agent reads the same file
// so that its pairing and NCCL's agree. Parsing is apart from reading (osquery's rule).
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "fabric/v1/host.pb.h"

namespace fabric {

// Files NCCL writes or vendors publish are a few kilobytes; a larger one is refused, not read.
inline constexpr size_t kMaxNcclTopoBytes = 1 << 20;
inline constexpr int kMaxNcclTopoDevices = 4096;

// Every <pci busid=...> element of a <system> document with the <cpu> and <pci> elements above
// it (NcclTopoDevice). Elements of other kinds (<gpu>, <nic>, <net>, <nvlink>) are walked
// through, not recorded. Malformed XML, another root element, a <pci> without a well-formed
// busid, a busid twice, no <pci> at all or more than kMaxNcclTopoDevices: an error naming the
// line. `path` is left empty.
absl::StatusOr<v1::NcclTopology> ParseNcclTopology(std::string_view xml);

// Reads and parses the file at `path`. On failure the result carries `error` and, when `last`
// is a good read of the same path, `last`'s devices marked stale: a read that failed is not a
// fact, and the last good one is kept and said to be old.
v1::NcclTopology ReadNcclTopology(const std::string& path, const v1::NcclTopology* last);

// Lays the file named by the policy onto `host` (Host.nccl_topology; cleared when `path` is
// empty) and classifies the host's pairs anew (BuildTopology), which reads it where the PCI tree
// is virtual. `last`: the topology the previous inventory carried, if any.
void ApplyNcclTopology(const std::string& path, const v1::NcclTopology* last, v1::Host* host);

}  // namespace fabric
