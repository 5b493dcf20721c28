#include "agent/config/config.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/common/fd.h"
#include "agent/common/strings.h"
#include "agent/fabric/probe_schedule/probes_section.h"
#include "agent/policy/health/health_section.h"
#include "agent/policy/select/selection_section.h"
#include "agent/publish/deviceplugin/resource_section.h"
#include "google/protobuf/util/json_util.h"

namespace fabric {
namespace {

// A config file is a few hundred bytes; the cap only stops a wrong path such as /dev/zero from
// being read forever.
constexpr size_t kMaxConfigBytes = 4 << 20;

}  // namespace

absl::StatusOr<v1::AgentConfig> ParseConfig(std::string_view json) {
  v1::AgentConfig config;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json.data(), json.size()), &config, options);
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("config is not a valid AgentConfig: ", status.message().ToString()));
  }
  if (absl::Status s = ValidatePolicy(config.selection()); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("config: ", s.message()));
  }
  if (absl::Status s = probes::ValidateSchedule(config.probes()); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("config: ", s.message()));
  }
  if (absl::Status s =
          deviceplugin::ValidateDevicePlugin(config.device_plugin(), config.selection());
      !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("config: ", s.message()));
  }
  if (absl::Status s = ValidateHealthConfig(config.health()); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("config: ", s.message()));
  }
  return config;
}

absl::StatusOr<v1::AgentConfig> LoadConfig(const std::string& path) {
  // ENOENT -> NotFound, EACCES -> PermissionDenied, ...; the message ends with strerror.
  auto io_error = [&](int err) {
    return absl::ErrnoToStatus(err, absl::StrCat("config file ", path));
  };
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return io_error(errno);
  std::string text;
  char buf[8192];
  while (true) {
    ssize_t n = read(fd.get(), buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error(errno);
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxConfigBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("config file ", path, ": larger than ", kMaxConfigBytes, " bytes"));
    }
  }
  fd.reset();
  absl::StatusOr<v1::AgentConfig> config = ParseConfig(text);
  if (!config.ok()) {
    return absl::Status(config.status().code(),
                        absl::StrCat("config file ", path, ": ", config.status().message()));
  }
  return config;
}

}  // namespace fabric
