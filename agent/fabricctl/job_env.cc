#include "agent/fabricctl/job_env.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "agent/policy/jobenv/format.h"
#include "agent/policy/select/env.h"

namespace fabric::ctl {
namespace {

void AppendMap(const google::protobuf::Map<std::string, std::string>& m, std::string* out) {
  jobenv::EnvMap sorted(m.begin(), m.end());
  std::vector<std::string> items;
  for (const auto& [k, v] : sorted) {
    std::string item = "    ";
    jobenv::AppendJsonString(k, &item);
    item += ": ";
    jobenv::AppendJsonString(v, &item);
    items.push_back(std::move(item));
  }
  *out += items.empty() ? "{}" : absl::StrCat("{\n", absl::StrJoin(items, ",\n"), "\n  }");
}

void AppendList(const std::vector<std::string>& list, std::string* out) {
  std::vector<std::string> items;
  for (const std::string& s : list) {
    std::string item = "    ";
    jobenv::AppendJsonString(s, &item);
    items.push_back(std::move(item));
  }
  *out += items.empty() ? "[]" : absl::StrCat("[\n", absl::StrJoin(items, ",\n"), "\n  ]");
}

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
}

absl::StatusOr<JobEnvAnswer> AskJobEnv(HostSource& source, const JobEnvOptions& opt,
                                       bool keep_set) {
  JobEnvAnswer a;
  if (auto consumers = jobenv::ParseConsumers(opt.consumers); !consumers.ok()) {
    return UsageError(consumers.status());
  }
  auto asked = ReadJobRequest(opt.gpus, opt.rank, opt.consumers,
                              [](const char* name) { return std::getenv(name); });
  if (!asked.ok()) return UsageError(asked.status());
  a.asked = *std::move(asked);
  auto sel = source.Select(a.asked.req);
  if (!sel.ok()) return sel.status();
  a.selection = *std::move(sel);
  a.env = EnvOf(a.selection);
  if (keep_set) {
    a.env = jobenv::DropAlreadySet(a.env, [](const char* name) { return std::getenv(name); });
  }
  return a;
}

std::string FormatEnvJson(const JobEnvAnswer& a) {
  const v1::Selection& s = a.selection;
  std::string out = "{\n  \"env\": ";
  google::protobuf::Map<std::string, std::string> env(a.env.begin(), a.env.end());
  AppendMap(env, &out);
  out += ",\n  \"job_env\": ";
  AppendMap(s.job_env(), &out);
  out += ",\n  \"pins\": ";
  AppendMap(s.pins(), &out);
  out += ",\n  \"rank_gpu\": ";
  jobenv::AppendJsonString(s.rank_gpu(), &out);
  std::vector<std::string> scope;
  for (const v1::GpuAssignment& g : s.assignments()) scope.push_back(g.gpu());
  out += ",\n  \"scope\": ";
  AppendList(scope, &out);
  out += ",\n  \"consumers\": ";
  jobenv::AppendJsonString(s.consumers(), &out);
  std::vector<std::string> notes(a.asked.notes);
  notes.insert(notes.end(), s.notes().begin(), s.notes().end());
  out += ",\n  \"notes\": ";
  AppendList(notes, &out);
  out += "\n}\n";
  return out;
}

Outcome RunEnv(HostSource& source, const JobEnvOptions& opt) {
  auto a = AskJobEnv(source, opt, opt.keep_set);
  if (!a.ok()) return a.status();
  if (opt.format == "json") {
    Print(FormatEnvJson(*a));
    return {};
  }
  if (opt.format == "nccl-conf") {
    Print(jobenv::FormatNcclConf(a->env));
  } else if (opt.format == "nul") {
    Print(jobenv::FormatNul(a->env));
  } else {
    std::string text = jobenv::FormatShell(a->env);
    if (opt.is_export) {
      std::string exported;
      for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
        absl::StrAppend(&exported, "export ", line, "\n");
      }
      text = exported;
    }
    Print(text);
  }
  for (const std::string& note : a->asked.notes) std::fprintf(stderr, "note: %s\n", note.c_str());
  for (const std::string& note : a->selection.notes()) {
    std::fprintf(stderr, "note: %s\n", note.c_str());
  }
  return {};
}

}  // namespace fabric::ctl
