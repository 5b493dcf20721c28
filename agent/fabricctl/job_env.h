// `fabricctl env` and `fabricctl exec` share these: the flags that name a job's GPUs, its rank
// and the consumers, and the one way an answer is turned into the variables a process gets.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "absl/status/statusor.h"
#include "agent/fabricctl/ctl.h"
#include "agent/fabricctl/host_source.h"
#include "agent/fabricctl/job_scope.h"
#include "agent/policy/jobenv/jobenv.h"

namespace fabric::ctl {

struct JobEnvOptions {
  std::string gpus;
  std::string rank = "none";
  std::string consumers = "default";
  std::string format = "shell";
  bool keep_set = false;
  bool is_export = false;
};

// --gpus (select, env, exec), required unless `default_value` is given.
void AddGpusFlag(CLI::App* cmd, std::string* gpus, const char* default_value = nullptr);
// --rank-gpu (default `rank_default`) and --consumers.
void AddJobEnvFlags(CLI::App* cmd, JobEnvOptions* opt, const char* rank_default);

// What the process gets: the selection and the variables, the user's own settings dropped when
// `keep_set` (exec always keeps them).
struct JobEnvAnswer {
  JobRequest asked;
  v1::Selection selection;
  jobenv::EnvMap env;
};
absl::StatusOr<JobEnvAnswer> AskJobEnv(HostSource& source, const JobEnvOptions& opt,
                                       bool keep_set);

// The answer as `--format=json` prints it: {"env", "job_env", "pins", "rank_gpu", "scope",
// "consumers", "notes"}, keys in proto field style.
std::string FormatEnvJson(const JobEnvAnswer& a);

// fabricctl env, after its flags are checked.
Outcome RunEnv(HostSource& source, const JobEnvOptions& opt);

}  // namespace fabric::ctl
