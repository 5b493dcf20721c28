// What every fabricctl command shares: the connection flags and output format, how a command
// reaches the agent, and how the way it ended becomes an exit code (ExitCodeFor, the one place).
//
// Exit codes: 0 success; 1 the host lacks what was asked (no RDMA device, an unknown GPU, no
// usable port); 2 usage or bad input (flags, addresses, config); 3 the host cannot be read (the
// sysfs root does not exist, the agent is not serving). `health` follows the monitoring-plugin
// convention instead.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/fabricctl/args.h"
#include "agent/fabricctl/client.h"
#include "agent/fabricctl/table.h"
#include "fabric/v1/agent.pb.h"

namespace fabric::ctl {

// Flags every command that may ask the agent has: how to reach it, and --json.
struct CommonOptions {
  bool json = false;
  std::string target = kDefaultTarget;  // Or $FABRICCTL_TARGET (args.h).
  double timeout_s = 5;
  ClientTls tls;
};
void AddJsonFlag(CLI::App* cmd, CommonOptions* common);
// --target's help for commands that always ask the agent.
inline constexpr char kTargetHelp[] =
    "fabric-agent to ask: unix:///PATH, /PATH or HOST:PORT (default $FABRICCTL_TARGET, else the "
    "agent's socket)";
// kAgentValueOptions (args.h): --target, --timeout, --tls-ca, --tls-cert, --tls-key.
void AddAgentFlags(CLI::App* cmd, CommonOptions* common, const char* target_help);

// --wide (every column, nothing clipped) and --no-headers (rows alone, for scripts), for
// commands that print tables.
void AddTableFlags(CLI::App* cmd, TableStyle* style);
// Either with --json is a usage error: a flag that does not fit the format is refused.
absl::Status TableFlagsFit(const CLI::App* cmd, bool json);
// A duration flag's check: `parse` (args.h) accepts the text, which becomes its seconds for a
// double option; the error is parse's message.
CLI::Validator DurationSeconds(absl::StatusOr<absl::Duration> (*parse)(std::string_view));

// Every option that takes a value refuses an empty one ("--gpus ''" from an unset variable).
void RefuseEmptyValues(CLI::App& app);

// The agent for this invocation. A bad --target or unreadable TLS files are usage errors.
absl::StatusOr<std::unique_ptr<AgentClient>> Connect(const CommonOptions& common);

// Errors as fabricctl classifies them, message kept: the status code is what ExitCodeFor reads.
// The agent's own statuses already follow it (InvalidArgument: bad input; NotFound or
// FailedPrecondition: the host lacks it; anything else: it cannot be reached).
absl::Status UsageError(const absl::Status& s);       // exit 2
absl::Status FailedError(const absl::Status& s);      // exit 1
absl::Status UnreadableError(const absl::Status& s);  // exit 3

// How a command ended.
struct Outcome {
  Outcome(absl::Status s = absl::OkStatus()) : status(std::move(s)) {}  // NOLINT: implicit

  // OK, or the error: "fabricctl: MESSAGE" on stderr, its code decides the exit code.
  absl::Status status;
  // The error's message was already part of the printed result: stderr stays quiet.
  bool reported = false;
  // health: the monitoring-plugin verdict decides the exit code instead (after --fail-on).
  std::optional<v1::Severity> verdict;
};

// The exit code of a status: 0, or the kind of error (the table in the header comment).
int ExitCodeFor(const absl::Status& s);
int ExitCodeFor(const Outcome& o);
// Reports an unreported error on stderr; returns ExitCodeFor(o).
int Finish(const Outcome& o);

// A subcommand: its flags are on `cmd`; `run` runs it once the command line is parsed.
struct Command {
  CLI::App* cmd;
  std::function<Outcome()> run;
};

// host_commands.cc: about the host, here (--sysfs/--procfs) or through the agent.
Command AddInventory(CLI::App& app, CommonOptions& common);
Command AddTopo(CLI::App& app, CommonOptions& common);
Command AddNeighbors(CLI::App& app, CommonOptions& common);
Command AddSelect(CLI::App& app, CommonOptions& common);
Command AddPlace(CLI::App& app, CommonOptions& common);
Command AddEnv(CLI::App& app, CommonOptions& common);
// exec_command.cc: the job environment, then the command.
Command AddExec(CLI::App& app, CommonOptions& common);
Command AddHealth(CLI::App& app, CommonOptions& common);
Command AddCounters(CLI::App& app, CommonOptions& common);
// cdi_command.cc: the CDI spec, from local discovery.
Command AddCdi(CLI::App& app, CommonOptions& common);
// doctor_command.cc: whether the job that runs here will really use RDMA.
Command AddDoctor(CLI::App& app, CommonOptions& common);
// announce_command.cc: packets sent from here, or through the agent.
Command AddAnnounce(CLI::App& app, CommonOptions& common);
// agent_commands.cc: through the agent only.
Command AddAnnouncements(CLI::App& app, CommonOptions& common);
Command AddProbe(CLI::App& app, CommonOptions& common);
Command AddProbes(CLI::App& app, CommonOptions& common);
Command AddWatch(CLI::App& app, CommonOptions& common);
Command AddVersion(CLI::App& app, CommonOptions& common);

}  // namespace fabric::ctl
