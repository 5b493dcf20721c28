// What every fabricctl command shares (ctl.h): the connection flags, reaching the agent, and the
// one mapping from how a command ended to its exit code.
#include "agent/fabricctl/ctl.h"

#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "agent/fabricctl/args.h"
#include "agent/fabricctl/client.h"
#include "agent/policy/health/health.h"

namespace fabric::ctl {
namespace {

enum ExitCode { kOk = 0, kFailed = 1, kUsage = 2, kUnreadable = 3 };

}  // namespace

void AddJsonFlag(CLI::App* cmd, CommonOptions* common) {
  cmd->add_flag("--json", common->json, "print the proto3 JSON mapping of the result");
}

CLI::Validator DurationSeconds(absl::StatusOr<absl::Duration> (*parse)(std::string_view)) {
  return CLI::Validator(
      [parse](std::string& v) -> std::string {
        auto d = parse(v);
        if (!d.ok()) return std::string(d.status().message());
        v = absl::StrCat(absl::ToDoubleSeconds(*d));
        return "";
      },
      "DURATION");
}

void AddAgentFlags(CLI::App* cmd, CommonOptions* common, const char* target_help) {
  // The names come from kAgentValueOptions; a flag added there fails to compile here.
  const auto& [target, timeout, tls_ca, tls_cert, tls_key] = kAgentValueOptions;
  cmd->add_option(std::string(target), common->target, target_help)->capture_default_str();
  cmd->add_option(std::string(timeout), common->timeout_s,
                  "how long to wait for the agent: seconds, or 500ms, 2s, 1m (10ms to 1h)")
      ->transform(DurationSeconds(ParseTimeout))
      ->capture_default_str();
  cmd->add_option(std::string(tls_ca), common->tls.ca, "PEM CA of a TLS agent (HOST:PORT targets)");
  cmd->add_option(std::string(tls_cert), common->tls.cert,
                  "PEM client certificate for a TLS agent");
  cmd->add_option(std::string(tls_key), common->tls.key, "PEM private key of --tls-cert");
}

void RefuseEmptyValues(CLI::App& app) {
  const CLI::Validator non_empty(
      [](std::string& v) -> std::string {
        return v.empty() ? "is empty: give it a value, or leave the option out" : "";
      },
      "");
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    for (CLI::Option* o : sub->get_options()) {
      if (o->get_expected_min() > 0) o->check(non_empty);
    }
  }
}

absl::StatusOr<std::unique_ptr<AgentClient>> Connect(const CommonOptions& common) {
  auto target = GrpcTarget(common.target);
  if (!target.ok()) return UsageError(target.status());
  auto creds = ChannelCredentialsFor(common.tls);
  if (!creds.ok()) return UsageError(creds.status());
  return std::make_unique<AgentClient>(*target, absl::Seconds(common.timeout_s), *std::move(creds));
}

absl::Status UsageError(const absl::Status& s) { return absl::InvalidArgumentError(s.message()); }
absl::Status FailedError(const absl::Status& s) {
  return absl::FailedPreconditionError(s.message());
}
absl::Status UnreadableError(const absl::Status& s) { return absl::UnavailableError(s.message()); }

int ExitCodeFor(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kOk:
      return kOk;
    case absl::StatusCode::kInvalidArgument:
      return kUsage;
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kFailedPrecondition:
      return kFailed;
    default:
      return kUnreadable;
  }
}

int ExitCodeFor(const Outcome& o) {
  if (o.verdict) return HealthExitCode(*o.verdict);
  return ExitCodeFor(o.status);
}

int Finish(const Outcome& o) {
  if (!o.status.ok() && !o.reported) {
    std::fprintf(stderr, "fabricctl: %s\n", std::string(o.status.message()).c_str());
  }
  return ExitCodeFor(o);
}

void AddTableFlags(CLI::App* cmd, TableStyle* style) {
  cmd->add_flag("--wide", style->wide, "every column, nothing clipped");
  cmd->add_flag_function(
      "--no-headers", [style](int64_t n) { style->headers = n == 0; },
      "rows only: no header line, legend or notes (for scripts)");
}

absl::Status TableFlagsFit(const CLI::App* cmd, bool json) {
  for (const char* flag : {"--wide", "--no-headers"}) {
    if (json && cmd->count(flag) > 0) {
      return absl::InvalidArgumentError(absl::StrCat(flag, " shapes a table; --json prints all"));
    }
  }
  return absl::OkStatus();
}

}  // namespace fabric::ctl
