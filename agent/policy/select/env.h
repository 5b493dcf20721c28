// The job environment of a Selection: the host model read into the plain picks the rules take
// (agent/policy/jobenv), and the answer written back into the Selection.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/policy/jobenv/jobenv.h"
#include "fabric/v1/agent.pb.h"
#include "fabric/v1/host.pb.h"
#include "fabric/v1/select.pb.h"

namespace fabric {

using EnvMap = jobenv::EnvMap;

struct EnvOptions {
  jobenv::Consumers consumers;
  std::optional<size_t> rank;  // Position of the rank GPU among the selection's assignments.
  std::optional<jobenv::Version> nccl_version;  // The job's NCCL, when known.
};

// The rules' request for `sel`: one pick per assignment (its port's other IPv4 GIDs from `host`,
// for NCCL_IB_ADDR_RANGE's check), the host's default-route netdevs and the policy's socket
// interface and static env. InvalidArgument for a bad policy or an assignment without a device.
absl::StatusOr<jobenv::Request> JobRequest(const v1::Host& host, const v1::Selection& sel,
                                           const v1::SelectionPolicy& policy,
                                           const EnvOptions& opt = {});

// jobenv::Render of JobRequest.
absl::StatusOr<jobenv::Result> RenderJobEnv(const v1::Host& host, const v1::Selection& sel,
                                            const v1::SelectionPolicy& policy,
                                            const EnvOptions& opt = {});

// The job environment of ports given without GPUs ("mlx5_3:1", in the job's order): each port as
// SelectNics would take it (its usable GID and subnet), then RenderJobEnv, no rank. The device
// plugin's Allocate for host-network pods, fabric-env in a pod that names no GPU.
// InvalidArgument for none, or a port the host lacks.
absl::StatusOr<jobenv::Result> RenderPortsEnv(const v1::Host& host,
                                              const std::vector<std::string>& ports,
                                              const v1::SelectionPolicy& policy,
                                              const EnvOptions& opt = {});

// RenderJobEnv into `sel` (replacing env, job_env, pins, rank_gpu and consumers; its notes
// appended).
absl::Status FillEnv(const v1::Host& host, const v1::SelectionPolicy& policy, const EnvOptions& opt,
                     v1::Selection* sel);

// The env of a Selection as an EnvMap.
EnvMap EnvOf(const v1::Selection& sel);

}  // namespace fabric
