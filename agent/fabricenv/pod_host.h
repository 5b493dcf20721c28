// The host as a process in a pod sees it, for fabric-env: the agent's published host narrowed to
// the RDMA ports the pod was given, so that the one selection and the job environment rules
// (agent/policy/select, jobenv) answer for the pod as they answer for a job on the host.
//
// Two cases. A pod with its own network (macvlan or a VF per pod): fabric-cni's records
// (agent/publish/podrecord) name the ports behind the pod's interfaces and the GID of the pod's
// own address. Every other GID of those ports (other pods' macvlans, which may carry the same
// interface name in their namespaces) loses its interface name, so the selection's GID rule can
// only land on the pod's own GID. A host-network pod: the device plugin's Allocate names the
// NICs it gave (FABRIC_RDMA_DEVICES); the host's own GIDs are the pod's.
//
// Pure over the model: table tests in pod_host_test.cc.
#pragma once

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/publish/podrecord/pod_record.h"
#include "fabric/v1/agent.pb.h"
#include "fabric/v1/select.pb.h"

namespace fabric::podenv {

// The variable the device plugin's Allocate sets: the RDMA devices given to the container.
inline constexpr char kDevicesVar[] = "FABRIC_RDMA_DEVICES";

// Only the records' RDMA devices and ports, each port's netdev the pod's interface, the pod's
// GID on it (added when the host was published before the pod), the pod's interfaces as the
// netdevs (no default route), no host pairing (recomputed over what is left), and
// NCCL_SOCKET_IFNAME the pod's interfaces. FailedPrecondition when the records name no RDMA
// port (the pod's interfaces carry none) or a device the host does not have.
absl::StatusOr<v1::PublishedHost> NarrowToPod(const v1::PublishedHost& published,
                                              const std::vector<podrecord::PodRecord>& records);

// A pod whose processes name no GPU (no Slurm or *_VISIBLE_DEVICES scope: the pod was given
// none): the job is the pod's RDMA ports, every one, as fabric-cni's env file has it, no pins.
// `narrowed` is NarrowToPod's; the request's consumers apply.
absl::StatusOr<v1::Selection> SelectPodPorts(const v1::PublishedHost& narrowed,
                                             const v1::SelectNicsRequest& req);

// Only the named devices ("mlx5_0,mlx5_3"), everything else as published. InvalidArgument for an
// empty list or a name the host does not have.
absl::StatusOr<v1::PublishedHost> NarrowToDevices(const v1::PublishedHost& published,
                                                  std::string_view devices);

}  // namespace fabric::podenv
