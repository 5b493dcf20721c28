// fabricctl inventory, topo, select, env, health and counters: each written once against
// HostSource, so the same code runs here (--sysfs/--procfs) and through the agent.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "agent/common/output.h"
#include "agent/fabric/probe_schedule/filter.h"
#include "agent/fabricctl/args.h"
#include "agent/fabricctl/counters_view.h"
#include "agent/fabricctl/ctl.h"
#include "agent/fabricctl/host_source.h"
#include "agent/fabricctl/render.h"
#include "agent/inventory/discovery/pci_names.h"
#include "agent/inventory/query/host_query.h"
#include "agent/launch/job_env.h"
#include "agent/policy/health/health.h"

namespace fabric::ctl {
namespace {

// Where a host command gets the host: discovered here when --sysfs or --procfs is given (with
// --config), else asked of the agent. Created with the subcommand: these flags come first.
class SourceFlags {
 public:
  SourceFlags(CLI::App& app, const char* name, const char* help, CommonOptions* common)
      : cmd_(app.add_subcommand(name, help)), common_(common) {
    cmd_->add_option("--sysfs", local_.sysfs, "sysfs root to discover from")->capture_default_str();
    cmd_->add_option("--procfs", local_.procfs, "procfs root to discover from")
        ->capture_default_str();
    cmd_->add_option("--config", local_.config,
                     "agent config file (JSON: selection policy, static env)");
    AddJsonFlag(cmd_, common);
    AddAgentFlags(cmd_, common,
                  "fabric-agent to ask: unix:///PATH, /PATH or HOST:PORT (default "
                  "$FABRICCTL_TARGET, else the agent's socket; not with --sysfs/--procfs)");
  }
  SourceFlags(const SourceFlags&) = delete;  // CLI11 holds pointers into it.
  SourceFlags& operator=(const SourceFlags&) = delete;

  CLI::App* cmd() const { return cmd_; }
  bool local() const { return cmd_->count("--sysfs") + cmd_->count("--procfs") > 0; }

  absl::StatusOr<std::unique_ptr<HostSource>> Source() const {
    if (local()) {
      for (std::string_view flag : kAgentValueOptions) {
        if (cmd_->count(std::string(flag)) > 0) {
          return absl::InvalidArgumentError(absl::StrCat(
              std::string(flag),
              " is for asking the agent; --sysfs/--procfs read this host here instead"));
        }
      }
      return LocalHostSource(local_);
    }
    if (!local_.config.empty()) {
      return absl::InvalidArgumentError(
          "--config applies to local discovery (--sysfs/--procfs); the agent uses the config it "
          "was started with");
    }
    return AgentHostSource(*common_);
  }

 private:
  CLI::App* cmd_;
  CommonOptions* common_;
  LocalOptions local_;
};

// Runs `run` against the command's source.
template <typename Run>
Command HostCommand(std::shared_ptr<SourceFlags> flags, Run run) {
  CLI::App* cmd = flags->cmd();
  return {cmd, [flags = std::move(flags), run = std::move(run)]() -> Outcome {
            auto source = flags->Source();
            if (!source.ok()) return source.status();
            return run(**source);
          }};
}

absl::Status NoRdma(const v1::Host& host) {
  return absl::NotFoundError(absl::StrCat("no RDMA device found under ", host.sysfs_root(),
                                          "/class/infiniband (is the RDMA driver loaded?)"));
}

}  // namespace

Command AddInventory(CLI::App& app, CommonOptions& common) {
  auto flags = std::make_shared<SourceFlags>(app, "inventory", "everything discovered on this host",
                                             &common);
  auto style = std::make_shared<TableStyle>();
  CLI::App* cmd = flags->cmd();
  AddTableFlags(cmd, style.get());
  return HostCommand(flags, [&common, style, cmd](HostSource& source) -> Outcome {
    if (auto fit = TableFlagsFit(cmd, common.json); !fit.ok()) return fit;
    auto host = source.Inventory();
    if (!host.ok()) return host.status();
    Write(common.json ? ToJson(*host) : RenderInventory(*host, *style));
    if (host->rdma_devices().empty()) return NoRdma(*host);
    return {};
  });
}

Command AddTopo(CLI::App& app, CommonOptions& common) {
  auto flags = std::make_shared<SourceFlags>(
      app, "topo", "GPU x NIC matrix of PCIe distance classes (as nvidia-smi topo -m)", &common);
  auto style = std::make_shared<TableStyle>();
  CLI::App* cmd = flags->cmd();
  AddTableFlags(cmd, style.get());
  return HostCommand(flags, [&common, style, cmd](HostSource& source) -> Outcome {
    if (auto fit = TableFlagsFit(cmd, common.json); !fit.ok()) return fit;
    auto host = source.Inventory();
    if (!host.ok()) return host.status();
    if (common.json) {
      v1::Host topo;
      *topo.mutable_topology() = host->topology();
      *topo.mutable_pairing() = host->pairing();
      Write(ToJson(topo));
    } else {
      Write(RenderTopology(*host, *style));
    }
    if (host->rdma_devices().empty()) return NoRdma(*host);
    return {};
  });
}

Command AddNeighbors(CLI::App& app, CommonOptions& common) {
  auto flags = std::make_shared<SourceFlags>(
      app, "neighbors", "the switch port at the other end of each netdev's cable (LLDP)", &common);
  auto style = std::make_shared<TableStyle>();
  CLI::App* cmd = flags->cmd();
  AddTableFlags(cmd, style.get());
  return HostCommand(flags, [&common, style, cmd](HostSource& source) -> Outcome {
    if (auto fit = TableFlagsFit(cmd, common.json); !fit.ok()) return fit;
    auto host = source.Inventory();
    if (!host.ok()) return host.status();
    if (common.json) {
      v1::Host only;  // The netdevs, with their neighbours: the same fields as the table, and more.
      *only.mutable_netdevs() = host->netdevs();
      Write(ToJson(only));
    } else {
      Write(RenderNeighbors(*host, absl::ToUnixMillis(absl::Now()), *style));
    }
    return {};
  });
}

Command AddSelect(CLI::App& app, CommonOptions& common) {
  auto flags = std::make_shared<SourceFlags>(
      app, "select", "the RDMA port, GID index and reasons per GPU", &common);
  auto gpus = std::make_shared<std::string>();
  auto brief = std::make_shared<bool>(false);
  launch::AddGpusFlag(flags->cmd(), gpus.get());
  auto style = std::make_shared<TableStyle>();
  CLI::App* cmd = flags->cmd();
  cmd->add_flag("--brief", *brief, "one line per GPU, without the reasons");
  AddTableFlags(cmd, style.get());
  return HostCommand(flags, [&common, gpus, brief, style, cmd](HostSource& source) -> Outcome {
    if (*brief && common.json) {
      return absl::InvalidArgumentError("--brief is a table; --json prints everything");
    }
    if (auto fit = TableFlagsFit(cmd, common.json); !fit.ok()) return fit;
    if (!*brief && cmd->count("--wide") + cmd->count("--no-headers") > 0) {
      return absl::InvalidArgumentError("--wide and --no-headers shape the --brief table");
    }
    auto req = launch::GpuRequest(*gpus);
    if (!req.ok()) return UsageError(req.status());
    auto sel = source.Select(*req);
    if (!sel.ok()) return sel.status();
    Write(common.json ? ToJson(*sel)
          : *brief    ? RenderSelectionBrief(*sel, *style)
                      : RenderSelection(*sel));
    return {};
  });
}

namespace {

struct PlaceOptions {
  v1::PlaceRequest req;
  std::string gpus;
};

}  // namespace

Command AddPlace(CLI::App& app, CommonOptions& common) {
  auto flags = std::make_shared<SourceFlags>(
      app, "place", "the best sets of K GPUs on this host for a job, ranked, with their NICs",
      &common);
  auto opt = std::make_shared<PlaceOptions>();
  CLI::App* cmd = flags->cmd();
  v1::PlaceRequest* r = &opt->req;
  cmd->add_option_function<uint32_t>(
         "--count", [r](uint32_t k) { r->set_gpu_count(k); }, "GPUs per set (K)")
      ->required()
      ->check(CLI::Range(1u, 4096u));
  cmd->add_option("--gpus", opt->gpus,
                  "only these GPUs are candidates (as select --gpus; default: every GPU)");
  cmd->add_flag_function(
      "--same-numa", [r](int64_t n) { r->set_same_numa_node(n > 0); },
      "every GPU of a set on one NUMA node");
  cmd->add_flag_function(
      "--one-nic-per-gpu", [r](int64_t n) { r->set_one_nic_per_gpu(n > 0); },
      "no two GPUs of a set share an RDMA port");
  cmd->add_option_function<std::string>(
      "--vendor", [r](const std::string& v) { r->set_vendor(v); },
      "only this vendor's accelerators: nvidia, amd, intel or a PCI vendor ID (0x10de)");
  cmd->add_option_function<uint32_t>(
         "--max", [r](uint32_t n) { r->set_max_results(n); }, "how many sets (default 5)")
      ->check(CLI::Range(1u, 100u));
  auto style = std::make_shared<TableStyle>();
  AddTableFlags(cmd, style.get());
  return HostCommand(flags, [&common, opt, style, cmd](HostSource& source) -> Outcome {
    if (auto fit = TableFlagsFit(cmd, common.json); !fit.ok()) return fit;
    v1::PlaceRequest req = opt->req;
    if (!opt->gpus.empty() && opt->gpus != "all") {
      auto list = launch::GpuNames(opt->gpus);
      if (!list.ok()) return UsageError(list.status());
      for (const std::string& g : *list) req.add_candidates(g);
    }
    auto placed = source.Place(req);
    if (!placed.ok()) return placed.status();
    Write(common.json ? ToJson(*placed) : RenderPlacements(*placed, *style));
    if (placed->placements().empty()) {
      Outcome o(absl::NotFoundError("no GPU set meets the request"));
      o.reported = true;  // The table said so, with the notes.
      return o;
    }
    return {};
  });
}

Command AddEnv(CLI::App& app, CommonOptions& common) {
  auto flags = std::make_shared<SourceFlags>(
      app, "env", "the job environment (NCCL/RCCL, UCX, NVSHMEM, ...) for a set of GPUs", &common);
  auto opt = std::make_shared<launch::JobEnvOptions>();
  CLI::App* cmd = flags->cmd();
  launch::AddGpusFlag(cmd, &opt->gpus);
  launch::AddJobEnvFlags(cmd, opt.get(), "none");
  launch::AddEnvFormatFlags(cmd, opt.get());
  return HostCommand(flags, [&common, cmd, opt](HostSource& source) -> Outcome {
    // --json is --format=json here; a flag that does not fit the format is refused, not ignored.
    if (common.json) {
      if (cmd->count("--format") > 0 && opt->format != "json") {
        return absl::InvalidArgumentError(
            absl::StrCat("--json and --format=", opt->format, " disagree: give one"));
      }
      opt->format = "json";
    }
    DisableDefaultPciNames();  // The environment names no vendor: discovery skips pci.ids.
    return launch::RunEnv([&source](const v1::SelectNicsRequest& r) { return source.Select(r); },
                          *opt);
  });
}

namespace {

struct HealthOptions {
  std::string fail_on = "unknown";
  bool liveness = false;
};

// Monitoring-plugin convention: one status line, then a line per finding; the exit code is the
// verdict's (OK 0, WARNING 1, CRITICAL 2, UNKNOWN 3), unless --fail-on lets lesser verdicts
// pass with 0 (readiness probes that should fail only on CRITICAL).
Outcome RunHealth(HostSource& source, const CommonOptions& common, const HealthOptions& opt) {
  HealthReport r;
  if (opt.liveness) {
    auto live = source.Liveness();
    if (!live.ok()) {
      Outcome o(live.status());
      o.verdict = v1::SEVERITY_UNKNOWN;
      return o;
    }
    r = *std::move(live);
  } else {
    r = source.Health();
  }
  const v1::Health& health = r.health;
  if (common.json) {
    Write(ToJson(health));
  } else {
    int counts[5] = {0, 0, 0, 0, 0};
    for (const v1::Finding& f : health.findings()) ++counts[f.severity() % 5];
    // Every line printed below is counted here.
    std::string line = absl::StrCat("FABRIC ", SeverityName(health.verdict()), " - ",
                                    counts[v1::SEVERITY_CRITICAL], " critical, ",
                                    counts[v1::SEVERITY_WARNING], " warning");
    if (counts[v1::SEVERITY_UNKNOWN] > 0) {
      absl::StrAppend(&line, ", ", counts[v1::SEVERITY_UNKNOWN], " unknown");
    }
    if (const int other = counts[v1::SEVERITY_OK] + counts[v1::SEVERITY_UNSPECIFIED]; other > 0) {
      absl::StrAppend(&line, ", ", other, " ok");
    }
    if (r.host) {
      absl::StrAppend(&line, "; ", r.host->rdma_devices_size(), " RDMA devices, ",
                      ComputeGpus(*r.host).size(), " accelerators");
    } else if (opt.liveness && health.verdict() == v1::SEVERITY_OK) {
      absl::StrAppend(&line, "; fabric-agent serving at ", common.target);
    }
    std::printf("%s\n", line.c_str());
    for (const v1::Finding& f : health.findings()) std::printf("%s\n", FindingLine(f).c_str());
  }
  const v1::Severity floor = opt.fail_on == "critical"  ? v1::SEVERITY_CRITICAL
                             : opt.fail_on == "warning" ? v1::SEVERITY_WARNING
                                                        : v1::SEVERITY_UNKNOWN;
  Outcome o;
  o.verdict =
      SeverityRank(health.verdict()) < SeverityRank(floor) ? v1::SEVERITY_OK : health.verdict();
  return o;
}

}  // namespace

Command AddHealth(CLI::App& app, CommonOptions& common) {
  auto flags = std::make_shared<SourceFlags>(
      app, "health", "checks before a job lands here; exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN",
      &common);
  auto opt = std::make_shared<HealthOptions>();
  CLI::App* cmd = flags->cmd();
  cmd->add_option("--fail-on", opt->fail_on,
                  "lowest verdict that exits non-zero: unknown (any problem), warning "
                  "(UNKNOWN exits 0) or critical (for readiness probes)")
      ->check(CLI::IsMember({"unknown", "warning", "critical"}))
      ->capture_default_str();
  cmd->add_flag("--liveness", opt->liveness,
                "only check that fabric-agent answers and is serving (liveness probes)");
  return HostCommand(
      flags, [&common, opt](HostSource& source) { return RunHealth(source, common, *opt); });
}

namespace {

struct CountersOptions {
  std::string device;
  double interval_s = 1;
  bool all = false;
};

// Two readings --interval apart (one with 0); the rates are computed here, whichever the source.
Outcome RunCounters(HostSource& source, const CommonOptions& common, const CountersOptions& opt) {
  if (opt.all && common.json) {
    return absl::InvalidArgumentError("--all is for the table; --json prints every counter");
  }
  v1::GetPortCountersRequest req;
  if (!opt.device.empty()) {
    auto port = probes::ParseDevicePort(opt.device);
    if (!port.ok())
      return absl::InvalidArgumentError(absl::StrCat("--device: ", port.status().message()));
    req.set_device(port->device);
    req.set_port(port->port);
  }
  auto first = source.Counters(req);
  if (!first.ok()) return first.status();
  v1::PortCountersResponse shown = *first;
  const absl::Duration interval = absl::Seconds(opt.interval_s);
  if (interval > absl::ZeroDuration()) {
    absl::SleepFor(interval);
    auto second = source.Counters(req);
    if (!second.ok()) return second.status();
    shown = WithRates(*first, *second, interval);
  }
  Write(common.json ? ToJson(shown) : RenderCounters(shown, opt.all));
  if (shown.ports().empty()) {
    return absl::NotFoundError(
        req.device().empty() ? "no RDMA port found (is the RDMA driver loaded?)"
                             : absl::StrCat(opt.device, ": gone since the inventory was taken"));
  }
  return {};
}

}  // namespace

Command AddCounters(CLI::App& app, CommonOptions& common) {
  auto flags = std::make_shared<SourceFlags>(
      app, "counters",
      "per RDMA port: counters/ and hw_counters/ with rates over an interval (as rdma statistic)",
      &common);
  auto opt = std::make_shared<CountersOptions>();
  CLI::App* cmd = flags->cmd();
  cmd->add_option("--device", opt->device,
                  "only this RDMA device or port: NAME or NAME:PORT, as the tables print it "
                  "(mlx5_1:1)");
  cmd->add_option("--interval", opt->interval_s,
                  "time between the two readings the rates come from: seconds, or 500ms, 2s, 1m "
                  "(10ms to 1h; 0: one reading, no rates)")
      ->transform(DurationSeconds(ParseInterval))
      ->capture_default_str();
  cmd->add_flag("--all", opt->all, "also the counters that are zero and did not change");
  return HostCommand(
      flags, [&common, opt](HostSource& source) { return RunCounters(source, common, *opt); });
}

}  // namespace fabric::ctl
