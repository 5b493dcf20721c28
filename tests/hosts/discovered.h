// Example hosts as discovery sees them, for tests of what consumes the host model (selection,
// placement, diffs): written to a temporary directory, discovered, removed; once per process.
#pragma once

#include <string>

#include "fabric/v1/host.pb.h"

namespace fabric::testing {

// The discovered host model of the example host `name` (hosts.h). A host that cannot be
// written or discovered fails the calling test and comes back empty.
const v1::Host& DiscoveredExampleHost(const std::string& name);

}  // namespace fabric::testing
