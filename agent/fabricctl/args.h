// fabricctl's command line before CLI11 sees it, and the values CLI11 cannot check the way an
// operator needs. Pure: table-driven tests in args_test.cc.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace fabric::ctl {

// Options every command that reads a host or asks the agent shares; they may come before the
// subcommand too ("fabricctl --target=X select ..."). Value options, then flags.
inline constexpr std::string_view kGlobalValueOptions[] = {"--target",   "--timeout", "--tls-ca",
                                                           "--tls-cert", "--tls-key", "--sysfs",
                                                           "--procfs",   "--config"};
inline constexpr std::string_view kGlobalFlags[] = {"--json"};

// The environment variable that sets the default --target.
inline constexpr char kTargetEnv[] = "FABRICCTL_TARGET";

// `args` (argv, program name first) as CLI11 should parse it:
// - "--opt=" with nothing after "=" is refused (CLI11 would take the next argument as the
//   value: `--gpus= --sysfs=H/sys` read "--sysfs=H/sys" as the GPU list);
// - global options given before the subcommand move right after it, where each subcommand
//   defines them (so one that does not apply to it is still refused).
// InvalidArgument names the option; `--help`/`--version` before a subcommand leave args alone.
absl::StatusOr<std::vector<std::string>> PrepareArgs(std::vector<std::string> args);

// --timeout: seconds ("2.5") or a duration with its unit ("500ms", "2s", "1m"), from 10 ms to
// one hour. The error quotes the text and names the accepted forms (the caller adds the flag).
absl::StatusOr<absl::Duration> ParseTimeout(std::string_view text);

// --interval (counters): as --timeout, or zero ("0", "0s": one reading, no rates).
absl::StatusOr<absl::Duration> ParseInterval(std::string_view text);

}  // namespace fabric::ctl
