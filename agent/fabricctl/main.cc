// fabricctl: queries of a host's RDMA fabric for operators and launchers. Every subcommand asks
// the node's fabric-agent (--target) unless --sysfs or --procfs asks for local discovery.
//
// Exit codes: 0 success; 1 the host lacks what was asked (no RDMA device, an unknown GPU, no
// usable port); 2 usage or bad input (flags, addresses, config); 3 the host cannot be read (the
// sysfs root does not exist, the agent is not serving). `health` follows the monitoring-plugin
// convention instead.
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
#include "agent/announce/announce.h"
#include "agent/announce/link.h"
#include "agent/announce/to_proto.h"
#include "agent/announce/validate.h"
#include "agent/discovery/discovery.h"
#include "agent/discovery/parse.h"
#include "agent/fabricctl/client.h"
#include "agent/fabricctl/render.h"
#include "agent/health/health.h"
#include "agent/hostfs/host_fs.h"
#include "agent/select/config.h"
#include "agent/select/env.h"
#include "agent/select/select.h"
#include "probes/report.h"
#include "probes/schedule.h"

namespace fabric {
namespace {

enum ExitCode { kOk = 0, kFailed = 1, kUsage = 2, kUnreadable = 3 };

struct Options {
  std::string sysfs = "/sys";
  std::string procfs = "/proc";
  std::string config;
  bool json = false;
  std::string gpus;
  std::string format = "shell";
  bool keep_set = false;
  bool is_export = false;
  std::string target = kDefaultTarget;
  double timeout_s = 5;
  ClientTls tls;
  bool local = false;  // --sysfs or --procfs given: discover here instead of asking the agent.
  std::string fail_on = "unknown";
  bool liveness = false;
  // announce
  std::string ifname;
  std::string netns;
  std::vector<std::string> ips;
  std::vector<std::string> gateways;
  std::string container;
  bool repeat = false;
  bool arp_reply = false;
  bool no_ipv6 = false;
  bool conflict_probe = false;
  // probe, probes
  v1::RunProbeRequest probe;
  double probe_duration_s = 0;
  double probe_step_timeout_s = 10;
  std::string test;
  std::string device;
  std::string peer;
  uint32_t limit = 0;
  // watch
  uint32_t count = 0;
  double duration_s = 0;
};

// The agent for this invocation; exits with kUsage on a bad --target.
absl::StatusOr<std::unique_ptr<AgentClient>> Client(const Options& opt) {
  auto target = GrpcTarget(opt.target);
  if (!target.ok()) return target.status();
  auto creds = ChannelCredentialsFor(opt.tls);
  if (!creds.ok()) return creds.status();
  return std::make_unique<AgentClient>(*target, absl::Seconds(opt.timeout_s), *std::move(creds));
}

// The exit code for an error from the agent: the agent's verdict on the request (bad input,
// unknown GPU) or, when it cannot be reached, "the host cannot be read".
int AgentCode(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
      return kUsage;
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kFailedPrecondition:
      return kFailed;
    default:
      return kUnreadable;
  }
}

int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "fabricctl: %s\n", message.c_str());
  return code;
}

void Print(const std::string& s) { std::fwrite(s.data(), 1, s.size(), stdout); }

struct Loaded {
  v1::Host host;
  v1::AgentConfig config;
};

// Discovers the host and reads the config, or asks the agent for its inventory; on failure
// returns the exit code.
absl::StatusOr<Loaded> Load(const Options& opt, int* code) {
  Loaded out;
  if (!opt.local) {
    auto client = Client(opt);
    if (!client.ok()) {
      *code = kUsage;
      return client.status();
    }
    auto inv = (*client)->GetInventory();
    if (!inv.ok()) {
      *code = AgentCode(inv.status());
      return inv.status();
    }
    out.host = std::move(*inv->mutable_host());
    return out;
  }
  if (!opt.config.empty()) {
    auto config = probes::LoadAgentConfig(opt.config);
    if (!config.ok()) {
      *code = kUsage;
      return config.status();
    }
    out.config = *std::move(config);
  }
  HostFsImpl sysfs(opt.sysfs);
  HostFsImpl procfs(opt.procfs);
  auto host = Discover(sysfs, procfs);
  if (!host.ok()) {
    *code = kUnreadable;
    return host.status();
  }
  out.host = *std::move(host);
  return out;
}

int NoRdma(const v1::Host& host) {
  return Fail(kFailed, absl::StrCat("no RDMA device found under ", host.sysfs_root(),
                                    "/class/infiniband (is the RDMA driver loaded?)"));
}

// "all" means every compute accelerator, in PCI order.
absl::StatusOr<std::vector<std::string>> GpuList(const v1::Host& host, const std::string& gpus) {
  std::vector<std::string> list;
  if (gpus == "all") {
    list = ComputeGpus(host);
    if (list.empty()) return absl::NotFoundError("--gpus=all: the host has no GPU or accelerator");
    return list;
  }
  for (absl::string_view g : absl::StrSplit(gpus, ',', absl::SkipWhitespace())) {
    list.emplace_back(g);
  }
  if (list.empty()) return absl::InvalidArgumentError("--gpus is empty");
  return list;
}

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

// A host-side copy of what the CNI plugin does, for an operator: announce now, by hand.
int RunAnnounceLocal(const Options& opt) {
  if (absl::Status s = announce::CheckIfname(opt.ifname, "--ifname"); !s.ok()) {
    return Fail(kUsage, std::string(s.message()));
  }
  std::unique_ptr<announce::ScopedNetns> in_netns;
  if (!opt.netns.empty()) {
    auto entered = announce::ScopedNetns::Enter(opt.netns);
    if (!entered.ok()) {
      return Fail(entered.status().code() == absl::StatusCode::kNotFound ? kFailed : kUnreadable,
                  std::string(entered.status().message()));
    }
    in_netns = *std::move(entered);
  }
  auto target = announce::DescribeInterface(opt.ifname);
  if (!target.ok()) return Fail(kFailed, std::string(target.status().message()));
  // The agent's rules (agent/announce/validate.h): only the interface's own addresses.
  auto chosen = announce::ChooseOwnAddresses(*target, opt.ips);
  if (!chosen.ok()) {
    return Fail(absl::IsFailedPrecondition(chosen.status()) ? kFailed : kUsage,
                std::string(chosen.status().message()));
  }
  target->addresses = *std::move(chosen);
  for (const std::string& gw : opt.gateways) {
    int family = gw.find(':') == std::string::npos ? AF_INET : AF_INET6;
    in6_addr addr{};
    if (inet_pton(family, gw.c_str(), &addr) != 1) {
      return Fail(kUsage, absl::StrCat("--gateway=", gw, ": not an IP address"));
    }
    for (announce::Address& a : target->addresses) {
      if (a.family == family) {
        a.has_gateway = true;
        a.gateway = addr;
      }
    }
  }
  announce::Plan plan;
  if (!opt.repeat) {
    plan.schedule.fast_count = 0;
    plan.schedule.tail.clear();
  }
  plan.arp_reply_form = opt.arp_reply;
  plan.ipv6 = !opt.no_ipv6;
  plan.prime_gateway = !opt.gateways.empty();
  plan.conflict_probe = opt.conflict_probe;
  auto link = announce::PacketLink::Open(target->ifindex);
  if (!link.ok()) {
    return Fail(link.status().code() == absl::StatusCode::kPermissionDenied ? kUnreadable : kFailed,
                absl::StrCat(link.status().message(),
                             link.status().code() == absl::StatusCode::kPermissionDenied
                                 ? " (needs CAP_NET_RAW)"
                                 : ""));
  }
  if (absl::Status s = announce::CheckAnnounceable(**link, *target, plan.ipv6, !opt.ips.empty());
      !s.ok()) {
    return Fail(absl::IsPermissionDenied(s) ? kUsage : kFailed, std::string(s.message()));
  }
  in_netns.reset();  // The socket stays bound to the pod's interface.
  announce::Job job(*target, plan, *std::move(link), announce::MonotonicNow());
  announce::Report report = announce::RunToCompletion(job);
  v1::Announcement a = announce::ToAnnouncement(*target, &report);
  a.set_netns(opt.netns);
  if (opt.json) {
    Print(ToJson(a));
  } else {
    Print(RenderAnnouncements({a}));
  }
  bool failed = report.arp_sent + report.na_sent == 0 || !report.conflicts.empty();
  return failed ? kFailed : kOk;
}

// Re-announce a pod the agent holds (or an interface of the agent's netns), through the agent.
int RunAnnounceRemote(const Options& opt) {
  auto client = Client(opt);
  if (!client.ok()) return Fail(kUsage, std::string(client.status().message()));
  v1::AnnounceRequest req;
  req.set_container_id(opt.container);
  req.set_ifname(opt.ifname);
  for (const std::string& ip : opt.ips) req.add_ips(ip);
  auto resp = (*client)->Announce(req);
  if (!resp.ok()) return Fail(AgentCode(resp.status()), std::string(resp.status().message()));
  if (opt.json) {
    Print(ToJson(*resp));
  } else {
    Print(RenderAnnouncements({resp->announcements().begin(), resp->announcements().end()}));
  }
  return kOk;
}

int RunAnnouncements(const Options& opt) {
  auto client = Client(opt);
  if (!client.ok()) return Fail(kUsage, std::string(client.status().message()));
  auto resp = (*client)->ListAnnouncements(opt.container);
  if (!resp.ok()) return Fail(AgentCode(resp.status()), std::string(resp.status().message()));
  if (opt.json) {
    Print(ToJson(*resp));
  } else if (resp->announcements().empty()) {
    std::printf("no announcements held%s\n",
                opt.container.empty() ? "" : absl::StrCat(" for ", opt.container).c_str());
  } else {
    Print(RenderAnnouncements({resp->announcements().begin(), resp->announcements().end()}));
  }
  return kOk;
}

// One test now, by the agent (it holds the device and keeps the result with its schedule's).
int RunProbe(const Options& opt) {
  auto client = Client(opt);
  if (!client.ok()) return Fail(kUsage, std::string(client.status().message()));
  v1::RunProbeRequest req = opt.probe;
  if (opt.probe_duration_s > 0) {
    req.set_duration_seconds(static_cast<uint32_t>(std::ceil(opt.probe_duration_s)));
  }
  req.set_timeout_seconds(static_cast<uint32_t>(std::ceil(opt.probe_step_timeout_s)));
  // The agent may wait up to a minute for the device, then every step is bounded by the step
  // timeout; iterations run as long as they run, so leave room for both.
  const absl::Duration bound = absl::Seconds(opt.timeout_s) + absl::Seconds(60) +
                               absl::Seconds(req.duration_seconds() + 2) +
                               8 * absl::Seconds(req.timeout_seconds());
  auto r = (*client)->RunProbe(req, bound);
  if (!r.ok()) return Fail(AgentCode(r.status()), std::string(r.status().message()));
  if (opt.json) {
    Print(ToJson(*r));
  } else if (r->ok()) {
    Print(probes::FormatTable(probes::ResultFromProto(*r)));
    if (r->has_fraction_of_rate()) {
      std::printf(" %.0f%% of the port's %g Gb/s%s\n", 100 * r->fraction_of_rate(),
                  r->port_rate_gbps(), r->degraded() ? " (DEGRADED)" : "");
    }
    if (!r->teardown_error().empty()) {
      std::printf(" warning: releasing RDMA resources: %s\n", r->teardown_error().c_str());
    }
  }
  if (!r->ok()) {
    return Fail(kFailed, absl::StrCat(r->test(), " with ", r->peer(), ": ", r->error_code(), ": ",
                                      r->error()));
  }
  return kOk;
}

int RunProbes(const Options& opt) {
  auto client = Client(opt);
  if (!client.ok()) return Fail(kUsage, std::string(client.status().message()));
  v1::ListProbeResultsRequest req;
  req.set_peer(opt.peer);
  req.set_device(opt.device);
  req.set_test(opt.test);
  req.set_limit(opt.limit);
  auto resp = (*client)->ListProbeResults(req);
  if (!resp.ok()) return Fail(AgentCode(resp.status()), std::string(resp.status().message()));
  Print(opt.json ? ToJson(*resp) : RenderProbeResults(*resp));
  return kOk;
}

// One line per change as the agent sees it: "TIME gen N KIND SUBJECT OLD -> NEW"; with --json
// each event on one line (the proto3 JSON mapping without the inventory after the first).
int RunWatch(const Options& opt) {
  auto client = Client(opt);
  if (!client.ok()) return Fail(kUsage, std::string(client.status().message()));
  uint32_t seen = 0;
  absl::Status s = (*client)->Watch(
      [&](const v1::InventoryEvent& e) {
        const std::string when = absl::FormatTime("%H:%M:%E3S", absl::Now(), absl::LocalTimeZone());
        if (opt.json) {
          v1::InventoryEvent compact = e;
          if (seen > 0) compact.mutable_inventory()->clear_host();
          google::protobuf::util::JsonPrintOptions o;
          std::string line;
          (void)google::protobuf::util::MessageToJsonString(compact, &line, o);
          std::printf("%s\n", line.c_str());
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
  if (!s.ok()) return Fail(AgentCode(s), std::string(s.message()));
  return kOk;
}

int Main(int argc, char** argv) {
  Options opt;
  CLI::App app{
      "fabricctl: RDMA NICs, GPUs and their topology on this host, and the NCCL/UCX "
      "environment for a set of GPUs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "fabricctl 0.1.0");
  // Flags shared by every subcommand; accepted before or after it.
  app.option_defaults()->always_capture_default();
  // How to reach the agent: every command that may ask it has these.
  auto agent_flags = [&](CLI::App* cmd, const char* target_help) {
    cmd->add_option("--target", opt.target, target_help)->capture_default_str();
    cmd->add_option("--timeout", opt.timeout_s, "seconds to wait for the agent")
        ->check(CLI::Range(0.01, 3600.0))
        ->capture_default_str();
    cmd->add_option("--tls-ca", opt.tls.ca, "PEM CA of a TLS agent (HOST:PORT targets)");
    cmd->add_option("--tls-cert", opt.tls.cert, "PEM client certificate for a TLS agent");
    cmd->add_option("--tls-key", opt.tls.key, "PEM private key of --tls-cert");
  };
  auto global = [&](CLI::App* cmd) {
    cmd->add_option("--sysfs", opt.sysfs, "sysfs root to discover from")->capture_default_str();
    cmd->add_option("--procfs", opt.procfs, "procfs root to discover from")->capture_default_str();
    cmd->add_option("--config", opt.config,
                    "agent config file (JSON: selection policy, static env)");
    cmd->add_flag("--json", opt.json, "print the proto3 JSON mapping of the result");
    agent_flags(cmd,
                "fabric-agent to ask: unix:///PATH, /PATH or HOST:PORT (ignored with "
                "--sysfs/--procfs)");
  };
  CLI::App* inventory = app.add_subcommand("inventory", "everything discovered on this host");
  CLI::App* topo = app.add_subcommand("topo", "GPU x NIC matrix of PCIe distance classes");
  CLI::App* select = app.add_subcommand("select", "the RDMA port, GID index and reasons per GPU");
  CLI::App* env = app.add_subcommand("env", "NCCL/RCCL/UCX environment for a set of GPUs");
  CLI::App* health = app.add_subcommand(
      "health", "checks before a job lands here; exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN");
  CLI::App* announce_cmd = app.add_subcommand(
      "announce",
      "gratuitous ARP / unsolicited NA for an interface's addresses now (here, or --via-agent "
      "for a pod fabric-cni handed to the agent)");
  CLI::App* announcements =
      app.add_subcommand("announcements", "the pod interfaces the agent announces, with results");
  CLI::App* probe = app.add_subcommand(
      "probe", "a bandwidth or latency test against a peer's responder now, run by the agent");
  CLI::App* probes_cmd = app.add_subcommand(
      "probes", "the agent's probe results (scheduled and on demand), newest first");
  CLI::App* watch = app.add_subcommand(
      "watch", "the agent's inventory changes as they happen (device, port, GID, netdev events)");
  const std::vector<CLI::App*> commands = {inventory,    topo,          select, env,        health,
                                           announce_cmd, announcements, probe,  probes_cmd, watch};
  for (CLI::App* cmd : {inventory, topo, select, env, health}) global(cmd);
  bool via_agent = false;
  for (CLI::App* cmd : {announce_cmd, announcements, probe, probes_cmd, watch}) {
    cmd->add_flag("--json", opt.json, "print the proto3 JSON mapping of the result");
    agent_flags(cmd, "fabric-agent to ask (with --via-agent)");
  }
  announcements->add_option("--container", opt.container, "only this CNI container ID");
  announce_cmd->add_option("--ifname", opt.ifname, "the interface to announce");
  announce_cmd->add_option("--netns", opt.netns,
                           "network namespace of the interface: /var/run/netns/NAME, "
                           "/proc/PID/ns/net, a CNI_NETNS path");
  announce_cmd->add_option("--ip", opt.ips,
                           "address to announce (repeatable); default: every global address of "
                           "the interface");
  announce_cmd->add_option("--gateway", opt.gateways,
                           "prime this gateway (ARP request / NS) and report whether it answers");
  announce_cmd->add_flag("--repeat", opt.repeat,
                         "follow the default schedule (now, 3 x 100 ms, 1 s, 5 s) instead of "
                         "one round");
  announce_cmd->add_flag("--arp-reply", opt.arp_reply, "also send the ARP reply form");
  announce_cmd->add_flag("--no-ipv6", opt.no_ipv6, "skip IPv6 addresses");
  announce_cmd->add_flag("--conflict-probe", opt.conflict_probe,
                         "RFC 5227 probe first; an address someone else answers for is not "
                         "announced (exit 1)");
  announce_cmd->add_option("--container", opt.container,
                           "re-announce a pod fabric-cni handed to the agent (asks the agent)");
  announce_cmd->add_flag("--via-agent", via_agent,
                         "ask the agent to announce (--container, or --ifname of the agent's "
                         "own network namespace)");
  for (CLI::App* cmd : {select, env}) {
    cmd->add_option("--gpus", opt.gpus,
                    "GPU PCI addresses, comma separated (0000:17:00.0, 17:00.0 or nvidia-smi's "
                    "00000000:17:00.0), or 'all'")
        ->required();
  }
  v1::RunProbeRequest& pr = opt.probe;
  probe
      ->add_option("--peer", *pr.mutable_peer(),
                   "the responder: HOST or HOST:PORT (another agent's --probe-listen, or "
                   "fabric-probe)")
      ->required();
  probe->add_option("--test", *pr.mutable_test(), "the test")
      ->check(
          CLI::IsMember({"write_bw", "write_lat", "send_bw", "send_lat", "read_bw", "read_lat"}))
      ->default_str("write_bw");
  probe->add_option("-d,--device", *pr.mutable_device(),
                    "local RDMA device (default: the first the schedule probes from)");
  probe->add_option(
      "-i,--ib-port",
      [&pr](const std::vector<std::string>& v) {
        uint32_t n = 0;
        if (!absl::SimpleAtoi(v[0], &n) || n < 1 || n > 254) return false;
        pr.set_ib_port(n);
        return true;
      },
      "port of the device");
  probe->add_option(
      "-x,--gid-index",
      [&pr](const std::vector<std::string>& v) {
        uint32_t n = 0;
        if (!absl::SimpleAtoi(v[0], &n) || n > 65535) return false;
        pr.set_gid_index(n);
        return true;
      },
      "GID index (default: chosen as NIC selection chooses it)");
  probe->add_option("--remote-device", *pr.mutable_remote_device(),
                    "the peer's RDMA device (default: the peer's choice)");
  probe->add_option("--transport", *pr.mutable_transport(), "rdma, tcp or auto")
      ->check(CLI::IsMember({"rdma", "tcp", "auto"}))
      ->default_str("auto");
  probe->add_flag(
      "-R,--rdma-cm", [&pr](int64_t n) { pr.set_rdma_cm(n > 0); }, "connect with rdma_cm");
  probe->add_option(
      "-s,--size",
      [&pr](const std::vector<std::string>& v) {
        uint64_t n = 0;
        if (!absl::SimpleAtoi(v[0], &n) || n == 0) return false;
        pr.set_size(n);
        return true;
      },
      "message size in bytes (default: the test's, as perftest)");
  auto* o_iters = probe->add_option(
      "-n,--iterations",
      [&pr](const std::vector<std::string>& v) {
        uint64_t n = 0;
        if (!absl::SimpleAtoi(v[0], &n) || n == 0) return false;
        pr.set_iterations(n);
        return true;
      },
      "iterations (default: the test's)");
  probe->add_option("-D,--duration", opt.probe_duration_s, "seconds instead of -n")
      ->check(CLI::Range(1.0, 86400.0))
      ->excludes(o_iters);
  probe->add_option(
      "-q,--qps",
      [&pr](const std::vector<std::string>& v) {
        uint32_t n = 0;
        if (!absl::SimpleAtoi(v[0], &n) || n == 0) return false;
        pr.set_qps(n);
        return true;
      },
      "queue pairs (bandwidth tests)");
  probe
      ->add_option("--step-timeout", opt.probe_step_timeout_s,
                   "seconds any one step of the test may take")
      ->check(CLI::Range(1.0, 300.0))
      ->capture_default_str();
  watch->add_option("--count", opt.count,
                    "stop after this many events (the first is the inventory itself)");
  watch->add_option("--duration", opt.duration_s, "stop after this many seconds")
      ->check(CLI::Range(0.0, 365 * 86400.0));
  probes_cmd->add_option("--peer", opt.peer, "only this peer");
  probes_cmd->add_option("--device", opt.device, "only this local device");
  probes_cmd->add_option("--test", opt.test, "only this test");
  probes_cmd->add_option("--limit", opt.limit, "at most this many results (0: all kept)");
  env->add_option("--format", opt.format, "shell (NAME=VALUE lines), json or nccl-conf")
      ->check(CLI::IsMember({"shell", "json", "nccl-conf"}))
      ->capture_default_str();
  env->add_flag("--keep-set", opt.keep_set,
                "leave out variables already set in this environment (your choice wins)");
  env->add_flag("--export", opt.is_export, "prefix shell lines with 'export '");
  health
      ->add_option("--fail-on", opt.fail_on,
                   "lowest verdict that exits non-zero: unknown (any problem), warning "
                   "(UNKNOWN exits 0) or critical (for readiness probes)")
      ->check(CLI::IsMember({"unknown", "warning", "critical"}))
      ->capture_default_str();
  health->add_flag("--liveness", opt.liveness,
                   "only check that fabric-agent answers and is serving (liveness probes)");

  // CLI11 answers an unknown subcommand with "A subcommand is required": name it instead.
  if (argc > 1 && argv[1][0] != '-') {
    std::vector<std::string> names;
    for (CLI::App* cmd : commands) names.push_back(cmd->get_name());
    if (std::find(names.begin(), names.end(), argv[1]) == names.end()) {
      return Fail(kUsage, absl::StrCat("unknown subcommand \"", argv[1], "\" (",
                                       absl::StrJoin(names, ", "), "; --help for more)"));
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    // For health a bad argument is UNKNOWN, as monitoring plugins report it.
    return health->parsed() ? HealthExitCode(v1::SEVERITY_UNKNOWN) : kUsage;
  }
  for (CLI::App* cmd : {inventory, topo, select, env, health}) {
    if (cmd->parsed()) {
      opt.local = cmd->count("--sysfs") + cmd->count("--procfs") > 0;
    }
  }
  if (opt.local && health->parsed() && opt.liveness) {
    return Fail(HealthExitCode(v1::SEVERITY_UNKNOWN),
                "--liveness asks the agent; it does not go with --sysfs/--procfs");
  }
  if (!opt.local && !opt.config.empty()) {
    return Fail(kUsage,
                "--config applies to local discovery (--sysfs/--procfs); the agent uses the "
                "config it was started with");
  }
  if (announce_cmd->parsed()) {
    if (!opt.container.empty() || via_agent) {
      if (!opt.netns.empty() || !opt.gateways.empty() || opt.repeat || opt.arp_reply ||
          opt.no_ipv6 || opt.conflict_probe) {
        return Fail(kUsage,
                    "--netns, --gateway, --repeat, --arp-reply, --no-ipv6 and --conflict-probe "
                    "are for local announcements; the agent uses its own plan");
      }
      if (opt.container.empty() && opt.ifname.empty()) {
        return Fail(kUsage, "--via-agent needs --container or --ifname");
      }
      return RunAnnounceRemote(opt);
    }
    if (opt.ifname.empty()) return Fail(kUsage, "announce needs --ifname (or --container)");
    return RunAnnounceLocal(opt);
  }
  if (announcements->parsed()) return RunAnnouncements(opt);
  if (probe->parsed()) return RunProbe(opt);
  if (probes_cmd->parsed()) return RunProbes(opt);
  if (watch->parsed()) return RunWatch(opt);
  if (inventory->parsed()) return RunInventory(opt);
  if (topo->parsed()) return RunTopo(opt);
  if (select->parsed()) return RunSelect(opt);
  if (health->parsed()) return RunHealth(opt);
  return RunEnv(opt);
}

}  // namespace
}  // namespace fabric

int main(int argc, char** argv) { return fabric::Main(argc, argv); }
