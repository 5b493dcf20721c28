// A SelectNics request answered: its GPUs' ports (select.h), then the job environment (env.h)
// with the request's rank and consumers. The one path of the agent's SelectNics and fabricctl's
// own, above both halves it joins.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/policy/select/env.h"
#include "agent/policy/select/gpu_names.h"
#include "fabric/v1/agent.pb.h"
#include "fabric/v1/host.pb.h"
#include "fabric/v1/select.pb.h"

namespace fabric {

// The request's nccl_version, parsed; nullopt when empty. InvalidArgument when malformed.
absl::StatusOr<std::optional<jobenv::Version>> NcclVersionOf(const v1::SelectNicsRequest& req);

// A SelectNics request's consumers and rank, against the selection made for its GPUs: rank_gpu is
// read by ResolveGpu and must be one of them; rank_position must be below their count.
// InvalidArgument otherwise (NotFound for a rank GPU the host does not have).
absl::StatusOr<EnvOptions> EnvOptionsFor(const v1::Host& host, const v1::SelectNicsRequest& req,
                                         const v1::Selection& sel, const MigResolver* mig);

// SelectPorts (select.h) for `gpus` (the request's, as RequestedGpus reads them), then FillEnv with
// the request's rank and consumers: the one path of the agent's SelectNics and fabricctl's own.
absl::StatusOr<v1::Selection> SelectForRequest(const v1::Host& host,
                                               const std::vector<std::string>& gpus,
                                               const v1::SelectNicsRequest& req,
                                               const v1::SelectionPolicy& policy,
                                               const MigResolver* mig);

}  // namespace fabric
