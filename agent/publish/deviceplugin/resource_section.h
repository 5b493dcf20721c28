// The config file's `device_plugin` section (fabric.v1.DevicePluginConfig): its checks, called
// from ParseConfig, and the names derived from a resource's name (its socket, its shared IDs).
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "fabric/v1/select.pb.h"

namespace fabric::deviceplugin {

// k8s-rdma-shared-dev-plugin's rdmaHcaMax: what a SHARED resource advertises by default.
inline constexpr uint32_t kDefaultSharedCount = 1000;
// The most a SHARED resource may advertise: each is a Device in every ListAndWatch message.
inline constexpr uint32_t kMaxSharedCount = 10000;
inline constexpr int kMaxResources = 64;

// Whether Kubernetes takes `name` as an extended resource name: "domain/name", the domain a
// DNS-1123 subdomain outside kubernetes.io, the name a qualified name's part (at most 63
// characters, alphanumerics and '-', '_', '.', beginning and ending with an alphanumeric).
// InvalidArgument says why not.
absl::Status ValidResourceName(std::string_view name);

// The resource's name in file names and device IDs: '/' becomes '-' ("rdma/hca": "rdma-hca").
std::string Sanitized(std::string_view resource);

// Its socket's name in the kubelet's directory: "fabric-rdma-hca.sock".
std::string SocketName(std::string_view resource);

// Its socket's path in `dir`, as the agent binds it.
std::string SocketPath(std::string_view dir, std::string_view resource);

// The longest path bind(2) takes for a Unix socket: sockaddr_un's sun_path less its NUL.
size_t MaxSocketPath();

// Every resource's socket path in `dir` fits MaxSocketPath(); InvalidArgument names the resource,
// the path's length and the bound. A longer one was retried forever while the log said it was
// served.
absl::Status CheckSocketPaths(std::string_view dir, const v1::DevicePluginConfig& config);

// SHARED devices' ID prefix: the name after the '/' ("hca"), cut so that "<prefix>-<N>" stays
// within the 63 characters the kubelet takes for an ID.
std::string SharedIdPrefix(std::string_view resource);

// shared_count, or its default.
uint32_t SharedCount(const v1::RdmaResource& r);

// Every resource: a valid name, not twice, a mode, shared_count only with SHARED and within
// kMaxSharedCount, a socket name that fits MaxSocketPath() in "/", at least one selector, each
// selector's values well formed (hex IDs, known link types, role and function; rails among
// `policy.rails`). InvalidArgument names the resource and the field.
absl::Status ValidateDevicePlugin(const v1::DevicePluginConfig& config,
                                  const v1::SelectionPolicy& policy);

}  // namespace fabric::deviceplugin
