// The pod record: what fabric-cni learns at ADD about a pod's RDMA ports (the device behind each
// pod interface and the GID index of the pod's own address) and leaves for the pod's processes,
// which cannot ask the agent and do not know their pod's UID. One JSON file per attachment in
// <envDir>/pods/, named by the pod's network namespace inode (which every container of a pod
// shares and /proc/self/ns/net shows from inside), then the container ID and interface:
//
//   /run/fabric-env/pods/4026532345-<containerid>-net1.json
//
// fabric-env finds its pod's records by listing the directory for "<inode>-" and checks that the
// interfaces they name hold the recorded addresses in its own namespace: a record left by a dead
// pod whose inode was reused names another pod's addresses. DEL removes the attachment's record
// by container ID and interface (its namespace may be gone); CNI GC and the agent remove stale
// ones. Pure: parsing and rendering only (table tests and a fuzz target); no protobuf, so
// fabric-cni compiles it into its static binary (FABRIC_POD_RECORD_SRCS).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/policy/jobenv/jobenv.h"

namespace fabric::podrecord {

inline constexpr char kDirName[] = "pods";
inline constexpr int kFormat = 1;
inline constexpr size_t kMaxBytes = 256u << 10;  // A pod with 32 interfaces is under 16 KiB.
inline constexpr size_t kMaxFiles = 64;          // Records read for one namespace.

struct Interface {
  std::string name;                    // The pod's interface, e.g. "net1".
  std::vector<std::string> addresses;  // "10.50.0.11/24", "fd00::5/64".
  std::string mac;                     // As the previous plugin gave it; may be empty.
};

struct PodRecord {
  // K8S_POD_UID of CNI_ARGS (containerd and CRI-O pass it): the DRA driver finds the interfaces
  // of a claim's pods by it. Empty outside Kubernetes. Added in format 1 (older readers skip it).
  std::string pod_uid;
  std::string container_id;
  std::string ifname;  // CNI_IFNAME of the attachment.
  std::string netns;   // CNI_NETNS as given (a host path).
  uint64_t netns_inode = 0;
  std::vector<Interface> interfaces;
  // The RDMA ports behind the interfaces, as jobenv picks (no GPU): netdev is the pod's
  // interface, gid_index/ipv4/ipv6 the GID of the pod's own address, other_ipv4_gids what the
  // port also carried at ADD (other pods' addresses among them).
  std::vector<jobenv::Pick> ports;
};

// "<inode>-<containerid>-<ifname>.json"; the prefix fabric-env lists for: "<inode>-".
std::string FileName(uint64_t netns_inode, std::string_view container_id, std::string_view ifname);
std::string FilePrefix(uint64_t netns_inode);
// Whether `name` is a record of this attachment (DEL, GC), whatever its inode.
bool IsRecordOf(std::string_view name, std::string_view container_id, std::string_view ifname);
// The inode a record's file name starts with; nullopt for a name that is not a record's.
std::optional<uint64_t> InodeOfName(std::string_view name);

// The file's text: one JSON object, keys in a fixed order.
std::string RecordJson(const PodRecord& r);

// InvalidArgument (with what is wrong) for bytes that are not a record of kFormat or older, over
// kMaxBytes, nested deeper than a record nests, or with a port that names no device.
absl::StatusOr<PodRecord> ParseRecord(std::string_view bytes);

// The interfaces of this process's network namespace and their addresses ("10.50.0.11"): what
// CheckRecord compares with. Filled by the caller (getifaddrs).
using OwnInterfaces = std::map<std::string, std::set<std::string>>;

// OK when every interface the record names is here and holds one of its recorded addresses (an
// interface recorded without addresses only needs to exist); FailedPrecondition naming the first
// that does not: the record is another pod's, left behind.
absl::Status CheckRecord(const PodRecord& r, const OwnInterfaces& own);

}  // namespace fabric::podrecord
