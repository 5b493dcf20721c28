// The out-of-band steps of an RDMA test on the control connection: the QP endpoints (QP number,
// PSN, GID, LID, rkey and address of each QP) and the barriers.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "agent/fabric/probes/net.h"
#include "agent/fabric/probes/verbs_resources.h"

namespace fabric::probes {

// Sends this side's endpoints and receives the peer's (the client speaks first), checks them and
// keeps them for the work requests; without rdma_cm, then moves the QPs to RTR and RTS.
absl::Status ExchangeQpEndpoints(Channel& ch, VerbsResources& verbs);
// Returns once both sides reached `phase`: the client speaks first, the server answers.
absl::Status Barrier(Channel& ch, bool client, uint32_t phase);

}  // namespace fabric::probes
