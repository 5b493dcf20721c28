// What `fabricctl env`, `fabricctl exec` and fabric-env share: the flags that name a job's GPUs,
// its rank and the consumers, the one way an answer becomes the variables a process gets, and
// the exec that hands them over. No gRPC and no discovery here: fabric-env links it statically.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/launch/job_scope.h"
#include "agent/policy/jobenv/jobenv.h"
#include "agent/publish/hostfile/host_file.h"
#include "fabric/v1/agent.pb.h"
#include "fabric/v1/select.pb.h"

namespace fabric::launch {

struct JobEnvOptions {
  std::string gpus;
  std::string rank = "none";
  std::string consumers = "default";
  std::string nccl_version;  // Empty: unknown.
  std::string format = "shell";
  bool keep_set = false;
  bool is_export = false;
};

// --gpus (select, env, exec), required unless `default_value` is given.
void AddGpusFlag(CLI::App* cmd, std::string* gpus, const char* default_value = nullptr);
// --rank-gpu (default `rank_default`), --consumers and --nccl-version.
void AddJobEnvFlags(CLI::App* cmd, JobEnvOptions* opt, const char* rank_default);
// --format (and --export) as `fabricctl env` takes them.
void AddEnvFormatFlags(CLI::App* cmd, JobEnvOptions* opt);

// Whoever answers a SelectNics request: the agent, discovery here, the published host.
using SelectFn = std::function<absl::StatusOr<v1::Selection>(const v1::SelectNicsRequest&)>;

// What the process gets: the selection and the variables, the user's own settings dropped when
// `keep_set` (exec always keeps them).
struct JobEnvAnswer {
  JobRequest asked;
  v1::Selection selection;
  jobenv::EnvMap env;
};
// InvalidArgument for bad flags or launcher variables; else `select`'s error.
absl::StatusOr<JobEnvAnswer> AskJobEnv(const SelectFn& select, const JobEnvOptions& opt,
                                       bool keep_set);

// The answer from the published host `file` read from `path` (agent/publish/hostfile), the
// user's own settings kept. Its provenance names the file and its age. The caller reads the file
// (hostfile::ReadHostFile): a file it cannot read is no answer, an error here is the request's.
// `select`: who answers from the file; null: SelectOnHost over its host and policy.
absl::StatusOr<JobEnvAnswer> AskPublishedHost(const hostfile::HostFile& file,
                                              const std::string& path, const JobEnvOptions& opt,
                                              const SelectFn& select = nullptr);

// The answer as `--format=json` prints it: {"env", "job_env", "pins", "rank_gpu", "scope",
// "consumers", "notes"}, keys in proto field style.
std::string FormatEnvJson(const JobEnvAnswer& a);

// `env`: the answer in opt.format on stdout, its notes on stderr prefixed "note: ".
absl::Status RunEnv(const SelectFn& select, const JobEnvOptions& opt);

// `exec`: what runs, and with what.
struct ExecRequest {
  std::vector<std::string> argv;  // A leading "--" is dropped.
  bool dry_run = false;           // Print what would be set and why; run nothing.
  bool best_effort = false;       // Run the command without fabric settings on an error.
  std::string program;            // "fabricctl exec", "fabric-env": stderr's prefix.
};
// Computes the answer; may add notes of its own (where the answer came from).
using AnswerFn = std::function<absl::StatusOr<JobEnvAnswer>(std::vector<std::string>* notes)>;
// Computes the answer (`answer` runs only once there is a command), sets its variables (each
// already set one kept) and execvp's the command; returns only on an error (InvalidArgument:
// exit 2), or OK after a dry run. An answer that failed is the error, or with best_effort the
// command runs without fabric settings after a line on stderr.
absl::Status ExecWithJobEnv(ExecRequest req, const AnswerFn& answer);

}  // namespace fabric::launch
