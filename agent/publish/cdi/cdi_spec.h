// The host's RDMA devices as a CDI (Container Device Interface) spec: what containerd, CRI-O,
// podman and Docker read from /var/run/cdi to give a container `--device fabric.io/rdma=NAME`.
//
// Devices, each with the uverbs node of its NICs and /dev/infiniband/rdma_cm:
//   gpu<K>      the NIC the all-GPU selection gives GPU K (K: the index `fabricctl select
//               --gpus=K` takes);
//   <rdma dev>  one per RDMA device ("mlx5_3"), back-end and front-end alike;
//   all         every NIC of the all-GPU selection.
// A container may take several; the runtime applies every device's edits and merges env by
// name, the last one winning. So gpu<K> and <rdma dev> carry only the job variables that name no
// device (jobenv::SubsetInvariant: the GID rules, the socket interface, the static env), the same
// in every device, and only `all` carries the device lists (NCCL_IB_HCA...), naming exactly the
// NICs whose nodes it holds. Without a device list NCCL, UCX and NVSHMEM use every device
// libibverbs lists, and libibverbs lists only devices whose /dev/infiniband/uverbsN exists in the
// container (rdma-core libibverbs/init.c try_access_device, called from setup_sysfs_dev and
// ibdev_nl.c find_sysfs_devs_nl; v44.0 in Debian 12, still so in v64.0): the nodes a container was
// given are its pin. Any combination of devices therefore agrees.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/policy/jobenv/jobenv.h"
#include "fabric/v1/host.pb.h"
#include "fabric/v1/select.pb.h"

namespace fabric::cdi {

inline constexpr char kVendor[] = "fabric.io";  // As the NFD labels' rdma.fabric.io.
inline constexpr char kClass[] = "rdma";
inline constexpr char kKind[] = "fabric.io/rdma";
// The newest version Debian 12's podman (4.3.1) accepts: 0.6.0 is "unresolvable" there.
inline constexpr char kCdiVersion[] = "0.5.0";
inline constexpr char kRdmaCm[] = "/dev/infiniband/rdma_cm";
// Where the helper and NCCL's environment plugin are mounted into containers (the device
// plugin's Allocate too): the plugin finds the helper at ../../bin/fabric-env.
inline constexpr char kPodHelperInContainer[] = "/usr/local/bin/fabric-env";
inline constexpr char kNcclEnvPluginInContainer[] =
    "/usr/local/lib/fabric-agent/libnccl-env-fabric.so";

struct SpecOptions {
  // Prefix of each node's hostPath ("DIR/dev/infiniband/uverbs3"); empty: no hostPath, the
  // runtime opens `path` on the host. For tests and hosts whose nodes live elsewhere.
  std::string dev_root;
  // NCCL's environment plugin with what it runs on, host paths: the library, the helper
  // (fabric-env) and the published host's directory. All three given: every device of the spec
  // mounts them read-only (at the paths above and /run/fabric-env), NCCL_ENV_PLUGIN names the
  // library, and the devices' NCCL_* and RCCL_* variables are left to it. Else none.
  std::string nccl_env_plugin;
  std::string pod_helper;
  std::string host_file_dir;
};

struct Device {
  std::string name;                // "gpu0", "mlx5_3", "all".
  std::vector<std::string> nodes;  // Container paths: "/dev/infiniband/uverbs3", kRdmaCm.
  jobenv::EnvMap env;
};

// The devices, in the spec's order: gpu<K> by K, the RDMA devices in the host's order, `all`.
// Without a usable all-GPU selection (no GPU, no active port, a chosen NIC without a uverbs
// node) only the per-NIC devices are there; an RDMA device without a uverbs node, or whose name
// CDI would refuse or a gpu<K>/all device holds, has none. FailedPrecondition when no device is
// left (a spec must name one). `notes` (when not null) says what was left out and why.
absl::StatusOr<std::vector<Device>> Devices(const v1::Host& host, const v1::SelectionPolicy& policy,
                                            std::vector<std::string>* notes = nullptr);

// The spec's JSON for Devices(): deterministic bytes (stable order, two-space indent, a
// trailing newline), so that a writer compares bytes to know whether anything changed. The
// host's overload also mounts the NCCL topology file jobs are given (NcclTopoFileForJobs)
// read-only at its own path, whichever device a container takes.
absl::StatusOr<std::string> SpecJson(const v1::Host& host, const v1::SelectionPolicy& policy,
                                     const SpecOptions& opt = {});
std::string SpecJson(const std::vector<Device>& devices, const SpecOptions& opt = {});

// Whether CDI takes `name` as a device name: letters, digits, '_', '-', '.' and ':', beginning
// and ending with a letter or digit.
bool ValidDeviceName(std::string_view name);

}  // namespace fabric::cdi
