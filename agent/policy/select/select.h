// Which RDMA port each GPU of a job should use, and why.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/policy/select/gpu_names.h"
#include "fabric/v1/host.pb.h"
#include "fabric/v1/select.pb.h"

namespace fabric {

// Picks one active RDMA port per GPU and fills the Selection's environment for the default
// consumers, no rank (FillEnv, env.h).
//
// `gpus` are GPU names as ResolveGpu (gpu_names.h) reads them: PCI addresses in long
// ("0000:17:00.0"), nvidia-smi ("00000000:17:00.0") or short ("17:00.0") form, indices in
// nvidia-smi order (rocm-smi order on a host without NVIDIA GPUs), NVIDIA "GPU-<uuid>", AMD
// "GPU-<unique_id>", "MIG-<uuid>" (its parent GPU, through `mig`). Assignments come
// back in the same order, each with its canonical PCI address (gpu) and the name as given.
//
// Ports that are not ACTIVE are never chosen. Front-end ports (their netdev carries a default
// route, or policy.deny names their device, netdev or "dev:port") are used only when no other
// port is active. The rest are ranked, per GPU, by:
//   1. a RoCE port with a routable RoCE v2 GID (IPv4-mapped, else global IPv6) on its own netdev
//      before one without;
//   2. PFs before VFs (VFs first with policy.prefer_vfs) -- ahead of distance;
//   3. distance class PIX < PXB < PHB < NODE < SYS (no topology pair: SYS);
//   4. NIC on the GPU's NUMA node (unknown NUMA counts as not the same);
//   5. higher rate;
//   6. the GPU's host-wide pair (pairing.h: host.pairing when the snapshot carries one, else
//      computed here), so a GPU gets the same port whoever asks and with whichever other GPUs;
//   7. fewer GPUs of this request already on the port (a GPU the pairing does not cover);
//   8. device name in natural order (mlx5_2 < mlx5_10), then port number.
//
// Errors: InvalidArgument for an empty, malformed, duplicate (the same GPU under two names) or
// non-GPU name or a bad policy; NotFound for a GPU, index or UUID the host does not have;
// FailedPrecondition when the host has no RDMA device or no active port, or for a MIG-... name
// without NVML.
//
// At most kMaxGpusPerRequest GPUs (ResourceExhausted beyond); each is read by ResolveGpu, MIG
// devices through `mig`: the entry points that take names from people (the agent's service,
// fabricctl) pass the process's NVML (ProcessMigResolver); null: MIG-... is FailedPrecondition.
absl::StatusOr<v1::Selection> SelectNics(const v1::Host& host, const std::vector<std::string>& gpus,
                                         const v1::SelectionPolicy& policy,
                                         const MigResolver* mig = nullptr);

// SelectNics without the environment: FillEnv (env.h) renders it for a rank and consumers.
absl::StatusOr<v1::Selection> SelectPorts(const v1::Host& host,
                                          const std::vector<std::string>& gpus,
                                          const v1::SelectionPolicy& policy,
                                          const MigResolver* mig = nullptr);

// GPUs one SelectNics request (or Place's candidates) may name: hosts have 16 at most.
inline constexpr size_t kMaxGpusPerRequest = 64;

}  // namespace fabric
