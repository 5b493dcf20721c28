// The published host file: the agent's host and selection policy (v1::PublishedHost) in
// /run/fabric-env/host.pb, for fabric-env and `fabricctl exec` to select from without an RPC.
// The directory is world-readable: the file holds what sysfs shows every local user (devices,
// ports, GIDs, addresses) plus the selection policy; --host-file-dir= turns it off.
//
// Parsing apart from reading: ParseHostFile takes the bytes (fuzzed); ReadHostFile reads a file
// with a size bound.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "fabric/v1/agent.pb.h"
#include "fabric/v1/host.pb.h"
#include "fabric/v1/select.pb.h"

namespace fabric::hostfile {

inline constexpr char kDefaultDir[] = "/run/fabric-env";
inline constexpr char kFileName[] = "host.pb";
inline constexpr char kDefaultPath[] = "/run/fabric-env/host.pb";
inline constexpr uint32_t kFormat = 1;
// HostFs's read cap; the 512-VF example host is far below it.
inline constexpr size_t kMaxBytes = 16u << 20;

// The file's bytes: deterministic, so an unchanged host and policy write nothing. `netns_inode`:
// the agent's network namespace (OwnNetnsInode), which tells fabric-env whether it runs in a pod.
std::string HostFileBytes(const v1::Host& host, const v1::SelectionPolicy& policy,
                          uint64_t netns_inode = 0);

// This process's network namespace inode (/proc/self/ns/net); 0 when it cannot be read.
uint64_t OwnNetnsInode();

// InvalidArgument for bytes that are not a PublishedHost (or exceed kMaxBytes),
// FailedPrecondition for a newer format or a file without a host.
absl::StatusOr<v1::PublishedHost> ParseHostFile(std::string_view bytes);

struct HostFile {
  v1::PublishedHost published;
  absl::Time modified;  // When the agent last changed it: how old the facts may be.
};

// NotFound when there is no file (the message says what writes it), PermissionDenied,
// InvalidArgument/FailedPrecondition as ParseHostFile; every message names the path.
absl::StatusOr<HostFile> ReadHostFile(const std::string& path);

}  // namespace fabric::hostfile
