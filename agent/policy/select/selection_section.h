// The config's `selection` section (fabric.v1.SelectionPolicy): the checks ParseConfig applies,
// here beside the policy code that relies on them, so that policies built in code are checked
// the same way.
#pragma once

#include <string_view>

#include "absl/status/status.h"
#include "fabric/v1/select.pb.h"

namespace fabric {

// The checks ParseConfig applies to the `selection` section, for policies built in code too:
// static_env names are [A-Za-z_][A-Za-z0-9_]*, values hold no NUL, CR or LF (they end up in shell
// files and nccl.conf lines); deny entries are non-empty; socket_ifname is a valid interface name.
absl::Status ValidatePolicy(const v1::SelectionPolicy& policy);

}  // namespace fabric
