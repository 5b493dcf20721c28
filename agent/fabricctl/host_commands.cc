// fabricctl inventory, topo, select, env and health: here (--sysfs/--procfs) or through the agent.
#include <arpa/inet.h>
#include <google/protobuf/util/json_util.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "agent/config/config.h"
#include "agent/fabric/announce/announce.h"
#include "agent/fabric/announce/link.h"
#include "agent/fabric/announce/to_proto.h"
#include "agent/fabric/announce/validate.h"
#include "agent/fabric/probes/report.h"
#include "agent/fabric/probes/schedule.h"
#include "agent/fabricctl/client.h"
#include "agent/fabricctl/ctl.h"
#include "agent/fabricctl/render.h"
#include "agent/inventory/discovery/discovery.h"
#include "agent/inventory/discovery/parse.h"
#include "agent/inventory/hostfs/host_fs.h"
#include "agent/policy/health/health.h"
#include "agent/policy/select/env.h"
#include "agent/policy/select/select.h"

namespace fabric::ctl {

int RunInventory(const Options& opt) {
  int code = kOk;
  auto loaded = Load(opt, &code);
  if (!loaded.ok()) return Fail(code, std::string(loaded.status().message()));
  Print(opt.json ? ToJson(loaded->host) : RenderInventory(loaded->host));
  if (loaded->host.rdma_devices().empty()) return NoRdma(loaded->host);
  return kOk;
}

int RunTopo(const Options& opt) {
  int code = kOk;
  auto loaded = Load(opt, &code);
  if (!loaded.ok()) return Fail(code, std::string(loaded.status().message()));
  if (opt.json) {
    v1::Host topo;
    *topo.mutable_topology() = loaded->host.topology();
    Print(ToJson(topo));
  } else {
    Print(RenderTopology(loaded->host));
  }
  if (loaded->host.rdma_devices().empty()) return NoRdma(loaded->host);
  return kOk;
}

namespace {

// select and env against the agent: its policy, its inventory.
absl::StatusOr<v1::Selection> RemoteSelection(const Options& opt, int* code) {
  auto client = Client(opt);
  if (!client.ok()) {
    *code = kUsage;
    return client.status();
  }
  std::vector<std::string> gpus;
  if (opt.gpus == "all") {
    auto inv = (*client)->GetInventory();
    if (!inv.ok()) {
      *code = AgentCode(inv.status());
      return inv.status();
    }
    auto list = GpuList(inv->host(), opt.gpus);
    if (!list.ok()) {
      *code = kFailed;
      return list.status();
    }
    gpus = *std::move(list);
  } else {
    auto list = GpuList(v1::Host(), opt.gpus);
    if (!list.ok()) {
      *code = kUsage;
      return list.status();
    }
    gpus = *std::move(list);
  }
  auto sel = (*client)->SelectNics(gpus, /*include_rejected=*/true);
  if (!sel.ok()) *code = AgentCode(sel.status());
  return sel;
}

// Shared by select and env: discovery, GPU list, selection.
absl::StatusOr<v1::Selection> RunSelection(const Options& opt, int* code) {
  if (!opt.local) return RemoteSelection(opt, code);
  auto loaded = Load(opt, code);
  if (!loaded.ok()) return loaded.status();
  if (loaded->host.rdma_devices().empty()) {
    *code = kFailed;
    return absl::NotFoundError(absl::StrCat("no RDMA device found under ",
                                            loaded->host.sysfs_root(), "/class/infiniband"));
  }
  auto gpus = GpuList(loaded->host, opt.gpus);
  if (!gpus.ok()) {
    *code = absl::IsInvalidArgument(gpus.status()) ? kUsage : kFailed;
    return gpus.status();
  }
  auto sel = SelectNics(loaded->host, *gpus, loaded->config.selection());
  if (!sel.ok()) {
    // Bad input (malformed, duplicate, not a GPU) is a usage error; a GPU or port the host
    // lacks is a failed query.
    *code = absl::IsInvalidArgument(sel.status()) ? kUsage : kFailed;
    std::string msg(sel.status().message());
    // Point at discovery problems that explain an unknown GPU.
    for (const v1::FieldProblem& p : loaded->host.problems()) {
      for (const std::string& g : *gpus) {
        auto canon = ParsePciAddress(g);
        if (canon.ok() && p.path().find(*canon) != std::string::npos) {
          absl::StrAppend(&msg, "; ", *canon, " could not be read: ", p.reason());
        }
      }
    }
    return absl::Status(sel.status().code(), msg);
  }
  return sel;
}

}  // namespace

int RunSelect(const Options& opt) {
  int code = kOk;
  auto sel = RunSelection(opt, &code);
  if (!sel.ok()) return Fail(code, std::string(sel.status().message()));
  Print(opt.json ? ToJson(*sel) : RenderSelection(*sel));
  return kOk;
}

int RunEnv(const Options& opt) {
  int code = kOk;
  auto sel = RunSelection(opt, &code);
  if (!sel.ok()) return Fail(code, std::string(sel.status().message()));
  EnvMap env = EnvOf(*sel);
  if (opt.keep_set) env = DropAlreadySet(env, [](const char* name) { return std::getenv(name); });
  if (opt.format == "json") {
    Print(FormatJson(env));
  } else if (opt.format == "nccl-conf") {
    Print(FormatNcclConf(env));
  } else {
    std::string text = FormatShell(env);
    if (opt.is_export) {
      std::string exported;
      for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
        absl::StrAppend(&exported, "export ", line, "\n");
      }
      text = exported;
    }
    Print(text);
  }
  for (const std::string& note : sel->notes()) std::fprintf(stderr, "note: %s\n", note.c_str());
  return kOk;
}

namespace {

// The health verdict and, when known, the host it is about: evaluated here with --sysfs, else
// the agent's. An agent that does not answer is itself a CRITICAL finding ("daemon").
struct HealthReport {
  v1::Health health;
  std::optional<v1::Host> host;
};

HealthReport GatherHealth(const Options& opt) {
  HealthReport r;
  auto critical = [&](const std::string& check, const std::string& message) {
    v1::Finding f;
    f.set_severity(v1::SEVERITY_CRITICAL);
    f.set_check(check);
    f.set_message(message);
    AddFinding(&r.health, std::move(f));
  };
  if (opt.local) {
    int code = kOk;
    auto loaded = Load(opt, &code);
    if (!loaded.ok()) {
      v1::Finding f;
      f.set_severity(v1::SEVERITY_UNKNOWN);
      f.set_check("discovery");
      f.set_message(std::string(loaded.status().message()));
      AddFinding(&r.health, std::move(f));
      return r;
    }
    r.health = EvaluateHealth(loaded->host, loaded->config.selection());
    r.host = std::move(loaded->host);
    return r;
  }
  auto client = Client(opt);
  if (!client.ok()) {
    critical("daemon", std::string(client.status().message()));
    return r;
  }
  if (opt.liveness) {
    // Liveness: only whether the agent answers and reports itself serving.
    if (absl::Status s = (*client)->CheckServing(); !s.ok()) {
      critical("daemon", std::string(s.message()));
    } else {
      r.health.set_verdict(v1::SEVERITY_OK);
    }
    return r;
  }
  auto health = (*client)->GetHealth();
  if (!health.ok()) {
    critical("daemon", std::string(health.status().message()));
    return r;
  }
  r.health = *std::move(health);
  auto inv = (*client)->GetInventory();
  if (inv.ok()) r.host = std::move(*inv->mutable_host());
  return r;
}

}  // namespace

// Monitoring-plugin convention: one status line, then a line per finding; the exit code is the
// verdict's (OK 0, WARNING 1, CRITICAL 2, UNKNOWN 3), unless --fail-on lets lesser verdicts
// pass with 0 (readiness probes that should fail only on CRITICAL).
int RunHealth(const Options& opt) {
  HealthReport r = GatherHealth(opt);
  const v1::Health& health = r.health;
  if (opt.json) {
    Print(ToJson(health));
  } else {
    int counts[5] = {0, 0, 0, 0, 0};
    for (const v1::Finding& f : health.findings()) ++counts[f.severity() % 5];
    std::string line = absl::StrCat("FABRIC ", SeverityName(health.verdict()), " - ",
                                    counts[v1::SEVERITY_CRITICAL], " critical, ",
                                    counts[v1::SEVERITY_WARNING], " warning");
    if (r.host) {
      absl::StrAppend(&line, "; ", r.host->rdma_devices_size(), " RDMA devices, ",
                      r.host->accelerators_size(), " accelerators");
    } else if (opt.liveness && health.verdict() == v1::SEVERITY_OK) {
      absl::StrAppend(&line, "; fabric-agent serving at ", opt.target);
    }
    std::printf("%s\n", line.c_str());
    for (const v1::Finding& f : health.findings()) {
      std::printf("%s %s%s%s: %s\n", SeverityName(f.severity()), f.check().c_str(),
                  f.subject().empty() ? "" : " ", f.subject().c_str(), f.message().c_str());
    }
  }
  const v1::Severity floor = opt.fail_on == "critical"  ? v1::SEVERITY_CRITICAL
                             : opt.fail_on == "warning" ? v1::SEVERITY_WARNING
                                                        : v1::SEVERITY_UNKNOWN;
  if (SeverityRank(health.verdict()) < SeverityRank(floor)) return 0;
  return HealthExitCode(health.verdict());
}

}  // namespace fabric::ctl
