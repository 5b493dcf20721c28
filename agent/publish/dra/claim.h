// A ResourceClaim as the kubelet plugin reads it, and what preparing it gives the container, pure:
// the claim's results for our driver parsed from the API server's JSON (outside bytes: bounded,
// a fuzz target), checked against this node's pool and the devices it published, then the CDI
// device IDs for the kubelet: each NIC's own device in the agent's CDI spec, and one device of
// the claim's own spec carrying the job environment for exactly those NICs.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/publish/dra/devices.h"
#include "agent/publish/podrecord/pod_record.h"
#include "fabric/v1/host.pb.h"
#include "fabric/v1/select.pb.h"

namespace fabric::dra {

inline constexpr size_t kMaxClaimBytes = 4 << 20;

struct ClaimResult {
  std::string request;
  std::string pool;
  std::string device;
};

struct ParsedClaim {
  std::string uid;
  std::string namespace_;
  std::string name;
  std::string resource_version;
  bool allocated = false;            // status.allocation is there.
  std::vector<ClaimResult> results;  // status.allocation.devices.results of our driver only.
  std::vector<std::string> pods;     // UIDs of the pods in status.reservedFor.
};

// InvalidArgument for a body that is not a ResourceClaim object (not JSON, too large or deep,
// no metadata.uid, results that are not objects).
absl::StatusOr<ParsedClaim> ParseClaim(std::string_view body);

struct PreparedDevice {
  std::string request;
  std::string pool;
  std::string device;       // Our DNS-label name.
  std::string rdma_device;  // "mlx5_3".
  uint32_t port = 0;
  // "fabric.io/rdma=mlx5_3" (its nodes), and on the first device the claim's own (the job
  // environment of all its NICs: the CDI runtime merges every device's edits).
  std::vector<std::string> cdi_ids;
};

struct Prepared {
  std::vector<PreparedDevice> devices;
  // The claim's CDI spec (one device "claim-<uid>": the job environment of its NICs' ports), or
  // empty when the claim holds none of our devices; and its file name in the CDI directory.
  std::string spec_json;
  std::string spec_file;
};

// The claim's path on the API server (GET; "/status" appended for its status).
std::string ClaimApiPath(std::string_view namespace_, std::string_view name);

// The CDI device the claim's own spec names, and that spec's file in the CDI directory.
std::string ClaimCdiDevice(std::string_view uid);
std::string ClaimSpecFile(std::string_view uid);

// What the kubelet gets for `claim` on `node`: FailedPrecondition when it is not allocated, a
// result names another pool (another node's), or a device this node did not publish or that is
// gone; InvalidArgument for a UID a CDI name cannot carry. A claim with no result of ours prepares
// to nothing (another driver's claim).
absl::StatusOr<Prepared> PrepareClaim(const ParsedClaim& claim, std::string_view node,
                                      const std::vector<Device>& published, const v1::Host& host,
                                      const v1::SelectionPolicy& policy);

// What a claim's status says of a prepared device's network (status.devices[].networkData,
// stable in Kubernetes 1.37): the pod's interface on that NIC, its addresses and MAC.
inline constexpr size_t kMaxNetworkIps = 16;  // The API's bound.
struct NetworkData {
  std::string interface_name;
  std::vector<std::string> ips;  // "10.50.0.11/24": an interface's address with its prefix.
  std::string hardware_address;
};
struct DeviceNetwork {
  std::string pool;
  std::string device;
  NetworkData data;
};

// For each prepared device, the interface that fabric-cni's records of the claim's pods put on its
// RDMA port (records of other pods are not looked at; the first record in the given order wins
// when pods share the claim). A device no record names is left out: no pod interface of that NIC
// (yet), or a runtime that does not pass the pod's UID. Addresses that are not an IP with a prefix,
// past the API's 16, or a name or MAC past its lengths are dropped rather than refused by it.
std::vector<DeviceNetwork> NetworkOf(const ParsedClaim& claim,
                                     const std::vector<PreparedDevice>& devices,
                                     const std::vector<podrecord::PodRecord>& records);

// The claim as read (`body`), its status.devices holding `net` for our driver's devices: an entry
// of ours is kept (its conditions and data) with networkData set, one missing is added, every
// other driver's entry is left as it is. nullopt when the status says so already; InvalidArgument
// for a body that is not a ResourceClaim object. The result is what PUT .../status takes, the
// claim's resourceVersion included (a 409 means: read it again).
absl::StatusOr<std::optional<std::string>> ClaimStatusUpdate(std::string_view body,
                                                             const std::vector<DeviceNetwork>& net);

}  // namespace fabric::dra
