// Human-readable views of the host model for fabricctl, and its JSON (json.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agent/fabricctl/table.h"
#include "agent/publish/json/json.h"
#include "fabric/v1/agent.pb.h"
#include "fabric/v1/host.pb.h"
#include "fabric/v1/select.pb.h"

namespace fabric {

// Everything discovered (render_host.cc): devices, ports (what ibstat and ibv_devinfo show),
// GID tables, netdevs, accelerators, GPUDirect, and each problem with the file it is about.
std::string RenderInventory(const v1::Host& host, const TableStyle& style = {});
// A GPU x NIC matrix of distance classes in the `nvidia-smi topo -m` form: GPUs named as the
// vendor tools number them, NICs as NIC<j> with a legend, PFs only (VFs too when wide). Where
// the matrix would not fit kDefaultWidth, one line per GPU with its paired and closest NICs.
std::string RenderTopology(const v1::Host& host, const TableStyle& style = {});
std::string RenderSelection(const v1::Selection& selection);
// One line per GPU under a header: the name as given, its PCI address, port, netdev, GID index,
// the GID's address, distance class and NUMA node ("-" where unknown).
std::string RenderSelectionBrief(const v1::Selection& selection, const TableStyle& style = {});
// Ranked GPU sets, best first: the GPUs, worst distance, distance sum, NUMA nodes spanned, GPUs
// sharing a port, and the port per GPU; then the notes.
std::string RenderPlacements(const v1::PlaceResponse& response, const TableStyle& style = {});
// One line per physical netdev: the switch and port at the other end of its cable (LLDP, or SMPs
// on InfiniBand), the configured rail it serves, its TTL and since when it is heard
// (`now_unix_ms` the clock); "-" where nothing was heard.
std::string RenderNeighbors(const v1::Host& host, int64_t now_unix_ms,
                            const TableStyle& style = {});
// One block per interface: addresses, frames sent, gateway reachability, conflicts.
std::string RenderAnnouncements(const std::vector<v1::Announcement>& announcements);

// The responder and schedule state, then one line per probe result (newest first): when, how
// it was asked, peer, local device, test, transport, the figure (average Gb/s or typical us),
// the share of the port's rate, and OK / DEGRADED / the error.
std::string RenderProbeResults(const v1::ListProbeResultsResponse& list,
                               const TableStyle& style = {});

}  // namespace fabric
