// The announcement model of the API (fabric.v1.Announcement) from the library's Target and
// Report. Separate from the library itself: the CNI plugin links no protobuf.
#pragma once

#include <string>

#include "agent/fabric/announce/announce.h"
#include "fabric/v1/agent.pb.h"

namespace fabric::announce {

// Fills every field but container_id, netns, state and started. `report` may be null (nothing
// sent yet).
v1::Announcement ToAnnouncement(const Target& target, const Report* report);

}  // namespace fabric::announce
