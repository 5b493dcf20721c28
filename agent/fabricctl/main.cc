// fabricctl: queries of a host's RDMA fabric for operators and launchers. Every subcommand asks
// the node's fabric-agent (--target) unless --sysfs or --procfs asks for local discovery.
//
// Exit codes: ExitCodeFor (ctl.h). Each command's flags are defined next to it.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/common/cli_args_cli11.h"
#include "agent/common/excerpt.h"
#include "agent/common/version.h"
#include "agent/fabricctl/args.h"
#include "agent/fabricctl/completion.h"
#include "agent/fabricctl/ctl.h"
#include "agent/policy/health/health.h"

namespace fabric::ctl {
namespace {

int Main(int argc, char** argv) {
  CLI::App app{
      "fabricctl: RDMA NICs, GPUs and their topology on this host, and the NCCL/UCX "
      "environment for a set of GPUs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", absl::StrCat("fabricctl ", kFabricVersion));
  // Flags shared by every subcommand; accepted before or after it.
  app.option_defaults()->always_capture_default();
  // Only one subcommand runs: they share the connection flags.
  CommonOptions common;
  if (const char* env = std::getenv(kTargetEnv); env != nullptr && *env != '\0') {
    common.target = env;
  }
  const std::vector<Command> commands = {
      AddInventory(app, common), AddTopo(app, common),          AddNeighbors(app, common),
      AddSelect(app, common),    AddPlace(app, common),         AddEnv(app, common),
      AddExec(app, common),      AddHealth(app, common),        AddCounters(app, common),
      AddAnnounce(app, common),  AddAnnouncements(app, common), AddProbe(app, common),
      AddProbes(app, common),    AddWatch(app, common),         AddVersion(app, common),
      AddCdi(app, common),       AddDoctor(app, common),        AddCompletion(app)};
  RefuseEmptyValues(app);

  const std::vector<std::string> argv_copy(argv, argv + argc);
  // For health a bad argument is UNKNOWN, as monitoring plugins report it; global options may
  // come before the subcommand.
  const bool is_health = SubcommandOf(argv_copy) == "health" || SubcommandOf(argv_copy) == "doctor";
  // exec's command and its arguments are not fabricctl's (exec takes them as its prefix command).
  if (SubcommandOf(argv_copy) == "exec") app.allow_extras();
  auto prepared = PrepareArgs(argv_copy);
  if (!prepared.ok()) {
    std::fprintf(stderr, "fabricctl: %s\nRun with --help for more information.\n",
                 std::string(prepared.status().message()).c_str());
    return is_health ? HealthExitCode(v1::SEVERITY_UNKNOWN) : ExitCodeFor(prepared.status());
  }
  std::vector<std::string>& args = *prepared;
  // An option missing its value would take the next option as it (`topo --sysfs --json` read
  // "--json" as the sysfs root): the shared rule. exec's command and its words are its own.
  if (SubcommandOf(argv_copy) != "exec" && args.size() > 1) {
    if (absl::Status s = fabric::RefuseMissingValues(app, std::span(args).subspan(1)); !s.ok()) {
      std::fprintf(stderr, "fabricctl: %s\nRun with --help for more information.\n",
                   std::string(s.message()).c_str());
      return is_health ? HealthExitCode(v1::SEVERITY_UNKNOWN) : ExitCodeFor(s);
    }
  }
  // CLI11 answers an unknown subcommand with "A subcommand is required": name it instead.
  if (args.size() > 1 && args[1][0] != '-') {
    std::vector<std::string> names;
    for (const Command& c : commands) names.push_back(c.cmd->get_name());
    if (std::find(names.begin(), names.end(), args[1]) == names.end()) {
      return Finish(absl::InvalidArgumentError(
          absl::StrCat("unknown subcommand ", Excerpt(args[1], 40), " (",
                       absl::StrJoin(names, ", "), "; --help for more)")));
    }
  }
  try {
    // CLI11 parses a reversed vector (it pops from the back).
    std::vector<std::string> reversed(args.rbegin(), args.rend() - 1);
    app.parse(std::move(reversed));
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    Outcome usage(absl::InvalidArgumentError(e.what()));
    usage.reported = true;
    if (is_health) usage.verdict = v1::SEVERITY_UNKNOWN;
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
