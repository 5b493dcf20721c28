// fabricctl exec: computes this process's job environment (the job's NCCL lines and its own
// pins), keeps every variable the caller already set, and execve's the command, so shells and
// children inherit it. Usable as a container entrypoint prefix, inside torchrun/mpirun/srun
// command lines and on bare hosts.
//
// Exit: every error before the command runs exits 2 with one line saying why (--best-effort
// runs the command anyway, without fabric settings); after execve the status is the command's.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/common/shell.h"
#include "agent/fabricctl/ctl.h"
#include "agent/fabricctl/host_source.h"
#include "agent/fabricctl/job_env.h"
#include "agent/policy/jobenv/format.h"

namespace fabric::ctl {
namespace {

// How long exec waits for the agent unless --timeout says otherwise: a job start must not hang.
constexpr double kExecTimeoutSeconds = 2;

struct ExecOptions {
  JobEnvOptions env;
  LocalOptions local;  // --sysfs/--procfs/--config: discover here only.
  LocalOptions fallback;
  bool no_fallback = false;
  bool dry_run = false;
  bool best_effort = false;
};

// The agent's answer; when the agent cannot be reached (as opposed to refusing the request),
// local discovery from the fallback roots, with a note saying so.
absl::StatusOr<JobEnvAnswer> Compute(const CLI::App* cmd, const CommonOptions& common,
                                     const ExecOptions& opt, std::vector<std::string>* notes) {
  if (cmd->count("--sysfs") + cmd->count("--procfs") > 0) {
    return AskJobEnv(*LocalHostSource(opt.local), opt.env, /*keep_set=*/true);
  }
  std::unique_ptr<HostSource> agent = AgentHostSource(common);
  absl::StatusOr<JobEnvAnswer> a = AskJobEnv(*agent, opt.env, /*keep_set=*/true);
  const absl::StatusCode code = a.status().code();
  if (a.ok() || opt.no_fallback || code == absl::StatusCode::kInvalidArgument ||
      code == absl::StatusCode::kNotFound || code == absl::StatusCode::kFailedPrecondition) {
    return a;
  }
  const std::string why = absl::StrCat("the agent did not answer (", a.status().message(), ")");
  absl::StatusOr<JobEnvAnswer> local =
      AskJobEnv(*LocalHostSource(opt.fallback), opt.env, /*keep_set=*/true);
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
  if (!argv.empty() && argv.front() == "--") argv.erase(argv.begin());
  if (argv.empty()) {
    return absl::InvalidArgumentError("no command: fabricctl exec [OPTIONS] -- CMD [ARGS...]");
  }
  std::vector<std::string> notes;
  absl::StatusOr<JobEnvAnswer> a = Compute(cmd, common, opt, &notes);
  if (!a.ok() && !opt.best_effort) {
    return absl::InvalidArgumentError(
        absl::StrCat(a.status().message(), " (--best-effort runs the command anyway)"));
  }
  jobenv::EnvMap env;
  if (a.ok()) {
    env = a->env;
    notes.insert(notes.end(), a->asked.notes.begin(), a->asked.notes.end());
    notes.insert(notes.end(), a->selection.notes().begin(), a->selection.notes().end());
  } else {
    std::fprintf(stderr, "fabricctl exec: %s; running %s without fabric settings\n",
                 std::string(a.status().message()).c_str(), argv.front().c_str());
  }
  if (opt.dry_run) {
    std::vector<std::string> words;
    for (const std::string& w : argv) words.push_back(ShellQuote(w));
    std::string out = absl::StrCat("# would run: ", absl::StrJoin(words, " "), "\n");
    if (a.ok()) {
      for (const std::string& p : a->asked.provenance) absl::StrAppend(&out, "# ", p, "\n");
      for (const auto& [k, v] : a->selection.env()) {
        if (!env.contains(k)) absl::StrAppend(&out, "# kept as you set it: ", k, "\n");
      }
    }
    out += jobenv::FormatShell(env);
    for (const std::string& n : notes) absl::StrAppend(&out, "# note: ", n, "\n");
    Print(out);
    return {};
  }
  for (const std::string& n : notes) std::fprintf(stderr, "fabricctl exec: note: %s\n", n.c_str());
  for (const auto& [k, v] : env) {
    // overwrite=0: a variable set meanwhile (none is) would still win.
    if (setenv(k.c_str(), v.c_str(), 0) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot set ", k, ": ", std::strerror(errno)));
    }
  }
  std::vector<char*> args;
  for (std::string& s : argv) args.push_back(s.data());
  args.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  execvp(args[0], args.data());
  return absl::InvalidArgumentError(
      absl::StrCat("cannot run \"", argv.front(), "\": ", std::strerror(errno)));
}

}  // namespace

Command AddExec(CLI::App& app, CommonOptions& common) {
  CLI::App* cmd = app.add_subcommand(
      "exec", "run a command with this process's job environment (the caller's settings win)");
  cmd->prefix_command();  // The first argument that is not exec's own starts the command.
  auto opt = std::make_shared<ExecOptions>();
  AddGpusFlag(cmd, &opt->env.gpus, "job");
  AddJobEnvFlags(cmd, &opt->env, "auto");
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
