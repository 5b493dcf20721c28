// The command-line rules every binary shares before CLI11 sees its arguments (fabricctl,
// fabric-agent, fabric-env, fabric-probe): one rule, one home. Pure; cli_args_test.cc.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace fabric {

// "--opt=" with nothing after "=" is refused: CLI11 reads it as "--opt" whose value is still to
// come and takes the next argument (fabricctl's `--gpus= --sysfs=H/sys` read "--sysfs=H/sys" as
// the GPU list; fabric-agent's `--pod-helper= --sysfs=/nonexist` ran against the real /sys).
// `args` are the arguments to check, without the program name; checking stops at "--" (what
// follows is an argument, whatever it looks like). `may_be_empty` names the options whose
// documented form takes an empty value ("--cdi-dir=" turns the CDI spec off). InvalidArgument
// names the option.
absl::Status RefuseEmptyValues(std::span<const std::string> args,
                               std::span<const std::string_view> may_be_empty = {});

}  // namespace fabric
