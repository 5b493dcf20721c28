// Where this process stands, for fabric-env: on the host (the published host as it is), in a
// host-network pod given some NICs (FABRIC_RDMA_DEVICES), or in a pod with its own network
// (fabric-cni's records for this network namespace: pod_host.h narrows the host to them).
//
// The published host carries the agent's network namespace inode: a process in another one is in
// a pod, and the host's GIDs are not its own. Such a process without a valid record of its
// namespace gets no answer (FailedPrecondition, saying why): exec runs its command unchanged.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/publish/hostfile/host_file.h"
#include "agent/publish/podrecord/pod_record.h"

namespace fabric::podenv {

// What ViewFor reads of the process; ReadHere() fills it from the kernel.
struct Here {
  uint64_t netns_inode = 0;  // /proc/self/ns/net; 0 when unreadable (taken as the host's).
  podrecord::OwnInterfaces interfaces;  // getifaddrs
  std::string devices;                  // FABRIC_RDMA_DEVICES; empty when unset
};
Here ReadHere();

struct View {
  hostfile::HostFile file;              // Narrowed to the pod's or the given NICs.
  bool pod = false;                     // Narrowed to fabric-cni's records (NarrowToPod).
  std::vector<std::string> provenance;  // Why this scope (exec --dry-run prints it).
  std::vector<std::string> notes;       // Records skipped, and why.
};

// `records_dir`: where fabric-cni's records are (<host file's directory>/pods). FailedPrecondition:
// a pod without RDMA (no record of its namespace, none valid, or none names an RDMA port);
// InvalidArgument: FABRIC_RDMA_DEVICES names a device the host does not have.
absl::StatusOr<View> ViewFor(hostfile::HostFile file, const std::string& records_dir,
                             const Here& here);

// The records directory beside a host file path: "/run/fabric-env/host.pb" -> ".../pods".
std::string RecordsDirOf(const std::string& host_file_path);

}  // namespace fabric::podenv
