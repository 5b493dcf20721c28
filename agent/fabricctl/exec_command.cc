// fabricctl exec: computes this process's job environment (the job's NCCL lines and its own
// pins), keeps every variable the caller already set, and execve's the command, so shells and
// children inherit it. Usable as a container entrypoint prefix, inside torchrun/mpirun/srun
// command lines and on bare hosts.
//
// Exit: every error before the command runs exits 2 with one line saying why (--best-effort
// runs the command anyway, without fabric settings); after execve the status is the command's.
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "agent/fabricctl/ctl.h"
#include "agent/fabricctl/host_source.h"
#include "agent/inventory/discovery/pci_names.h"
#include "agent/launch/job_env.h"
#include "agent/publish/hostfile/host_file.h"

namespace fabric::ctl {
namespace {

// How long exec waits for the agent unless --timeout says otherwise: a job start must not hang.
constexpr double kExecTimeoutSeconds = 2;

struct ExecOptions {
  launch::JobEnvOptions env;
  std::string host_file = hostfile::kDefaultPath;
  bool no_host_file = false;
  LocalOptions local;  // --sysfs/--procfs/--config: discover here only.
  LocalOptions fallback;
  bool no_fallback = false;
  bool dry_run = false;
  bool best_effort = false;
};

launch::SelectFn SelectWith(HostSource& source) {
  return [&source](const v1::SelectNicsRequest& r) { return source.Select(r); };
}

// The published host file when there is one (no RPC, and it works for users the agent's socket
// does not admit); else the agent's answer; when the agent cannot be reached (as opposed to
// refusing the request), local discovery from the fallback roots, with a note saying so.
absl::StatusOr<launch::JobEnvAnswer> Compute(const CLI::App* cmd, const CommonOptions& common,
                                             const ExecOptions& opt,
                                             std::vector<std::string>* notes) {
  DisableDefaultPciNames();  // Discovery here shows no names: a job's start skips pci.ids.
  if (cmd->count("--sysfs") + cmd->count("--procfs") > 0) {
    auto local = LocalHostSource(opt.local);
    return launch::AskJobEnv(SelectWith(*local), opt.env, /*keep_set=*/true);
  }
  // An agent named (--target, $FABRICCTL_TARGET) is asked; so is the default one after
  // --no-host-file.
  if (!opt.no_host_file && common.target == kDefaultTarget) {
    absl::StatusOr<hostfile::HostFile> file = hostfile::ReadHostFile(opt.host_file);
    // The file answers (or refuses the request, as the agent would) when it can be read.
    if (file.ok()) return launch::AskPublishedHost(*file, opt.host_file, opt.env);
    if (!absl::IsNotFound(file.status()) || cmd->count("--host-file") > 0) {
      notes->push_back(absl::StrCat(file.status().message(), ": asked the agent"));
    }
  }
  std::unique_ptr<HostSource> agent = AgentHostSource(common);
  absl::StatusOr<launch::JobEnvAnswer> a =
      launch::AskJobEnv(SelectWith(*agent), opt.env, /*keep_set=*/true);
  const absl::StatusCode code = a.status().code();
  if (a.ok() || opt.no_fallback || code == absl::StatusCode::kInvalidArgument ||
      code == absl::StatusCode::kNotFound || code == absl::StatusCode::kFailedPrecondition) {
    return a;
  }
  const std::string why = absl::StrCat("the agent did not answer (", a.status().message(), ")");
  auto fallback = LocalHostSource(opt.fallback);
  absl::StatusOr<launch::JobEnvAnswer> local =
      launch::AskJobEnv(SelectWith(*fallback), opt.env, true);
  if (!local.ok()) {
    return absl::Status(local.status().code(),
                        absl::StrCat(why, ", nor did discovery from ", opt.fallback.sysfs, " (",
                                     local.status().message(), ")"));
  }
  notes->push_back(absl::StrCat(why, ": discovered from ", opt.fallback.sysfs, " here"));
  return local;
}

Outcome Exec(const CLI::App* cmd, const CommonOptions& common, const ExecOptions& opt,
             std::vector<std::string> argv) {
  launch::ExecRequest req{.argv = std::move(argv),
                          .dry_run = opt.dry_run,
                          .best_effort = opt.best_effort,
                          .program = "fabricctl exec"};
  return launch::ExecWithJobEnv(std::move(req), [&](std::vector<std::string>* notes) {
    return Compute(cmd, common, opt, notes);
  });
}

}  // namespace

Command AddExec(CLI::App& app, CommonOptions& common) {
  CLI::App* cmd = app.add_subcommand(
      "exec", "run a command with this process's job environment (the caller's settings win)");
  cmd->prefix_command();  // The first argument that is not exec's own starts the command.
  auto opt = std::make_shared<ExecOptions>();
  launch::AddGpusFlag(cmd, &opt->env.gpus, "job");
  launch::AddJobEnvFlags(cmd, &opt->env, "auto");
  cmd->add_option("--host-file", opt->host_file,
                  "the agent's published host (fabric-agent --host-file-dir), answered from "
                  "without an RPC when it is there (not with --target or $FABRICCTL_TARGET)")
      ->capture_default_str();
  cmd->add_flag("--no-host-file", opt->no_host_file, "ask the agent, not its published host");
  cmd->add_option("--sysfs", opt->local.sysfs, "discover here from this sysfs root, not the agent");
  cmd->add_option("--procfs", opt->local.procfs, "procfs root for --sysfs discovery");
  cmd->add_option("--config", opt->local.config,
                  "agent config file (JSON: selection policy, static env) for --sysfs discovery");
  cmd->add_option("--fallback-sysfs", opt->fallback.sysfs,
                  "sysfs root to discover from when the agent does not answer")
      ->capture_default_str();
  cmd->add_option("--fallback-procfs", opt->fallback.procfs, "procfs root for the fallback")
      ->capture_default_str();
  cmd->add_flag("--no-fallback", opt->no_fallback, "fail when the agent does not answer");
  cmd->add_flag("--dry-run", opt->dry_run, "print what would be set and why; run nothing");
  cmd->add_flag("--best-effort", opt->best_effort,
                "run the command without fabric settings when they cannot be computed");
  AddAgentFlags(cmd, &common, kTargetHelp);
  cmd->footer(
      "Usage: fabricctl exec [OPTIONS] -- CMD [ARGS...]\n"
      "Every variable already set in the environment is kept, even when empty.");
  return {cmd, [cmd, &common, opt]() -> Outcome {
            if (cmd->count("--timeout") == 0) common.timeout_s = kExecTimeoutSeconds;
            // After "--" CLI11 leaves the words with the parent; before it, with exec.
            std::vector<std::string> argv = cmd->remaining();
            if (argv.empty() && cmd->get_parent() != nullptr) argv = cmd->get_parent()->remaining();
            return Exec(cmd, common, *opt, std::move(argv));
          }};
}

}  // namespace fabric::ctl
