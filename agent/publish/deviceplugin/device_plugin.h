// The kubelet device plugins' answers, pure: from the host, the config's resources and health,
// each resource's devices (ListAndWatch), Allocate's container edits and
// GetPreferredAllocation's choice. The gRPC servers and the kubelet registration are the
// daemon's (agent/daemon/workers/device_plugin.h).
//
// A resource's NICs are the RDMA devices its selectors match. A NIC two resources match is
// served by neither (a pod given it through both would share what one of them promised
// exclusively); Plan says so as a finding naming both resources and the NIC.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/publish/cdi/cdi_spec.h"
#include "fabric/v1/health.pb.h"
#include "fabric/v1/host.pb.h"
#include "fabric/v1/select.pb.h"
#include "k8s/deviceplugin/v1beta1/api.pb.h"

namespace fabric::deviceplugin {

inline constexpr char kApiVersion[] = "v1beta1";
inline constexpr char kHealthy[] = "Healthy";
inline constexpr char kUnhealthy[] = "Unhealthy";
inline constexpr char kRdmaCm[] = "/dev/infiniband/rdma_cm";
inline constexpr char kPodHelperDefault[] = "/usr/bin/fabric-env";
// Where the helper and NCCL's environment plugin are mounted, as the CDI spec mounts them.
using cdi::kNcclEnvPluginInContainer;
using cdi::kPodHelperInContainer;
inline constexpr char kEnvResource[] = "FABRIC_RDMA_RESOURCE";
inline constexpr char kEnvDevices[] = "FABRIC_RDMA_DEVICES";
inline constexpr char kCheck[] = "device_plugin";  // Findings' check name.

// What one Allocate or GetPreferredAllocation may ask, refused (InvalidArgument naming the bound)
// before any work: the kubelet asks for one container a call, so 256 leaves room; a container
// asks for at most what a resource can list (kMaxSharedCount). One Allocate of 200,000 empty
// container requests (400 kB on the wire) built a 686 MB answer.
inline constexpr int kMaxContainerRequests = 256;
inline constexpr int kMaxContainerDevices = 10000;

// Whether `dev` matches every non-empty selector (config validated: resource_section.h).
bool Matches(const v1::Host& host, const v1::SelectionPolicy& policy, const v1::RdmaSelectors& sel,
             const v1::RdmaDevice& dev);

// Why `dev` cannot serve: a port not ACTIVE, no uverbs node, a CRITICAL finding naming the
// device, one of its ports, its PCI function or a port's netdev. Empty when healthy.
std::string Unhealthy(const v1::RdmaDevice& dev, const v1::Health& health);

// One resource on one host.
struct ResourceView {
  v1::RdmaResource resource;
  std::vector<std::string> nics;  // Matched, not contested, in natural order.
  v1beta1::ListAndWatchResponse list;
  std::set<std::string> ids;  // Of `list`.
};

struct Plan {
  std::vector<ResourceView> resources;  // In the config's order.
  std::vector<v1::Finding> findings;    // NICs two resources match (WARNING).
};

Plan PlanResources(const v1::Host& host, const v1::SelectionPolicy& policy,
                   const v1::DevicePluginConfig& config, const v1::Health& health);

// IDs advertised before that are gone now are listed Unhealthy (a vanished NIC stays visible to
// the kubelet as broken, not silently withdrawn from pods that hold it).
void AddVanished(const std::vector<std::string>& before, v1beta1::ListAndWatchResponse* list);

struct AllocateOptions {
  std::string host_file_dir;  // Mounted read-only at /run/fabric-env; empty: none.
  std::string pod_helper;     // Mounted read-only at kPodHelperInContainer; empty: none.
  bool cdi = false;           // The agent keeps the CDI spec: name its per-NIC devices.
  std::string dev_root;       // Prefix of the device nodes' host paths (tests); empty: none.
  // NCCL's environment plugin (libnccl-env-fabric.so), mounted read-only at
  // kNcclEnvPluginInContainer with NCCL_ENV_PLUGIN naming it, in place of the NCCL_* and RCCL_*
  // variables, where the host file and the helper are mounted too; empty: none.
  std::string nccl_env_plugin;
};

// Per container: the allocated NICs' uverbs nodes and rdma_cm ("rw"), the mounts, the envs
// (kEnvResource, kEnvDevices in natural order; with env_at_allocate the job environment over
// their ACTIVE ports), and with `cdi` and cdi_devices the CDI names. InvalidArgument names an
// ID the resource does not list, and a request over the bounds above; FailedPrecondition when the
// NIC lost its uverbs node.
absl::StatusOr<v1beta1::AllocateResponse> Allocate(const v1::Host& host,
                                                   const v1::SelectionPolicy& policy,
                                                   const ResourceView& view,
                                                   const v1beta1::AllocateRequest& req,
                                                   const AllocateOptions& opt);

// Exactly allocation_size IDs from available_deviceIDs, must_include first: on one NUMA node
// (that of must_include, else the smallest node that holds them all, else the fullest), then
// under one PCIe switch with those already chosen, then in natural order. InvalidArgument for an
// unknown ID, a negative size, a size below must_include or above what is available, and a
// request over the bounds above.
absl::StatusOr<v1beta1::PreferredAllocationResponse> PreferredAllocation(
    const v1::Host& host, const ResourceView& view, const v1beta1::PreferredAllocationRequest& req);

}  // namespace fabric::deviceplugin
