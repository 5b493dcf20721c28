// fabricctl's command line before CLI11 sees it, and the values CLI11 cannot check the way an
// operator needs. Pure: table-driven tests in args_test.cc.
#pragma once

#include <algorithm>
#include <array>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace fabric::ctl {

// Options every command that reads a host or asks the agent shares; they may come before the
// subcommand too ("fabricctl --target=X select ..."). How to reach the agent (AddAgentFlags
// defines them; --sysfs/--procfs refuse them):
inline constexpr std::string_view kAgentValueOptions[] = {"--target", "--timeout", "--tls-ca",
                                                          "--tls-cert", "--tls-key"};
// Local discovery's:
inline constexpr std::string_view kLocalValueOptions[] = {"--sysfs", "--procfs", "--config"};
// Both, then the flags.
inline constexpr auto kGlobalValueOptions = [] {
  std::array<std::string_view, std::size(kAgentValueOptions) + std::size(kLocalValueOptions)> all;
  auto end = std::copy(std::begin(kAgentValueOptions), std::end(kAgentValueOptions), all.begin());
  std::copy(std::begin(kLocalValueOptions), std::end(kLocalValueOptions), end);
  return all;
}();
inline constexpr std::string_view kGlobalFlags[] = {"--json"};
// All of them, value options first.
std::vector<std::string> GlobalOptionNames();

// The environment variable that sets the default --target.
inline constexpr char kTargetEnv[] = "FABRICCTL_TARGET";

// `args` (argv, program name first) as CLI11 should parse it:
// - "--opt=" with nothing after "=" is refused (RefuseEmptyValues, agent/common/cli_args.h);
// - global options given before the subcommand move right after it, where each subcommand
//   defines them (so one that does not apply to it is still refused).
// InvalidArgument names the option; `--help`/`--version` before a subcommand leave args alone.
absl::StatusOr<std::vector<std::string>> PrepareArgs(std::vector<std::string> args);

// The subcommand's name as PrepareArgs finds it (after the global options and their values),
// also when PrepareArgs refuses the arguments; "" when there is none.
std::string SubcommandOf(const std::vector<std::string>& args);

// --timeout: seconds ("2.5") or a duration with its unit ("500ms", "2s", "1m"), from 10 ms to
// one hour. The error quotes the text and names the accepted forms (the caller adds the flag).
absl::StatusOr<absl::Duration> ParseTimeout(std::string_view text);

// --interval (counters): as --timeout, or zero ("0", "0s": one reading, no rates).
absl::StatusOr<absl::Duration> ParseInterval(std::string_view text);

}  // namespace fabric::ctl
