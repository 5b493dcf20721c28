// fabricctl's shell completion and man page, generated from the command tree CLI11 already
// holds (agent/common/cli_docs.h), so they cannot drift from the flags: `fabricctl completion
// bash|zsh|man`, run at build time and installed by `cmake --install`.
#pragma once

#include <CLI/CLI.hpp>

#include "agent/fabricctl/ctl.h"

namespace fabric::ctl {

// Adds `completion SHELL` (bash, zsh or man) to `app`.
Command AddCompletion(CLI::App& app);

}  // namespace fabric::ctl
