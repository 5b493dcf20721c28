// One rule for laying a neighbour source's view (LLDP, InfiniBand SMPs) onto the netdevs of a
// host the agent publishes: each source sets, changes or clears only neighbours of its own
// source, and keeps the rail (the policy's view, laid after by LayRails) out of the comparison.
#pragma once

#include <functional>
#include <optional>

#include "fabric/v1/host.pb.h"

namespace fabric {

// The neighbour a netdev should show by this source; nullopt when none.
using NeighborWant = std::function<std::optional<v1::Neighbor>(const v1::Netdev&)>;

// Through MutableNetdev (a host that Refresh, ShareHost or ScannedHost returned).
void LayNeighbors(v1::Host* host, v1::Neighbor::Source source, const NeighborWant& want);
// Whether `host` already shows what `want` says.
bool ShowsNeighbors(const v1::Host& host, v1::Neighbor::Source source, const NeighborWant& want);

}  // namespace fabric
