// Rails: which rail each back-end port is cabled to, from its LLDP neighbour's name and the
// configured rails (SelectionPolicy.rails), and which ports are cabled to the wrong one. Read by
// the NFD leaf labels and health's cabling check.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "fabric/v1/host.pb.h"
#include "fabric/v1/select.pb.h"

namespace fabric {

struct PortRail {
  const v1::RdmaDevice* device;
  const v1::Port* port;
  const v1::Netdev* netdev;      // Its netdev, when the inventory lists it.
  const v1::Neighbor* neighbor;  // Null when nothing was heard.
  const v1::Rail* expected;      // The rail whose `ports` name it; null when none does.
  const v1::Rail* heard;  // The first rail whose pattern its neighbour matches; null if none.
};

// Every back-end port (BackendPorts), in its order.
std::vector<PortRail> PortRails(const v1::Host& host, const v1::SelectionPolicy& policy);

// The netdevs of `host` whose neighbour's `rail` differs from the rail it is heard on (the
// first rail whose pattern it matches, for a back-end port; "" otherwise): index into
// host.netdevs() and the rail it should name. The agent applies them to each host it publishes.
std::vector<std::pair<int, std::string>> RailChanges(const v1::Host& host,
                                                     const v1::SelectionPolicy& policy);

// Whether the neighbour's name (system name, else switch label) matches the rail's pattern.
bool MatchesRail(const v1::Rail& rail, const v1::Neighbor& n);

}  // namespace fabric
