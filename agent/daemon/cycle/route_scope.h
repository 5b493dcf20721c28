// What one route netlink message names, for the targeted refresh: parsing separate from the
// socket (event_sources.cc reads, this reads the bytes), with a fuzz target.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "agent/inventory/discovery/refresh.h"

namespace fabric {

struct RouteMessage {
  const char* what = "";  // "link added or changed", "address removed", ... for logs.
  int ifindex = 0;        // 0 when the message names none.
};

// `msg`: one netlink message (header and payload, 4-byte aligned). `name_of` gives an ifindex's
// netdev name now, empty when it is gone. Adds what the message names to `scope`; nullopt for
// messages that cannot change the inventory (other types, routes outside the main table) and
// for truncated ones.
std::optional<RouteMessage> ScopeOfRouteMessage(std::string_view msg,
                                                const std::function<std::string(int)>& name_of,
                                                ChangeScope* scope);

}  // namespace fabric
