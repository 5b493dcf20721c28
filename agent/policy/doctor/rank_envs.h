// The job's ranks as the agent answers them, gathered the same way wherever the doctor runs
// (fabricctl and fabric-env in the job, the agent's Doctor call), with the bounds of one
// judgement.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/policy/doctor/facts.h"

namespace fabric::doctor {

// Variables judged at once (an environment file, a request): a bound on one judgement's work
// and memory.
inline constexpr size_t kMaxVariables = 10000;
// Ranks compared with each other: a node's GPUs; more are not compared.
inline constexpr size_t kMaxRanks = 16;

// The variables a rank GPU gets; an error: no answer for that rank.
using AskRank =
    std::function<absl::StatusOr<std::map<std::string, std::string>>(const std::string& gpu)>;

// The status of a judgement its client gave up on (deadline or cancel).
absl::Status JudgementCancelled();

// Fills f->rank_envs from `ask` for each of f->gpus, when the job has more than one (the first
// kMaxRanks); a rank without an answer is left out. Cancelled when `cancelled` (null: never) says
// so before a rank is asked.
absl::Status AddRankEnvs(const AskRank& ask, const std::function<bool()>& cancelled,
                         DoctorFacts* f);

}  // namespace fabric::doctor
