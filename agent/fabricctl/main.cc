// fabricctl: queries of a host's RDMA fabric for operators and launchers. Every subcommand asks
// the node's fabric-agent (--target) unless --sysfs or --procfs asks for local discovery.
//
// Exit codes: ExitCodeFor (ctl.h). Each command's flags are defined next to it.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/fabricctl/ctl.h"

namespace fabric::ctl {
namespace {

int Main(int argc, char** argv) {
  CLI::App app{
      "fabricctl: RDMA NICs, GPUs and their topology on this host, and the NCCL/UCX "
      "environment for a set of GPUs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "fabricctl 0.1.0");
  // Flags shared by every subcommand; accepted before or after it.
  app.option_defaults()->always_capture_default();
  // Only one subcommand runs: they share the connection flags.
  CommonOptions common;
  const std::vector<Command> commands = {
      AddInventory(app, common), AddTopo(app, common),          AddNeighbors(app, common),
      AddSelect(app, common),    AddEnv(app, common),           AddHealth(app, common),
      AddAnnounce(app, common),  AddAnnouncements(app, common), AddProbe(app, common),
      AddProbes(app, common),    AddWatch(app, common)};
  const Command& health = *std::find_if(commands.begin(), commands.end(), [](const Command& c) {
    return c.cmd->get_name() == "health";
  });

  // CLI11 answers an unknown subcommand with "A subcommand is required": name it instead.
  if (argc > 1 && argv[1][0] != '-') {
    std::vector<std::string> names;
    for (const Command& c : commands) names.push_back(c.cmd->get_name());
    if (std::find(names.begin(), names.end(), argv[1]) == names.end()) {
      return Finish(absl::InvalidArgumentError(absl::StrCat("unknown subcommand \"", argv[1],
                                                            "\" (", absl::StrJoin(names, ", "),
                                                            "; --help for more)")));
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    Outcome usage(absl::InvalidArgumentError(e.what()));
    usage.reported = true;
    // For health a bad argument is UNKNOWN, as monitoring plugins report it.
    if (health.cmd->parsed()) usage.verdict = v1::SEVERITY_UNKNOWN;
    return ExitCodeFor(usage);
  }
  for (const Command& c : commands) {
    if (c.cmd->parsed()) return Finish(c.run());
  }
  return Finish(absl::InternalError("no subcommand parsed"));  // require_subcommand(1)
}

}  // namespace
}  // namespace fabric::ctl

int main(int argc, char** argv) { return fabric::ctl::Main(argc, argv); }
