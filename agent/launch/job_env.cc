#include "agent/launch/job_env.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "agent/common/excerpt.h"
#include "agent/common/output.h"
#include "agent/common/shell.h"
#include "agent/common/strings.h"
#include "agent/policy/jobenv/format.h"
#include "agent/policy/select/env.h"
#include "agent/publish/hostfile/host_file.h"

namespace fabric::launch {
namespace {

const char* ProcessEnv(const char* name) { return std::getenv(name); }

}  // namespace

void AddGpusFlag(CLI::App* cmd, std::string* gpus, const char* default_value) {
  CLI::Option* o = cmd->add_option(
      "--gpus", *gpus,
      "GPUs, comma separated: PCI addresses (0000:17:00.0, 17:00.0, nvidia-smi's "
      "00000000:17:00.0), indices (nvidia-smi order; rocm-smi order without NVIDIA GPUs), "
      "GPU-<uuid>, MIG-<uuid>, AMD GPU-<unique_id>; or 'all'; or 'visible' (this process's "
      "NVIDIA_/CUDA_/ROCR_/HIP_VISIBLE_DEVICES); or 'job' (Slurm's SLURM_STEP_GPUS, else "
      "visible, else all)");
  if (default_value != nullptr) {
    *gpus = default_value;
    o->capture_default_str();
  } else {
    o->required();
  }
}

void AddJobEnvFlags(CLI::App* cmd, JobEnvOptions* opt, const char* rank_default) {
  opt->rank = rank_default;
  cmd->add_option("--rank-gpu", opt->rank,
                  "this process's GPU, for the per-GPU pins (UCX_NET_DEVICES, NVSHMEM_HCA_LIST, "
                  "UCCL_P2P_RDMA_DEV): a GPU name, 'auto' (Slurm's bound GPU, else the "
                  "launcher's local rank: LOCAL_RANK, SLURM_LOCALID, OMPI_COMM_WORLD_LOCAL_RANK, "
                  "MPI_LOCALRANKID, PMI_LOCAL_RANK...) or 'none'")
      ->capture_default_str();
  cmd->add_option("--consumers", opt->consumers,
                  absl::StrCat("libraries to render for: 'default', 'all', a list, or changes "
                               "to the default set ('+vllm,-uccl'); known: ",
                               absl::StrJoin(jobenv::ConsumerNames(), ", ")))
      ->capture_default_str();
  cmd->add_option("--nccl-version", opt->nccl_version,
                  "the NCCL the job loads (\"2.30.7\"; NCCL's environment plugin passes it): "
                  "from 2.30.7 NCCL_IB_HCA names each port's rail, in NCCL's own order");
}

void AddEnvFormatFlags(CLI::App* cmd, JobEnvOptions* opt) {
  cmd->add_option("--format", opt->format,
                  "shell (NAME=VALUE lines), json, nccl-conf or nul (NAME=VALUE records ended "
                  "by NUL, as env -0)")
      ->check(CLI::IsMember({"shell", "json", "nccl-conf", "nul"}))
      ->capture_default_str();
  cmd->add_flag("--keep-set", opt->keep_set,
                "leave out variables already set in this environment (your choice wins)");
  cmd->add_flag("--export", opt->is_export, "prefix shell lines with 'export '");
}

absl::StatusOr<JobEnvAnswer> AskJobEnv(const SelectFn& select, const JobEnvOptions& opt,
                                       bool keep_set) {
  JobEnvAnswer a;
  if (auto consumers = jobenv::ParseConsumers(opt.consumers); !consumers.ok()) {
    return absl::InvalidArgumentError(consumers.status().message());
  }
  if (!opt.nccl_version.empty()) {
    if (auto v = jobenv::ParseVersion(opt.nccl_version); !v.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--nccl-version: ", v.status().message()));
    }
  }
  auto asked = ReadJobRequest(opt.gpus, opt.rank, opt.consumers, ProcessEnv);
  if (!asked.ok()) return absl::InvalidArgumentError(asked.status().message());
  a.asked = *std::move(asked);
  a.asked.req.set_nccl_version(opt.nccl_version);
  auto sel = select(a.asked.req);
  if (!sel.ok()) return sel.status();
  a.selection = *std::move(sel);
  a.env = EnvOf(a.selection);
  if (keep_set) a.env = jobenv::DropAlreadySet(a.env, ProcessEnv);
  return a;
}

absl::StatusOr<JobEnvAnswer> AskPublishedHost(const hostfile::HostFile& file,
                                              const std::string& path, const JobEnvOptions& opt,
                                              const SelectFn& select) {
  const v1::PublishedHost& p = file.published;
  absl::StatusOr<JobEnvAnswer> a =
      AskJobEnv(select != nullptr ? select : SelectFn([&p, &path](const v1::SelectNicsRequest& r) {
                  return SelectOnHost(p.host(), p.policy(), r, absl::StrCat("in ", path));
                }),
                opt, /*keep_set=*/true);
  if (a.ok()) {
    a->asked.provenance.push_back(absl::StrCat(
        "answer: the published host ", path, " (fabric-agent ", p.agent_version(), ", changed ",
        absl::FormatDuration(absl::Trunc(absl::Now() - file.modified, absl::Seconds(1))), " ago)"));
  }
  return a;
}

std::string FormatEnvJson(const JobEnvAnswer& a) {
  const v1::Selection& s = a.selection;
  // Sorted maps (the proto's are not), the keys in this order; bytes that are not UTF-8 become
  // U+FFFD (JSON is UTF-8).
  auto sorted = [](const google::protobuf::Map<std::string, std::string>& m) {
    return nlohmann::ordered_json(std::map<std::string, std::string>(m.begin(), m.end()));
  };
  std::vector<std::string> scope;
  for (const v1::GpuAssignment& g : s.assignments()) scope.push_back(g.gpu());
  std::vector<std::string> notes(a.asked.notes);
  notes.insert(notes.end(), s.notes().begin(), s.notes().end());
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  j["env"] = a.env;  // a std::map: sorted already
  j["job_env"] = sorted(s.job_env());
  j["pins"] = sorted(s.pins());
  j["rank_gpu"] = s.rank_gpu();
  j["scope"] = scope;
  j["consumers"] = s.consumers();
  j["notes"] = notes;
  return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

absl::Status RunEnv(const SelectFn& select, const JobEnvOptions& opt) {
  if (opt.is_export && opt.format != "shell") {
    return absl::InvalidArgumentError(
        absl::StrCat("--export prefixes shell lines; --format=", opt.format, " has none"));
  }
  auto a = AskJobEnv(select, opt, opt.keep_set);
  if (!a.ok()) return a.status();
  if (opt.format == "json") {
    Write(FormatEnvJson(*a));
    return absl::OkStatus();
  }
  if (opt.format == "nccl-conf") {
    Write(jobenv::FormatNcclConf(a->env));
  } else if (opt.format == "nul") {
    Write(jobenv::FormatNul(a->env));
  } else {
    std::string text = jobenv::FormatShell(a->env);
    if (opt.is_export) {
      std::string exported;
      for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
        absl::StrAppend(&exported, "export ", line, "\n");
      }
      text = exported;
    }
    Write(text);
  }
  for (const std::string& note : a->asked.notes) {
    std::fprintf(stderr, "note: %s\n", TerminalText(note).c_str());
  }
  for (const std::string& note : a->selection.notes()) {
    std::fprintf(stderr, "note: %s\n", TerminalText(note).c_str());
  }
  return absl::OkStatus();
}

absl::Status ExecWithJobEnv(ExecRequest req, const AnswerFn& answer) {
  std::vector<std::string>& argv = req.argv;
  if (!argv.empty() && argv.front() == "--") argv.erase(argv.begin());
  if (argv.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no command: ", req.program, " [OPTIONS] -- CMD [ARGS...]"));
  }
  std::vector<std::string> notes;
  const absl::StatusOr<JobEnvAnswer> a = answer(&notes);
  if (!a.ok() && !req.best_effort) {
    return absl::InvalidArgumentError(
        absl::StrCat(a.status().message(), " (--best-effort runs the command anyway)"));
  }
  jobenv::EnvMap env;
  if (a.ok()) {
    env = a->env;
    notes.insert(notes.end(), a->asked.notes.begin(), a->asked.notes.end());
    notes.insert(notes.end(), a->selection.notes().begin(), a->selection.notes().end());
  } else {
    std::fprintf(stderr, "%s: %s; running %s without fabric settings\n", req.program.c_str(),
                 TerminalText(Sv(a.status().message())).c_str(),
                 TerminalText(argv.front()).c_str());
  }
  if (req.dry_run) {
    std::vector<std::string> words;
    for (const std::string& w : argv) words.push_back(ShellQuote(w));
    std::string out = absl::StrCat("# would run: ", absl::StrJoin(words, " "), "\n");
    if (a.ok()) {
      for (const std::string& p : a->asked.provenance) {
        absl::StrAppend(&out, "# ", TerminalText(p), "\n");
      }
      for (const auto& [k, v] : a->selection.env()) {
        if (!env.contains(k)) absl::StrAppend(&out, "# kept as you set it: ", k, "\n");
      }
    }
    out += jobenv::FormatShell(env);
    for (const std::string& n : notes) absl::StrAppend(&out, "# note: ", TerminalText(n), "\n");
    Write(out);
    return absl::OkStatus();
  }
  for (const std::string& n : notes) {
    std::fprintf(stderr, "%s: note: %s\n", req.program.c_str(), TerminalText(n).c_str());
  }
  for (const auto& [k, v] : env) {
    // overwrite=0: a variable set meanwhile (none is) would still win.
    if (setenv(k.c_str(), v.c_str(), 0) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("cannot set ", k, ": ", std::strerror(errno)));
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

}  // namespace fabric::launch
