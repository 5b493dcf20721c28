#include "agent/policy/doctor/rank_envs.h"

#include <utility>

namespace fabric::doctor {

absl::Status JudgementCancelled() {
  return absl::CancelledError("the client gave up (deadline or cancel): the judgement stopped");
}

absl::Status AddRankEnvs(const AskRank& ask, const std::function<bool()>& cancelled,
                         DoctorFacts* f) {
  if (f->gpus.size() < 2) return absl::OkStatus();
  for (size_t i = 0; i < f->gpus.size() && i < kMaxRanks; ++i) {
    if (cancelled && cancelled()) return JudgementCancelled();
    absl::StatusOr<std::map<std::string, std::string>> env = ask(f->gpus[i]);
    if (env.ok()) f->rank_envs[f->gpus[i]] = *std::move(env);
  }
  return absl::OkStatus();
}

}  // namespace fabric::doctor
