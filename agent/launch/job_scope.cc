#include "agent/launch/job_scope.h"

#include <cstdlib>
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/common/excerpt.h"
#include "agent/common/strings.h"
#include "agent/policy/select/env.h"
#include "agent/policy/select/gpu_names.h"
#include "agent/policy/select/select.h"
#include "agent/policy/select/select_request.h"

namespace fabric::launch {
namespace {

// At most this many GPUs from one Slurm range ("0-99999" is a typo, not a host).
constexpr int kMaxRange = 4096;

// The visible-devices variable CUDA (or HIP) counts the process's GPUs by, and its entries.
std::optional<std::pair<std::string, std::vector<std::string>>> EffectiveVisible(
    const GetEnv& getenv) {
  for (const char* name : {"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES",
                           "ROCR_VISIBLE_DEVICES"}) {
    if (const char* v = getenv(name)) {
      std::vector<std::string> entries = absl::StrSplit(v, ',', absl::SkipEmpty());
      return std::make_pair(std::string(name), std::move(entries));
    }
  }
  return std::nullopt;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> GpuNames(const std::string& gpus) {
  std::vector<std::string> list;
  for (absl::string_view g : absl::StrSplit(gpus, ',', absl::SkipWhitespace())) {
    list.emplace_back(g);
  }
  if (list.empty()) return absl::InvalidArgumentError("--gpus is empty");
  if (list.size() > kMaxGpusPerRequest) {
    return absl::InvalidArgumentError(absl::StrCat("--gpus names ", list.size(), " GPUs; at most ",
                                                   kMaxGpusPerRequest, " per request"));
  }
  return list;
}

absl::StatusOr<v1::SelectNicsRequest> GpuRequest(
    std::string_view gpus, const std::function<const char*(const char*)>& getenv) {
  v1::SelectNicsRequest req;
  req.set_include_rejected(true);
  if (gpus == "all") {
    req.set_all(true);
  } else if (gpus == "visible") {
    *req.mutable_visible() = VisibleFromEnvironment(getenv);
    // Nothing set: ExpandVisible's error, naming the variables it looked at.
    if (!HasVisible(req.visible())) return ExpandVisible(req.visible(), v1::Host()).status();
  } else {
    auto names = GpuNames(std::string(gpus));
    if (!names.ok()) return names.status();
    for (std::string& g : *names) req.add_gpus(std::move(g));
  }
  return req;
}

v1::VisibleDevices VisibleFromEnvironment(const std::function<const char*(const char*)>& getenv) {
  auto get = [&getenv](const char* name) -> const char* {
    return getenv ? getenv(name) : std::getenv(name);
  };
  v1::VisibleDevices v;
  if (const char* e = get("NVIDIA_VISIBLE_DEVICES")) v.set_nvidia_visible_devices(e);
  if (const char* e = get("CUDA_VISIBLE_DEVICES")) v.set_cuda_visible_devices(e);
  if (const char* e = get("ROCR_VISIBLE_DEVICES")) v.set_rocr_visible_devices(e);
  if (const char* e = get("HIP_VISIBLE_DEVICES")) v.set_hip_visible_devices(e);
  return v;
}

absl::StatusOr<v1::Selection> SelectOnHost(const v1::Host& host, const v1::SelectionPolicy& policy,
                                           const v1::SelectNicsRequest& req,
                                           std::string_view where) {
  if (host.rdma_devices().empty()) {
    return absl::NotFoundError(absl::StrCat("no RDMA device found ", Av(where)));
  }
  auto gpus = RequestedGpus(host, req);
  if (!gpus.ok()) return gpus.status();
  return SelectForRequest(host, *gpus, req, policy, ProcessMigResolver());
}

absl::StatusOr<std::vector<std::string>> ExpandIndexList(std::string_view list) {
  std::vector<std::string> out;
  for (absl::string_view item : absl::StrSplit(Av(list), ',')) {
    std::pair<absl::string_view, absl::string_view> range = absl::StrSplit(item, '-');
    int lo = 0, hi = 0;
    const bool one = range.second.empty() && item.find('-') == std::string_view::npos;
    if (!absl::SimpleAtoi(range.first, &lo) || lo < 0 ||
        (!one && (!absl::SimpleAtoi(range.second, &hi) || hi < lo || hi - lo >= kMaxRange))) {
      return absl::InvalidArgumentError(absl::StrCat("\"", Excerpt(Sv(item), 40), "\" in ",
                                                     Excerpt(list, 80),
                                                     " is not a GPU index or range"));
    }
    if (one) hi = lo;
    for (int i = lo; i <= hi; ++i) out.push_back(absl::StrCat(i));
  }
  return out;
}

absl::StatusOr<JobRequest> ReadJobRequest(std::string_view gpus, std::string_view rank,
                                          std::string_view consumers, const GetEnv& getenv) {
  JobRequest out;
  v1::SelectNicsRequest& req = out.req;
  req.set_consumers(std::string(consumers));
  std::optional<size_t> count;  // GPUs in the scope, where known here.
  bool slurm = false;
  std::string scope = std::string(gpus);
  if (gpus == "job") {
    // FABRIC_JOB_GPUS: the step's GPUs on the node, which the SPANK plugin hands NCCL's
    // environment plugin (a task bound to one GPU sees only its own in Slurm's variables).
    for (const char* var : {"FABRIC_JOB_GPUS", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS"}) {
      const char* v = getenv(var);
      if (v == nullptr || *v == '\0') continue;
      auto names = ExpandIndexList(v);
      if (!names.ok())
        return absl::InvalidArgumentError(absl::StrCat(var, ": ", names.status().message()));
      for (std::string& n : *names) req.add_gpus(std::move(n));
      count = req.gpus_size();
      slurm = true;
      out.provenance.push_back(absl::StrCat("job scope: ", var, "=", v));
      break;
    }
    if (!slurm) {
      scope = HasVisible(VisibleFromEnvironment(getenv)) ? "visible" : "all";
      out.provenance.push_back(
          scope == "visible" ? "job scope: the GPUs this process's *_VISIBLE_DEVICES name"
                             : "job scope: every GPU (no Slurm allocation or *_VISIBLE_DEVICES)");
    }
  }
  if (!slurm) {
    absl::StatusOr<v1::SelectNicsRequest> named = GpuRequest(scope, getenv);
    if (!named.ok()) return named.status();
    named->set_consumers(req.consumers());
    req = *std::move(named);
    if (req.gpus_size() > 0) count = req.gpus_size();
    if (HasVisible(req.visible())) {
      if (auto eff = EffectiveVisible(getenv)) count = eff->second.size();
    }
  }
  req.set_include_rejected(false);
  // Refused here, before the agent or discovery is asked: the selection's own bound
  // (RESOURCE_EXHAUSTED from the agent, which fabricctl reads as "not serving") is a bad
  // request, the same exit code whoever answers.
  if (count && *count > kMaxGpusPerRequest) {
    return absl::InvalidArgumentError(absl::StrCat("the job names ", *count, " GPUs; at most ",
                                                   kMaxGpusPerRequest, " per request"));
  }

  if (rank == "none" || rank.empty()) return out;
  if (rank != "auto") {
    req.set_rank_gpu(std::string(rank));
    return out;
  }
  if (slurm) {
    if (auto eff = EffectiveVisible(getenv);
        eff && eff->second.size() == 1 && eff->first != "NVIDIA_VISIBLE_DEVICES") {
      req.set_rank_gpu(eff->second[0]);
      out.provenance.push_back(absl::StrCat("rank GPU: ", eff->first, "=", eff->second[0]));
      return out;
    }
  }
  for (const char* var : kLocalRankVars) {
    const char* v = getenv(var);
    if (v == nullptr) continue;
    uint32_t local = 0;
    if (!absl::SimpleAtoi(v, &local)) {
      return absl::InvalidArgumentError(
          absl::StrCat(var, "=\"", Excerpt(v, 40), "\" is not a local rank"));
    }
    // The selection refuses a position past the scope it finds; one past a scope known here
    // is the same error, not a note.
    if (count && local >= *count) {
      return absl::InvalidArgumentError(absl::StrCat(var, "=", local, ": rank position ", local,
                                                     " is outside the job's ", *count, " GPUs"));
    }
    req.set_rank_position(local);
    out.provenance.push_back(
        absl::StrCat("rank GPU: position ", local, " of the scope (", var, ")"));
    return out;
  }
  if (count == 1) {
    req.set_rank_position(0);
    out.provenance.push_back("rank GPU: the scope's only GPU");
  }
  return out;
}

}  // namespace fabric::launch
