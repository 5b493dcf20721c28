// The shared command-line rules that need the CLI11 tree (cli_args.h has those that do not).
#pragma once

#include <CLI/CLI.hpp>
#include <span>
#include <string>

#include "absl/status/status.h"

namespace fabric {

// An option that takes a value refuses a missing one rather than taking the next option as it
// (CLI11 2.1 does: fabric-agent's `--pod-helper --sysfs=/nonexist` ran against the real /sys;
// fabric-probe's `-d -p 18516` made "-p" the device and listened on 18515). A value may start
// with '-' only as a number ("-1"). `args` without the program name; a word that names one of
// `app`'s subcommands makes its options the ones looked up first; checking stops at "--".
// Options whose value is optional, flags, unknown options and short options with the value
// attached ("-dmlx5_0") are CLI11's to judge. InvalidArgument names the option.
absl::Status RefuseMissingValues(const CLI::App& app, std::span<const std::string> args);

}  // namespace fabric
