// fabricctl announcements, probe, probes and watch: the agent's own state and actions, asked of
// it.

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "agent/common/output.h"
#include "agent/common/version.h"
#include "agent/fabric/probe_cli/report.h"
#include "agent/fabric/probe_schedule/filter.h"
#include "agent/fabric/probe_schedule/schedule.h"  // ResultFromProto
#include "agent/fabric/probes/params.h"
#include "agent/fabricctl/client.h"
#include "agent/fabricctl/ctl.h"
#include "agent/fabricctl/render.h"

namespace fabric::ctl {
namespace {

// A subcommand that asks the agent: --json and how to reach it.
CLI::App* AgentCommand(CLI::App& app, const char* name, const char* help, CommonOptions* common) {
  CLI::App* cmd = app.add_subcommand(name, help);
  AddJsonFlag(cmd, common);
  AddAgentFlags(cmd, common, kTargetHelp);
  return cmd;
}

// A flag parsed into a uint field of the request: rejected outside [lo, hi].
template <typename T, typename Set>
std::function<bool(const std::vector<std::string>&)> Unsigned(T lo, T hi, Set set) {
  return [=](const std::vector<std::string>& v) {
    T n = 0;
    if (!absl::SimpleAtoi(v[0], &n) || n < lo || n > hi) return false;
    set(n);
    return true;
  };
}

}  // namespace

Command AddAnnouncements(CLI::App& app, CommonOptions& common) {
  CLI::App* cmd = AgentCommand(app, "announcements",
                               "the pod interfaces the agent announces, with results", &common);
  auto container = std::make_shared<std::string>();
  cmd->add_option("--container", *container, "only this CNI container ID");
  return {
      cmd, [&common, container]() -> Outcome {
        auto client = Connect(common);
        if (!client.ok()) return client.status();
        auto resp = (*client)->ListAnnouncements(*container);
        if (!resp.ok()) return resp.status();
        if (common.json) {
          Write(ToJson(*resp));
        } else if (resp->announcements().empty()) {
          std::printf("no announcements held%s\n",
                      container->empty() ? "" : absl::StrCat(" for ", *container).c_str());
        } else {
          Write(RenderAnnouncements({resp->announcements().begin(), resp->announcements().end()}));
        }
        return {};
      }};
}

namespace {

struct ProbeOptions {
  v1::RunProbeRequest req;
  double duration_s = 0;
  double step_timeout_s = 10;
};

// One test now, by the agent (it holds the device and keeps the result with its schedule's).
Outcome RunProbe(const CommonOptions& common, const ProbeOptions& opt) {
  auto client = Connect(common);
  if (!client.ok()) return client.status();
  v1::RunProbeRequest req = opt.req;
  if (opt.duration_s > 0) {
    req.set_duration_seconds(static_cast<uint32_t>(std::ceil(opt.duration_s)));
  }
  req.set_timeout_seconds(static_cast<uint32_t>(std::ceil(opt.step_timeout_s)));
  // The agent may wait up to a minute for the device, then every step is bounded by the step
  // timeout; iterations run as long as they run, so leave room for both.
  const absl::Duration bound = absl::Seconds(common.timeout_s) + absl::Seconds(60) +
                               absl::Seconds(req.duration_seconds() + 2) +
                               absl::Seconds(req.retry_seconds()) +
                               8 * absl::Seconds(req.timeout_seconds());
  auto r = (*client)->RunProbe(req, bound);
  if (!r.ok()) return r.status();
  if (common.json) {
    Write(ToJson(*r));
  } else if (r->ok()) {
    Write(probes::FormatTable(probes::ResultFromProto(*r)));
    if (!r->transport_note().empty()) {
      std::printf(" transport %s: %s\n", r->transport().c_str(), r->transport_note().c_str());
    }
    if (r->has_fraction_of_rate()) {
      std::printf(" %.0f%% of the port's %g Gb/s%s\n", 100 * r->fraction_of_rate(),
                  r->port_rate_gbps(), r->degraded() ? " (DEGRADED)" : "");
    }
    if (!r->teardown_error().empty()) {
      std::printf(" warning: releasing RDMA resources: %s\n", r->teardown_error().c_str());
    }
  }
  if (!r->ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat(r->test(), " with ", r->peer(), ": ", r->error_code(), ": ", r->error()));
  }
  return {};
}

}  // namespace

Command AddProbe(CLI::App& app, CommonOptions& common) {
  CLI::App* cmd = AgentCommand(
      app, "probe", "a bandwidth or latency test against a peer's responder now, run by the agent",
      &common);
  auto opt = std::make_shared<ProbeOptions>();
  v1::RunProbeRequest* pr = &opt->req;
  cmd->add_option("--peer", *pr->mutable_peer(),
                  "the responder: HOST or HOST:PORT (another agent's --probe-listen, or "
                  "fabric-probe)")
      ->required();
  cmd->add_option("--test", *pr->mutable_test(), "the test")
      ->check(CLI::IsMember(probes::TestNames()))
      ->default_str("write_bw");
  cmd->add_option("-d,--device", *pr->mutable_device(),
                  "local RDMA device (default: the first the schedule probes from)");
  cmd->add_option("-i,--ib-port",
                  Unsigned<uint32_t>(1, 254, [pr](uint32_t n) { pr->set_ib_port(n); }),
                  "port of the device");
  cmd->add_option("-x,--gid-index",
                  Unsigned<uint32_t>(0, 65535, [pr](uint32_t n) { pr->set_gid_index(n); }),
                  "GID index (default: chosen as NIC selection chooses it)");
  cmd->add_option("--remote-device", *pr->mutable_remote_device(),
                  "the peer's RDMA device (default: the peer's choice)");
  cmd->add_option("--transport", *pr->mutable_transport(),
                  "rdma, tcp or auto (rdma when this host has an RDMA device, else tcp, as "
                  "fabric-probe)")
      ->check(CLI::IsMember({"rdma", "tcp", "auto"}))
      ->default_str("auto");
  cmd->add_flag(
      "-R,--rdma-cm", [pr](int64_t n) { pr->set_rdma_cm(n > 0); }, "connect with rdma_cm");
  cmd->add_option("-s,--size",
                  Unsigned<uint64_t>(1, UINT64_MAX, [pr](uint64_t n) { pr->set_size(n); }),
                  "message size in bytes (default: the test's, as perftest)");
  auto* o_iters = cmd->add_option(
      "-n,--iterations",
      Unsigned<uint64_t>(1, UINT64_MAX, [pr](uint64_t n) { pr->set_iterations(n); }),
      "iterations (default: the test's)");
  cmd->add_option("-D,--duration", opt->duration_s, "seconds instead of -n")
      ->check(CLI::Range(1.0, 86400.0))
      ->excludes(o_iters);
  cmd->add_option("-q,--qps",
                  Unsigned<uint32_t>(1, UINT32_MAX, [pr](uint32_t n) { pr->set_qps(n); }),
                  "queue pairs (bandwidth tests)");
  cmd->add_option("--retry",
                  Unsigned<uint32_t>(1, 300, [pr](uint32_t n) { pr->set_retry_seconds(n); }),
                  "while nothing listens on the peer's port, try again for this many seconds "
                  "(default: fail at once, as perftest)");
  cmd->add_option("--step-timeout", opt->step_timeout_s,
                  "seconds any one step of the test may take")
      ->check(CLI::Range(1.0, 300.0))
      ->capture_default_str();
  return {cmd, [&common, opt] { return RunProbe(common, *opt); }};
}

namespace {

struct ProbesOptions {
  std::string peer;
  std::string device;
  std::string test;
  uint32_t limit = 0;
};

}  // namespace

Command AddProbes(CLI::App& app, CommonOptions& common) {
  CLI::App* cmd = AgentCommand(
      app, "probes", "the agent's probe results (scheduled and on demand), newest first", &common);
  auto opt = std::make_shared<ProbesOptions>();
  cmd->add_option("--peer", opt->peer, "only this peer, as PEER prints it");
  cmd->add_option("--device", opt->device,
                  "only this local device: NAME or NAME:PORT, as DEVICE prints it (mlx5_1:1)");
  cmd->add_option("--test", opt->test, absl::StrCat("only this test: ", probes::TestNamesText()));
  cmd->add_option("--limit", opt->limit, "at most this many results (0: all kept)");
  auto style = std::make_shared<TableStyle>();
  AddTableFlags(cmd, style.get());
  return {cmd, [&common, opt, style, cmd]() -> Outcome {
            if (auto fit = TableFlagsFit(cmd, common.json); !fit.ok()) return fit;
            // Checked before asking: a typo is a usage error, not an empty table.
            absl::StatusOr<v1::ListProbeResultsRequest> req =
                probes::ParseResultFilter(opt->peer, opt->device, opt->test);
            if (!req.ok()) return UsageError(req.status());
            req->set_limit(opt->limit);
            auto client = Connect(common);
            if (!client.ok()) return client.status();
            auto resp = (*client)->ListProbeResults(*req);
            if (!resp.ok()) return resp.status();
            Write(common.json ? ToJson(*resp) : RenderProbeResults(*resp, *style));
            return {};
          }};
}

namespace {

struct WatchOptions {
  uint32_t count = 0;
  double duration_s = 0;
};

// One line per change as the agent sees it: "TIME gen N KIND SUBJECT OLD -> NEW"; with --json
// each event on one line (the proto3 JSON mapping without the inventory after the first).
Outcome RunWatch(const CommonOptions& common, const WatchOptions& opt) {
  auto client = Connect(common);
  if (!client.ok()) return client.status();
  uint32_t seen = 0;
  return (*client)->Watch(
      [&](const v1::InventoryEvent& e) {
        const std::string when = absl::FormatTime("%H:%M:%E3S", absl::Now(), absl::LocalTimeZone());
        if (common.json) {
          v1::InventoryEvent compact = e;
          if (seen > 0) compact.mutable_inventory()->clear_host();
          Write(ToJsonLine(compact));
        } else if (seen == 0) {
          std::printf("%s gen %llu inventory: %d RDMA devices, %d netdevs, %d accelerators\n",
                      when.c_str(), static_cast<unsigned long long>(e.inventory().generation()),
                      e.inventory().host().rdma_devices_size(), e.inventory().host().netdevs_size(),
                      e.inventory().host().accelerators_size());
        } else {
          for (const v1::InventoryChange& c : e.changes()) {
            std::string kind = v1::InventoryChange::Kind_Name(c.kind());
            if (absl::StartsWith(kind, "KIND_")) kind = kind.substr(5);
            std::string line = absl::StrCat(when, " gen ", e.inventory().generation(), " ",
                                            absl::AsciiStrToLower(kind));
            if (!c.subject().empty()) absl::StrAppend(&line, " ", c.subject());
            if (!c.old_value().empty() || !c.new_value().empty()) {
              absl::StrAppend(&line, " ", c.old_value().empty() ? "-" : c.old_value(), " -> ",
                              c.new_value().empty() ? "-" : c.new_value());
            }
            if (c.count() > 0) absl::StrAppend(&line, " (", c.count(), " since start)");
            std::printf("%s\n", line.c_str());
          }
        }
        std::fflush(stdout);
        ++seen;
        return opt.count == 0 || seen < opt.count;
      },
      opt.duration_s > 0 ? absl::Seconds(opt.duration_s) : absl::InfiniteDuration());
}

}  // namespace

Command AddWatch(CLI::App& app, CommonOptions& common) {
  CLI::App* cmd = AgentCommand(
      app, "watch",
      "the agent's inventory changes as they happen (device, port, GID, netdev events)", &common);
  auto opt = std::make_shared<WatchOptions>();
  cmd->add_option("--count", opt->count,
                  "stop after this many events (the first is the inventory itself)");
  cmd->add_option("--duration", opt->duration_s, "stop after this many seconds")
      ->check(CLI::Range(0.0, 365 * 86400.0));
  return {cmd, [&common, opt] { return RunWatch(common, *opt); }};
}

Command AddVersion(CLI::App& app, CommonOptions& common) {
  CLI::App* cmd = AgentCommand(
      app, "version", "fabricctl's release and the agent's (exit 3 if it is not there)", &common);
  auto client_only = std::make_shared<bool>(false);
  cmd->add_flag("--client", *client_only, "only fabricctl's own; the agent is not asked");
  return {cmd, [&common, client_only]() -> Outcome {
            v1::Versions v;
            v.set_fabricctl(kFabricVersion);
            absl::Status agent_status;
            if (!*client_only) {
              v.set_target(common.target);
              auto client = Connect(common);
              auto ping = client.ok() ? (*client)->Ping()
                                      : absl::StatusOr<v1::PingResponse>(client.status());
              if (ping.ok()) {
                // An agent from before Ping carried a version answers with none.
                v.set_agent(ping->agent_version().empty() ? "unknown" : ping->agent_version());
              } else {
                agent_status = ping.status();
              }
            }
            if (common.json) {
              Write(ToJson(v));
            } else {
              Write(absl::StrCat("fabricctl ", v.fabricctl(), "\n"));
              if (v.has_agent())
                Write(absl::StrCat("fabric-agent ", v.agent(), " at ", v.target(), "\n"));
            }
            return agent_status;
          }};
}

}  // namespace fabric::ctl
