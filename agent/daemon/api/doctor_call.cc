// The Doctor call: a job's variables judged against the agent's host (agent/policy/doctor). The
// caller's process is not known here (its device nodes, limits, network namespace): those checks
// are `fabricctl doctor`'s inside the job; the agent adds its own answer for the job's GPUs and
// every rank's NCCL lines.
#include <functional>
#include <map>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "agent/common/status.h"
#include "agent/daemon/api/service.h"
#include "agent/policy/doctor/consumer_vars.h"
#include "agent/policy/doctor/judge.h"
#include "agent/policy/doctor/rank_envs.h"
#include "agent/policy/select/select.h"

namespace fabric {

absl::StatusOr<v1::DoctorReport> FabricAgentService::JudgeJob(
    const v1::DoctorRequest& req, const std::function<bool()>& cancelled) {
  if (static_cast<size_t>(req.env_size()) > doctor::kMaxVariables) {
    return absl::InvalidArgumentError(absl::StrCat("the request has ", req.env_size(),
                                                   " variables; at most ", doctor::kMaxVariables));
  }
  if (req.gpus_size() > static_cast<int>(kMaxGpusPerRequest)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the request names ", req.gpus_size(), " GPUs; at most ", kMaxGpusPerRequest));
  }
  // The list variables bounded before any work: a judge of a 1 MiB list would outlive the
  // client's deadline.
  std::map<std::string, std::string> env(req.env().begin(), req.env().end());
  if (absl::Status bounds = doctor::CheckListBounds(env); !bounds.ok()) return bounds;
  auto s = Ready();
  if (!s.ok()) return s.status();
  doctor::DoctorFacts f;
  f.context = "agent";
  f.env_source = "the request";
  f.env = std::move(env);
  f.host = *(*s)->host;
  // The agent's answer for the job (its GPUs, or all), and each rank's.
  v1::SelectNicsRequest sel_req;
  sel_req.mutable_gpus()->CopyFrom(req.gpus());
  sel_req.set_all(req.gpus().empty());
  auto bytes = Select(sel_req);
  if (absl::IsInvalidArgument(bytes.status())) return bytes.status();
  v1::Selection sel;
  if (!bytes.ok() || !sel.ParseFromString(**bytes)) {
    f.agent_error = absl::StrCat("the agent has no answer for the job: ", bytes.status().message());
  } else {
    f.agent_env.emplace(sel.env().begin(), sel.env().end());
    for (const v1::GpuAssignment& a : sel.assignments()) f.gpus.push_back(a.gpu());
    auto ask = [&](const std::string& gpu) -> absl::StatusOr<std::map<std::string, std::string>> {
      sel_req.set_rank_gpu(gpu);
      auto b = Select(sel_req);
      if (!b.ok()) return b.status();
      v1::Selection rank;
      if (!rank.ParseFromString(**b)) return absl::InternalError("an unreadable answer");
      return std::map<std::string, std::string>(rank.env().begin(), rank.env().end());
    };
    FABRIC_RETURN_IF_ERROR(doctor::AddRankEnvs(ask, cancelled, &f));
  }
  if (cancelled()) return doctor::JudgementCancelled();
  return doctor::Judge(f);
}

}  // namespace fabric
