// The agent's config file: the proto3 JSON mapping of fabric.v1.AgentConfig. The one loader: the
// daemon and fabricctl --config read it here, and every section is checked here (`selection`
// in selection_section.h, `probes` in probes_section.h, `device_plugin` in
// agent/publish/deviceplugin/resource_section.h).
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fabric/v1/select.pb.h"

namespace fabric {

// Parses and validates config text, every section. Unknown fields are an error: a misspelt key
// would otherwise fall back to a default without anyone noticing.
absl::StatusOr<v1::AgentConfig> ParseConfig(std::string_view json);

// Reads `path` and parses it; every error names the path.
absl::StatusOr<v1::AgentConfig> LoadConfig(const std::string& path);

}  // namespace fabric
