// Shell completion and the man page, generated from the command tree CLI11 already holds, so
// they cannot drift from the flags: `fabricctl completion bash|zsh` and `fabricctl completion
// man`, run at build time and installed by `cmake --install`.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "agent/fabricctl/ctl.h"

namespace fabric::ctl {

// A bash completion script: subcommands, each one's long options, file names after options
// that take a path.
std::string BashCompletion(const CLI::App& app);
// The same for zsh, through its bashcompinit.
std::string ZshCompletion(const CLI::App& app);
// fabricctl(1) in man(7) roff: synopsis, every subcommand with its options, exit status,
// environment.
std::string ManPage(const CLI::App& app);

// Adds `completion SHELL` (bash, zsh or man) to `app`.
Command AddCompletion(CLI::App& app);

}  // namespace fabric::ctl
