// fabricctl: queries of a host's RDMA fabric for operators and launchers. Every subcommand asks
// the node's fabric-agent (--target) unless --sysfs or --procfs asks for local discovery.
//
// Exit codes (ctl.h): 0 success; 1 the host lacks what was asked (no RDMA device, an unknown GPU,
// no usable port); 2 usage or bad input (flags, addresses, config); 3 the host cannot be read (the
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
namespace {

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
}  // namespace fabric::ctl

int main(int argc, char** argv) { return fabric::ctl::Main(argc, argv); }
