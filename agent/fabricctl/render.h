// Human-readable views of the host model for fabricctl. JSON output is the proto3 JSON mapping
// and needs no code here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fabric/v1/agent.pb.h"
#include "fabric/v1/host.pb.h"
#include "fabric/v1/select.pb.h"

namespace fabric {

std::string RenderInventory(const v1::Host& host);
// A GPU x NIC matrix of distance classes, as `nvidia-smi topo -m` prints it.
std::string RenderTopology(const v1::Host& host);
std::string RenderSelection(const v1::Selection& selection);
// One line per physical netdev: the switch and port at the other end of its cable (LLDP), its
// TTL and since when it is heard (`now_unix_ms` the clock); "-" where nothing was heard.
std::string RenderNeighbors(const v1::Host& host, int64_t now_unix_ms);
// One block per interface: addresses, frames sent, gateway reachability, conflicts.
std::string RenderAnnouncements(const std::vector<v1::Announcement>& announcements);

// The responder and schedule state, then one line per probe result (newest first): when, how
// it was asked, peer, local device, test, transport, the figure (average Gb/s or typical us),
// the share of the port's rate, and OK / DEGRADED / the error.
std::string RenderProbeResults(const v1::ListProbeResultsResponse& list);

// The proto3 JSON mapping, indented, with a trailing newline.
std::string ToJson(const google::protobuf::Message& message);

}  // namespace fabric
