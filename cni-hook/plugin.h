// fabric-cni's commands (ADD, DEL, CHECK, VERSION, STATUS, GC): what cni.h parsed, done through
// the announce library (netns, interface facts, packet sockets, the Job, the agent hand-off).
//
// ADD sends the first announcement of every pod interface before it returns, then hands the
// repeats to the agent (SCM_RIGHTS over its Unix socket) or, when no agent answers, to a detached
// child of its own that DEL (or GC) cancels through a pid file in stateDir.
#pragma once

#include <string>
#include <string_view>

#include "cni-hook/cni.h"

namespace fabric::cni {

struct PluginOptions {
  absl::Duration agent_timeout = absl::Milliseconds(100);  // ADD's hand-off
  absl::Duration cancel_timeout = absl::Milliseconds(50);  // DEL's cancel, best effort
};

// Runs one command. `out` receives what goes to stdout (the result, or the error JSON); the
// return value is the exit status (0 on success). Logs go to stderr.
int RunPlugin(const EnvMap& env, std::string_view stdin_bytes, const PluginOptions& options,
              std::string* out);

}  // namespace fabric::cni
