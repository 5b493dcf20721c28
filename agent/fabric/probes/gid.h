// The GID index when -x is not given is the agent's rule (agent/rdma/gid_choice.h).
#pragma once

#include "agent/rdma/gid_choice.h"

namespace fabric::probes {

using rdma::ChooseGidIndexFromSysfs;

}  // namespace fabric::probes
