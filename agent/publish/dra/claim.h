// A ResourceClaim as the kubelet plugin reads it, and what preparing it gives the container, pure:
// the claim's results for our driver parsed from the API server's JSON (outside bytes: bounded,
// a fuzz target), checked against this node's pool and the devices it published, then the CDI
// device IDs for the kubelet: each NIC's own device in the agent's CDI spec, and one device of
// the claim's own spec carrying the job environment for exactly those NICs.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/publish/dra/devices.h"
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

}  // namespace fabric::dra
