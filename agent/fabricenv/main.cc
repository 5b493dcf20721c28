// fabric-env: the job environment at process start, from the agent's published host file
// (/run/fabric-env/host.pb) with no RPC. A static binary (no gRPC, no shared libraries), so it
// adds about a millisecond to a task start and runs in any container it is mounted into.
//
//   fabric-env exec [--gpus=job] [--rank-gpu=auto] -- CMD [ARGS...]
//   fabric-env env  [--gpus=job] [--rank-gpu=none] [--format=shell|json|nccl-conf|nul]
//   fabric-env doctor [--env-file F | --gpus G] [--json]
//
// Same request, same rules, same bytes as `fabricctl env`/`exec` against the agent
// (agent/launch/job_env.h). Exit: 2 for every error before the command runs (exec) or a bad
// request (env), 1 when env has no answer; after execve the command's own.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "agent/common/cli_args.h"
#include "agent/common/cli_args_cli11.h"
#include "agent/common/cli_docs.h"
#include "agent/common/cli_docs_cli11.h"
#include "agent/common/version.h"
#include "agent/fabricenv/pod_host.h"
#include "agent/fabricenv/pod_view.h"
#include "agent/inventory/discovery/pci_names.h"
#include "agent/launch/doctor_run.h"
#include "agent/launch/job_env.h"
#include "agent/publish/hostfile/host_file.h"

namespace fabric {
namespace {

docs::Page Page(const CLI::App& app) {
  docs::Page p = docs::PageOf(app, "fabric-env", 1, "[--host-file PATH] exec|env [OPTIONS]");
  p.description = {
      "fabric-env gives a job's process its fabric settings (NCCL/RCCL, UCX, NVSHMEM, "
      "Mooncake, UCCL, SGLang, vLLM) at start, as `fabricctl exec` does, but from the host "
      "fabric-agent(8) publishes in a world-readable file instead of over its socket: no RPC, "
      "no shared library, so it suits every task start (srun, torchrun, a container's "
      "entrypoint) and users the agent's socket does not admit.",
      "The job's GPUs and this process's GPU come from the launcher's variables "
      "(SLURM_STEP_GPUS, *_VISIBLE_DEVICES, LOCAL_RANK, SLURM_LOCALID, ...). Every variable "
      "already set is kept."};
  p.sections.push_back(
      {"EXIT STATUS",
       {},
       {{"0", "", "env printed the answer; doctor: OK"},
        {"1", "", "env: no answer (no published host, no RDMA device); doctor: WARNING"},
        {"2", "",
         "a bad request, or exec could not run the command (the message "
         "says why; --best-effort runs it anyway); doctor: CRITICAL"},
        {"3", "", "doctor: UNKNOWN (or nothing to judge)"}}});
  p.sections.push_back(
      {"FILES",
       {},
       {{hostfile::kDefaultPath, "", "the published host (fabric-agent --host-file-dir)"},
        {"/run/fabric-env/pods/", "",
         "fabric-cni's records of pods with their own network: a process whose network "
         "namespace is not the agent's takes the RDMA ports and GID of its pod's interfaces "
         "from the records named by its namespace's inode, and runs its command unchanged "
         "(exec, with a note) when there is none"}}});
  p.sections.push_back(
      {"ENVIRONMENT",
       {},
       {{podenv::kDevicesVar, "",
         "set by fabric-agent's Kubernetes device plugin (Allocate): only these RDMA devices "
         "are the job's (a host-network pod given some NICs)"}}});
  p.see_also = {"fabricctl(1)", "fabric-agent(8)"};
  return p;
}

// The published host as this process sees it (pod_view.h). A file that cannot be read is no
// answer (env exits 1, not 2: the Slurm plugin asks fabricctl then); FailedPrecondition: a pod
// without RDMA.
absl::StatusOr<podenv::View> ViewHere(const std::string& host_file) {
  auto file = hostfile::ReadHostFile(host_file);
  if (!file.ok()) return absl::UnavailableError(file.status().message());
  return podenv::ViewFor(*std::move(file), podenv::RecordsDirOf(host_file), podenv::ReadHere());
}

// The one answer of env and exec from a view: the selection over the (narrowed) published host,
// or in a pod that names no GPU (--gpus=job found no launcher variable) the pod's ports alone.
launch::SelectFn PodAwareSelect(const podenv::View& view, const std::string& host_file,
                                const launch::JobEnvOptions& opt) {
  return [&view, &host_file, &opt](const v1::SelectNicsRequest& r) {
    const v1::PublishedHost& p = view.file.published;
    if (view.pod && r.all() && opt.gpus == "job") return podenv::SelectPodPorts(p, r);
    return launch::SelectOnHost(p.host(), p.policy(), r, absl::StrCat("in ", host_file));
  };
}

// The doctor's answer source: the published host as this process sees it (a pod's own ports).
launch::AnswerSource DoctorAnswer(const std::string& host_file, const launch::JobEnvOptions& opt,
                                  std::shared_ptr<podenv::View>* view) {
  launch::AnswerSource a;
  a.name = absl::StrCat("the published host ", host_file);
  auto here = ViewHere(host_file);
  if (!here.ok()) {
    a.missing = absl::StrCat("no published host: ", here.status().message());
    return a;
  }
  *view = std::make_shared<podenv::View>(*std::move(here));
  a.select = PodAwareSelect(**view, host_file, opt);
  return a;
}

// Where fabric-env's own arguments end: at the first word of the command exec runs (a word that
// is neither an option, an option's value nor the subcommand); the command's words are its own.
size_t OwnArgsEnd(CLI::App& app, const std::vector<std::string>& args) {
  CLI::App* sub = nullptr;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.size() > 1 && a[0] == '-') {
      if (a.find('=') != std::string::npos) continue;
      const CLI::Option* o = sub != nullptr ? sub->get_option_no_throw(a) : nullptr;
      if (o == nullptr) o = app.get_option_no_throw(a);
      if (o != nullptr && o->get_expected_min() > 0) ++i;  // its value is the next word
      continue;
    }
    if (sub != nullptr) return i;
    if (a != "exec") return args.size();  // env and doctor take no command
    sub = app.get_subcommand("exec");
  }
  return args.size();
}

int Fail(const absl::Status& s, int code) {
  std::fprintf(stderr, "fabric-env: %s\n", std::string(s.message()).c_str());
  return code;
}

}  // namespace
}  // namespace fabric

int main(int argc, char** argv) {
  using fabric::launch::JobEnvOptions;
  CLI::App app{"fabric-env: a job's fabric settings from the agent's published host, no RPC"};
  app.set_version_flag("--version", std::string("fabric-env ") + fabric::kFabricVersion);
  app.require_subcommand(1);
  std::string host_file = fabric::hostfile::kDefaultPath;
  app.add_option("--host-file", host_file, "the published host (fabric-agent --host-file-dir)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)  // A wrapper's own wins.
      ->capture_default_str();

  JobEnvOptions exec_opt;
  bool dry_run = false;
  bool best_effort = false;
  CLI::App* exec = app.add_subcommand(
      "exec", "run a command with this process's job environment (the caller's settings win)");
  exec->prefix_command();
  fabric::launch::AddGpusFlag(exec, &exec_opt.gpus, "job");
  fabric::launch::AddJobEnvFlags(exec, &exec_opt, "auto");
  exec->add_flag("--dry-run", dry_run, "print what would be set and why; run nothing");
  exec->add_flag("--best-effort", best_effort,
                 "run the command without fabric settings when they cannot be computed");

  JobEnvOptions env_opt;
  CLI::App* env = app.add_subcommand("env", "print the job environment");
  fabric::launch::AddGpusFlag(env, &env_opt.gpus, "job");
  fabric::launch::AddJobEnvFlags(env, &env_opt, "none");
  fabric::launch::AddEnvFormatFlags(env, &env_opt);

  fabric::launch::DoctorOptions doctor_opt;
  CLI::App* doctor = app.add_subcommand(
      "doctor",
      "whether the job that runs here will really use RDMA, and if not why (as fabricctl "
      "doctor; libibverbs is looked for, not loaded)");
  fabric::launch::AddDoctorFlags(doctor, &doctor_opt);

  if (auto kind = fabric::docs::GenerateKind(std::vector<std::string>(argv, argv + argc))) {
    return fabric::docs::PrintGenerated(*kind, fabric::Page(app),
                                        fabric::docs::CompletionOf(app, "fabric-env"));
  }
  // Everything after the first "--" is the command's, never fabric-env's: CLI11 would give a
  // `--host-file` there to the top level, and the command would lose it.
  std::vector<std::string> args(argv, argv + argc);
  std::vector<std::string> command;
  if (auto dd = std::find(args.begin() + 1, args.end(), "--"); dd != args.end()) {
    command.assign(dd + 1, args.end());
    args.erase(dd, args.end());
  }
  // "--opt=" swallows the next argument in CLI11 (the shared rule, agent/common/cli_args.h).
  const size_t own_end = fabric::OwnArgsEnd(app, args);
  const std::span<const std::string> own = std::span(args).subspan(1, own_end - 1);
  absl::Status refused = fabric::RefuseEmptyValues(own);
  if (refused.ok()) refused = fabric::RefuseMissingValues(app, own);
  if (!refused.ok()) return fabric::Fail(refused, 2);
  // Words of a command given without "--" (exec's prefix form) are left with the top level.
  app.allow_extras();
  try {
    app.parse(std::vector<std::string>(args.rbegin(), args.rend() - 1));  // CLI11: reversed.
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  std::vector<std::string> given = exec->remaining();
  if (given.empty()) given = app.remaining();
  if (!given.empty() && args.size() < static_cast<size_t>(argc)) given.push_back("--");
  given.insert(given.end(), command.begin(), command.end());
  if (!exec->parsed() && !given.empty()) {
    return fabric::Fail(absl::InvalidArgumentError(absl::StrCat(env->parsed() ? "env" : "doctor",
                                                                " takes no command (",
                                                                given.front(), "): exec runs one")),
                        2);
  }
  if (doctor->parsed()) {
    fabric::DisableDefaultPciNames();
    doctor_opt.read.look_for_libibverbs = true;
    fabric::launch::JobEnvOptions job;
    job.gpus = "job";
    std::shared_ptr<fabric::podenv::View> view;
    return fabric::launch::RunDoctor(doctor_opt, fabric::DoctorAnswer(host_file, job, &view));
  }
  if (env->parsed()) {
    absl::Status s = fabric::launch::RunEnv(
        [&](const fabric::v1::SelectNicsRequest& r) -> absl::StatusOr<fabric::v1::Selection> {
          auto view = fabric::ViewHere(host_file);
          if (!view.ok()) return view.status();
          auto sel = fabric::PodAwareSelect(*view, host_file, env_opt)(r);
          for (const std::string& n : view->notes) {
            if (sel.ok()) sel->add_notes(n);
          }
          return sel;
        },
        env_opt);
    if (s.ok()) return 0;
    return fabric::Fail(s, absl::IsInvalidArgument(s) ? 2 : 1);
  }
  fabric::launch::ExecRequest req{.argv = std::move(given),
                                  .dry_run = dry_run,
                                  .best_effort = best_effort,
                                  .program = "fabric-env"};
  absl::Status s = fabric::launch::ExecWithJobEnv(
      req, [&](std::vector<std::string>* notes) -> absl::StatusOr<fabric::launch::JobEnvAnswer> {
        auto view = fabric::ViewHere(host_file);
        if (absl::IsFailedPrecondition(view.status())) {
          // A pod without RDMA: its command runs as it is, and stderr says why.
          notes->push_back(
              absl::StrCat(view.status().message(), "; the command runs without fabric settings"));
          return fabric::launch::JobEnvAnswer{};
        }
        if (!view.ok()) return view.status();
        notes->insert(notes->end(), view->notes.begin(), view->notes.end());
        auto a = fabric::launch::AskPublishedHost(
            view->file, host_file, exec_opt, fabric::PodAwareSelect(*view, host_file, exec_opt));
        if (a.ok()) {
          a->asked.provenance.insert(a->asked.provenance.end(), view->provenance.begin(),
                                     view->provenance.end());
        }
        return a;
      });
  return s.ok() ? 0 : fabric::Fail(s, 2);
}
