// What `fabricctl doctor` and `fabric-env doctor` share: the flags, the environment to judge
// (this process's, an --env-file, or the agent's answer for --gpus), the job's comparison with
// the agent's answer, the report as text or JSON, and the exit code. No gRPC: fabric-env links
// it statically; who answers the job's SelectNics (the agent, the published host) is a seam.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "agent/fabric/doctor/read_facts.h"
#include "agent/launch/job_env.h"
#include "fabric/v1/doctor.pb.h"

namespace fabric::launch {

struct DoctorOptions {
  std::string env_file;  // Judge these variables instead of this process's.
  std::string gpus;      // Judge the agent's answer for these GPUs instead.
  bool json = false;
  doctor::ReadOptions read;
};
// --env-file, --gpus, --json, --sysfs, --procfs, --dev-dir.
void AddDoctorFlags(CLI::App* cmd, DoctorOptions* opt);

// An environment file: `KEY=VALUE` lines (docker's --env-file), `export KEY=VALUE`, values in
// shell single or double quotes as `fabricctl env` prints them, '#' comments, blank lines.
// InvalidArgument naming the line for anything else (an unterminated quote, a bad name).
absl::StatusOr<std::map<std::string, std::string>> ParseEnvFile(std::string_view text);

// ParseEnvFile over the regular file at `path` (relative: to the working directory), at most
// 1 MiB, read without ever blocking: InvalidArgument for a FIFO, directory, device or socket and
// for a larger file, NotFound when it cannot be opened. fabricctl's and fabric-env's one reader.
absl::StatusOr<std::map<std::string, std::string>> ReadEnvFile(const std::string& path);
// This process's environment.
std::map<std::string, std::string> ProcessEnvMap();

// The report as the terminal shows it (every field's outside bytes escaped, TerminalText):
// checks by area, evidence and fix under each, then the verdict line ("DOCTOR CRITICAL - NCCL will
// fall back to sockets: ...").
std::string FormatDoctor(const v1::DoctorReport& r);

// Who answers the job's SelectNics here, and what it is called in messages ("the agent",
// "the published host /run/fabric-env/host.pb"); null: no answer (`missing` says why).
struct AnswerSource {
  SelectFn select;
  std::string name;
  std::string missing;
};

// Reads the facts, judges them and prints the report; returns the exit code (0 OK, 1 WARNING,
// 2 CRITICAL, 3 UNKNOWN, and 3 when there is nothing to judge: an unreadable --env-file, a list
// past its bound, doctor::CheckListBounds).
int RunDoctor(const DoctorOptions& opt, const AnswerSource& answer);
// Prints `r` as --json asks; returns its exit code.
int PrintDoctor(const v1::DoctorReport& r, bool json);

}  // namespace fabric::launch
