// The CNI side of fabric-cni, pure: the CNI_* environment, the network config on stdin (spec
// 0.4.0, 1.0.0 and 1.1.0), the pod interfaces and addresses in prevResult, and the JSON the
// plugin prints. Nothing here touches the OS (plugin.h does), so all of it is table-tested and
// fuzzed.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/common/log.h"
#include "agent/fabric/announce/announce.h"
#include "agent/fabric/announce/pod_routing.h"
#include "nlohmann/json.hpp"

namespace fabric::cni {

using Json = nlohmann::ordered_json;  // ordered: ADD prints prevResult back key for key

inline constexpr const char* kSupportedVersions[] = {"0.4.0", "1.0.0", "1.1.0"};
inline constexpr char kLatestVersion[] = "1.1.0";
inline constexpr char kDefaultStateDir[] = "/run/fabric-cni";

// The spec's well-known error codes, plus ours (100+).
enum Code : int {
  kIncompatibleVersion = 1,
  kUnsupportedField = 2,
  kUnknownContainer = 3,
  kInvalidEnv = 4,
  kIoFailure = 5,
  kDecodeFailure = 6,
  kInvalidConfig = 7,
  kTryAgain = 11,
  kNotAvailable = 50,      // STATUS: cannot serve ADD now
  kInternal = 100,         // anything unexpected
  kAnnounceFailed = 101,   // no packet socket on a pod interface (CAP_NET_RAW?)
  kAddressConflict = 102,  // conflictProbe found another owner of a pod address
};

// An absl::Status carrying a CNI error code (as a payload) and optional details.
absl::Status Error(int code, std::string_view msg, std::string_view details = {});
// The CNI code of `s` (its payload; otherwise mapped from the absl code, 100 by default).
int CodeOf(const absl::Status& s);
std::string DetailsOf(const absl::Status& s);

enum class Command { kAdd, kDel, kCheck, kVersion, kStatus, kGc };
std::string_view CommandName(Command c);

// CNI_* variables. Which are required depends on the command (as libcni's skel does it).
struct Env {
  Command command = Command::kVersion;
  std::string container_id;                               // CNI_CONTAINERID
  std::string netns;                                      // CNI_NETNS (may be empty for DEL)
  std::string ifname;                                     // CNI_IFNAME
  std::vector<std::pair<std::string, std::string>> args;  // CNI_ARGS "K=V;K=V"
  std::string path;                                       // CNI_PATH
};
using EnvMap = std::map<std::string, std::string, std::less<>>;
// Errors are code 4 (invalid env). Container ids and interface names are checked as the spec
// restricts them, which also keeps them safe in the state and env file names built from them.
absl::StatusOr<Env> ParseEnv(const EnvMap& env);
// K8S_POD_UID of CNI_ARGS (containerd and CRI-O pass it), when it looks like a UID (1 to 64
// letters, digits and dashes): the pod record carries it for the DRA driver. "" otherwise.
std::string PodUid(const Env& env);

struct Attachment {  // GC's cni.dev/valid-attachments
  std::string container_id;
  std::string ifname;
};

// The network config on stdin, with our keys (all optional) mapped onto an announce::Plan.
struct Config {
  std::string cni_version;
  std::string name;
  std::string type;
  std::optional<Json> prev_result;  // raw, exactly as given (absent, or null, = nullopt)
  Json runtime_config;              // raw; null when absent
  announce::Plan plan;
  std::string agent_socket;  // default announce::kDefaultHandoffSocket
  bool require_agent = false;
  std::string env_dir;  // empty: no env file
  std::string state_dir = kDefaultStateDir;
  // Where RDMA devices are looked up; another root only for example hosts (tests, demos).
  std::string sysfs_root = "/sys";
  std::optional<LogLevel> log_level;
  // "podRouting": {"mode": "auto"|"on"|"off", "tableRange": [first, last], "rulePriority": n}.
  announce::RoutingConfig routing;
  std::optional<std::vector<Attachment>> valid_attachments;  // GC only
};

// The most stdin a config may have (it is a few KiB); a runaway writer is not read further.
inline constexpr size_t kMaxStdinBytes = 4 << 20;

// Parses stdin for `command`. Malformed JSON and stdin over kMaxStdinBytes are code 6; an
// unsupported cniVersion code 1; wrong types or out-of-range values of our keys code 7 naming the
// key; a missing prevResult on ADD or CHECK code 7 (we are a chained plugin). Unknown keys are
// ignored: other plugins' keys share the object.
absl::StatusOr<Config> ParseConfig(std::string_view stdin_bytes, Command command);

// The cniVersion of stdin when it is readable, for error replies and VERSION; "" otherwise.
std::string PeekVersion(std::string_view stdin_bytes);

// A container-side interface of prevResult (interfaces[] entry with a sandbox) and the addresses
// attributed to it through ips[].interface.
struct PodInterface {
  std::string name;
  std::string mac;      // as given; may be empty
  std::string sandbox;  // netns path as the previous plugin wrote it
  std::vector<announce::Address> addresses;
  // prevResult.routes[] whose gateway lies in one of its subnets (with one container interface:
  // all of them).
  std::vector<announce::Route> routes;
};
// ips without an interface index go to the only container interface when there is exactly one.
// A bad address, gateway or index is code 7 naming the field.
absl::StatusOr<std::vector<PodInterface>> PodInterfaces(const Json& prev_result,
                                                        std::string_view cni_version);

// "10.1.0.5/16" or "fd00::5/64" (the prefix is required).
absl::StatusOr<announce::Address> ParseCidr(std::string_view cidr);

// The name of a detached repeater's state file in stateDir. It holds
// "<pid> <starttime> <containerid> <ifname>\n" (starttime from /proc/<pid>/stat, so a reused pid
// is never signalled).
std::string StateFileName(std::string_view container_id, std::string_view ifname);
// The record of an attachment's pod routing in stateDir (cni-hook/routing.h):
// "<containerid>-<ifname>.routes".
std::string RoutingFileName(std::string_view container_id, std::string_view ifname);

// What ADD prints: prevResult unchanged (plus cniVersion when it had none, which libcni needs).
std::string ResultJson(const Config& config);
// {"cniVersion","code","msg","details"} for `status` (which must not be OK).
std::string ErrorJson(std::string_view cni_version, const absl::Status& status);
// {"cniVersion","supportedVersions"}.
std::string VersionJson();

}  // namespace fabric::cni
