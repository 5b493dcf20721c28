// fabric-agent: the per-node daemon. Discovers the host's RDMA fabric, keeps that inventory live
// from netlink and uevents, and serves it (selection, placement, health) over gRPC.
#include <malloc.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/common/cli_args.h"
#include "agent/common/cli_args_cli11.h"
#include "agent/common/cli_docs.h"
#include "agent/common/cli_docs_cli11.h"
#include "agent/common/log.h"
#include "agent/common/version.h"
#include "agent/daemon/lifecycle/agent.h"
#include "agent/daemon/workers/prober.h"
#include "agent/fabric/announce/handoff.h"
#include "agent/fabric/probe_cli/cli.h"
#include "agent/fabric/probes/access.h"
#include "agent/fabric/probes/auth.h"

namespace {

// The options whose documented empty value ("--cdi-dir=") turns their feature off: the one
// exception to RefuseEmptyValues.
std::vector<std::string>& OptionalPaths() {
  static std::vector<std::string> names;
  return names;
}

// A path option whose empty value ("--cdi-dir=") turns its feature off. CLI11 refuses an empty
// value unless a value is optional; the value used when none is given is then the empty one.
CLI::Option* AddOptionalPath(CLI::App& app, const std::string& name, std::string* value,
                             const std::string& help) {
  OptionalPaths().push_back(name);
  return app.add_option(name, *value, help)->expected(0, 1)->default_str("");
}

// fabric-agent(8): a daemon, so section 8 as Debian places them. Options come from the tree.
fabric::docs::Page Page(const CLI::App& app) {
  fabric::docs::Page p = fabric::docs::PageOf(app, "fabric-agent", 8, "[OPTIONS]");
  p.description = {
      "fabric-agent discovers this host's RDMA NICs, GPUs and their PCIe topology from sysfs, "
      "keeps that inventory live from netlink and uevents (with a full rescan every "
      "--rescan-interval as a safety net), and serves it, with NIC selection, placement and "
      "health, over gRPC: on a Unix socket, and with --listen on TCP. fabricctl(1) is its "
      "client; fabric-cni(8) hands it the repeats of a pod's announcements.",
      "SIGHUP reloads the --config file; SIGTERM or SIGINT stop the agent. Under systemd "
      "(Type=notify) it reports readiness and sends watchdog pings."};
  p.sections.push_back(
      {"EXIT STATUS",
       {},
       {{absl::StrCat(fabric::kAgentOk), "", "stopped by SIGTERM or SIGINT"},
        {absl::StrCat(fabric::kAgentFailed), "",
         "start-up failed (the socket is taken, sysfs cannot be read)"},
        {absl::StrCat(fabric::kAgentBadConfig), "",
         "a bad option or config file, or a hand-off socket another process serves"}}});
  p.sections.push_back(
      {"ENVIRONMENT",
       {},
       {{"NOTIFY_SOCKET", "", "systemd's notification socket (readiness, status)"},
        {"WATCHDOG_USEC", "", "systemd's watchdog interval; the agent pings at half of it"}}});
  p.sections.push_back(
      {"FILES",
       {},
       {{fabric::AgentOptions{}.socket, "", "the API socket (--socket)"},
        {fabric::announce::kDefaultHandoffSocket, "",
         "where fabric-cni hands over a pod's announcements (--announce-socket)"},
        {"/etc/default/fabric-agent", "",
         "FABRIC_AGENT_ARGS: the options the systemd unit starts the agent with"},
        {"/etc/fabric-agent/config.json", "", "the config file those options name (--config)"},
        {fabric::AgentOptions{}.device_plugin_dir + "/kubelet.sock", "",
         "the kubelet's registration socket; the device plugins serve fabric-<resource>.sock "
         "beside it (--device-plugin-dir)"}}});
  p.see_also = {"fabricctl(1)", "fabric-probe(1)", "fabric-cni(8)", "systemd.service(5)"};
  return p;
}

// What the flags hold before they become AgentOptions: seconds as given, and whether a path
// with a default was given at all.
struct Flags {
  explicit Flags(const fabric::AgentOptions& opt)
      : rescan_s(absl::ToDoubleSeconds(opt.rescan_interval)),
        hold_s(absl::ToDoubleSeconds(opt.announce_hold)),
        event_window_s(absl::ToDoubleSeconds(opt.event_window)),
        watch_timeout_s(absl::ToDoubleSeconds(opt.watch_timeout)) {}
  double rescan_s, hold_s, event_window_s, watch_timeout_s;
  bool no_cdi = false;
  std::string log_level = "info";
  CLI::Option *cdi_dir_opt = nullptr, *state_dir_opt = nullptr, *kmsg_opt = nullptr,
              *host_file_dir_opt = nullptr, *device_plugin_dir_opt = nullptr;
};

// The API: its sockets, TLS, who may make control calls, and its bounds.
void AddApiFlags(CLI::App& app, fabric::AgentOptions& opt, Flags& /*f*/) {
  app.add_option("--socket", opt.socket, "Unix socket to serve on (mode 0660)")
      ->capture_default_str();
  app.add_option("--socket-group", opt.socket_group,
                 "group (name or number) that owns the socket; default: the process's group");
  auto* listen = app.add_option("--listen", opt.listen,
                                "also serve on TCP HOST:PORT: reads only, unless TLS with client "
                                "certificates (--tls-client-ca) is on; off by default");
  auto* tls_cert = app.add_option("--tls-cert", opt.tls.cert,
                                  "PEM certificate chain: --listen serves TLS (re-read on change)")
                       ->needs(listen);
  app.add_option("--tls-key", opt.tls.key, "PEM private key of --tls-cert (re-read on change)")
      ->needs(tls_cert);
  tls_cert->needs("--tls-key");
  auto* client_ca =
      app.add_option("--tls-client-ca", opt.tls.client_ca,
                     "PEM CA: TLS clients must present a certificate from it, and only they may "
                     "make control calls over TCP")
          ->needs(tls_cert);
  app.add_option("--tls-control-names", opt.tls.control_names,
                 "only client certificates with one of these CN or SAN names may make control "
                 "calls (comma-separated)")
      ->delimiter(',')
      ->needs(client_ca);
  app.add_flag("--relay-unix", opt.relay_unix,
               "pass the socket's connections through the agent's relay, as TCP's are (about "
               "35 us more per local call); they pass the HTTP/2 rapid-reset guard either way");
  app.add_option("--control-group", opt.control_group,
                 "group (name or number) whose members may make control calls (Announce, "
                 "RunProbe) over the Unix socket, besides root and the agent's own user");
  app.add_option("--max-connections", opt.max_connections,
                 "API connections per listener; more are answered RESOURCE_EXHAUSTED")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--max-streams", opt.max_streams, "concurrent calls per API connection")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  app.add_option(
         "--max-threads", opt.max_threads,
         "threads of the API server, and calls that block (Announce, RunProbe) running at once")
      ->check(CLI::Range(4, 1 << 16))
      ->capture_default_str();
  app.add_option("--max-watches", opt.max_watches, "WatchInventory streams open at once")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  app.add_option("--max-watches-per-caller", opt.max_watches_per_caller,
                 "WatchInventory streams one caller (uid, or TCP address) may hold")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
}

// Where the host is read from and how often it is read again.
void AddDiscoveryFlags(CLI::App& app, fabric::AgentOptions& opt, Flags& f) {
  app.add_option("--sysfs", opt.sysfs, "sysfs root to discover from")->capture_default_str();
  app.add_option("--procfs", opt.procfs, "procfs root to discover from")->capture_default_str();
  app.add_option("--config", opt.config,
                 "config file (JSON: selection policy, static env); reloaded on SIGHUP");
  app.add_option("--rescan-interval", f.rescan_s,
                 "seconds between safety-net full rescans (events trigger rescans as they come)")
      ->check(CLI::Range(0.1, 86400.0))
      ->capture_default_str();
  app.add_option("--netlink-rcvbuf", opt.netlink_rcvbuf,
                 "receive buffer of the netlink and uevent sockets, in bytes; when it overflows "
                 "(ENOBUFS) the agent does a full resync")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
}

// What the agent keeps for others on this host: NFD labels, the CDI spec, the published host,
// the device plugins, its own memory of health.
void AddPublishFlags(CLI::App& app, fabric::AgentOptions& opt, Flags& f) {
  app.add_option("--nfd-features-dir", opt.nfd_features_dir,
                 "write a Node Feature Discovery feature file (fabric-agent) into this directory");
  f.cdi_dir_opt =
      AddOptionalPath(app, "--cdi-dir", &opt.cdi_dir,
                      "keep a CDI spec (fabric.io-rdma.json: devices fabric.io/rdma=gpuK, =<RDMA "
                      "device>, =all) in this directory (default /var/run/cdi), rewritten when the "
                      "inventory changes it; created if missing; empty (--cdi-dir=) turns it off. "
                      "With a --sysfs root other than /sys only when given");
  f.state_dir_opt = AddOptionalPath(
      app, "--state-dir", &opt.state_dir,
      "keep the health monitor's memory (health-memory.pb: findings, first seen, flaps; "
      "dropped on a new boot ID) in this directory (default /var/lib/fabric-agent), so "
      "an agent restart forgets nothing; empty (--state-dir=) keeps none. With a "
      "--sysfs root other than /sys only when given");
  f.kmsg_opt = AddOptionalPath(
      app, "--kmsg", &opt.kmsg,
      "read NIC and PCIe fault lines from this kernel log device (default /dev/kmsg; "
      "needs CAP_SYSLOG where kernel.dmesg_restrict=1); empty (--kmsg=) reads none. "
      "With a --sysfs root other than /sys only when given");
  app.add_flag("--no-cdi", f.no_cdi, "keep no CDI spec (as --cdi-dir=)");
  f.host_file_dir_opt = AddOptionalPath(
      app, "--host-file-dir", &opt.host_file_dir,
      "keep the published host (host.pb: the host and selection policy fabric-env and "
      "fabricctl exec select from without an RPC) in this world-readable directory "
      "(default /run/fabric-env), rewritten when the host or policy changes; created "
      "if missing; empty (--host-file-dir=) turns it off. With a --sysfs root other "
      "than /sys only when given");
  f.device_plugin_dir_opt = AddOptionalPath(
      app, "--device-plugin-dir", &opt.device_plugin_dir,
      "serve the config's device_plugin resources as kubelet device plugins "
      "(fabric-<resource>.sock, registered on kubelet.sock) in this directory (default "
      "/var/lib/kubelet/device-plugins); empty (--device-plugin-dir=) turns them off. "
      "With a --sysfs root other than /sys only when given");
  app.add_option("--pod-helper", opt.pod_helper,
                 "the fabric-env binary the device plugins mount read-only into the containers "
                 "they allocate for, at /usr/local/bin/fabric-env; empty: none")
      ->capture_default_str();
  app.add_option("--pod-nccl-env-plugin", opt.pod_nccl_env_plugin,
                 "NCCL's environment plugin (libnccl-env-fabric.so) the device plugins mount "
                 "beside the helper, at /usr/local/lib/fabric-agent/, with NCCL_ENV_PLUGIN naming "
                 "it in place of the NCCL_* variables; empty (the default): none");
  // --cdi-dev-root: its first name, when only the CDI spec named device nodes.
  app.add_option(
      "--dev-root,--cdi-dev-root", opt.dev_root,
      "for tests and hosts whose device nodes live elsewhere: the host paths of device "
      "nodes in the CDI spec and the device plugins' answers are DIR/dev/infiniband/...");
}

// The DRA driver: the API server it writes to and this node's name there.
void AddDraFlags(CLI::App& app, fabric::AgentOptions& opt, Flags& /*f*/) {
  app.add_flag("--dra", opt.dra,
               "publish this node's RDMA NICs as ResourceSlices of the DRA driver rdma.fabric.io "
               "(health as device taints) and keep the node's FabricHealthy condition; NICs the "
               "device plugins serve are left out");
  app.add_option("--kubeconfig", opt.kubeconfig,
                 "the API server and credentials for --dra (default: the pod's service account)");
  app.add_option("--node-name", opt.node_name,
                 "this node's name for --dra (default: $NODE_NAME, else the host name)");
  app.add_option("--dra-kubelet-dir", opt.dra_kubelet_dir,
                 "the kubelet's directory: --dra registers its kubelet plugin in "
                 "DIR/plugins_registry and serves it in DIR/plugins/rdma.fabric.io (claims "
                 "prepared as CDI devices: needs the CDI spec); empty: slices only")
      ->capture_default_str();
}

// Pods' address announcements handed over by fabric-cni.
void AddAnnounceFlags(CLI::App& app, fabric::AgentOptions& opt, Flags& f) {
  AddOptionalPath(app, "--announce-socket", &opt.announce_socket,
                  "Unix socket (SOCK_SEQPACKET, mode 0600) where fabric-cni hands over the "
                  "repeats of a pod's announcements; auto (the default): beside --socket, "
                  "announce.sock for agent.sock, else NAME.announce.sock for NAME[.sock]; empty "
                  "(--announce-socket=) turns it off");
  app.add_option("--announce-hold", f.hold_s,
                 "seconds a pod's interface stays held after its schedule, for re-announcing "
                 "(held sockets keep the pod's network namespace alive)")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
}

// The switch at the other end of each cable.
void AddNeighborFlags(CLI::App& app, fabric::AgentOptions& opt, Flags& /*f*/) {
  app.add_option("--lldp", opt.lldp,
                 "listen for LLDP on every physical netdev (CAP_NET_RAW): the switch port each "
                 "is cabled to, in the inventory, watch events and labels")
      ->capture_default_str();
  app.add_option("--ib-neighbors", opt.ib_neighbors,
                 "ask the node behind each active InfiniBand port with directed-route SMPs "
                 "(/dev/infiniband/umad*): its leaf switch, as LLDP gives it on Ethernet")
      ->capture_default_str();
}

// The probe responder and its guards.
void AddProbeFlags(CLI::App& app, fabric::AgentOptions& opt, Flags& /*f*/) {
  app.add_option("--probe-listen", opt.probe_listen,
                 "serve other hosts' bandwidth and latency probes (fabric-probe, other agents' "
                 "schedules) on ADDR:PORT, [V6]:PORT or :PORT (perftest's port is 18515); off by "
                 "default")
      ->check([](const std::string& v) {
        std::string host;
        uint16_t port = 0;
        absl::Status s = fabric::ParseProbeListen(v, &host, &port);
        return s.ok() ? std::string() : std::string(s.message());
      });
  app.add_option("--probe-clients", opt.probe_clients,
                 "probes the responder serves at once, each on its own RDMA device")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--probe-allow", opt.probe_allow,
                 "the responder serves only peers in these networks (CIDR[,CIDR...], IPv4 or "
                 "IPv6); default: the subnets this host has addresses in")
      ->check([](const std::string& v) {
        absl::StatusOr<fabric::probes::AllowList> a = fabric::probes::AllowList::Parse(v);
        return a.ok() ? std::string() : std::string(a.status().message());
      });
  app.add_option("--probe-perftest", opt.probe_perftest,
                 "serve stock perftest clients (ib_write_bw HOST, ...): a fabric-probe --perftest "
                 "server line, e.g. 'write_bw -p 18516 -d mlx5_0 -x 3'; one client at a time, "
                 "again and again, admitted by --probe-allow alone (a stock client proves no "
                 "secret); repeat for more tests, each on its own port")
      ->take_all()
      ->allow_extra_args(false)
      ->check([](const std::string& v) {
        absl::StatusOr<fabric::probes::PerftestServerOptions> o =
            fabric::probes::ParsePerftestResponder(v);
        return o.ok() ? std::string() : std::string(o.status().message());
      });
  app.add_option("--probe-rate", opt.probe_rate,
                 "tests a minute the responder serves to one peer address (0: no limit)")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  app.add_option("--probe-secret-file", opt.probe_secret_file,
                 "a file holding a secret the responder's clients and this agent's own probes "
                 "must prove they know (HMAC over fresh nonces; never sent); read on every test")
      ->check([](const std::string& v) {
        absl::StatusOr<std::string> s = fabric::probes::LoadSecret(v);
        return s.ok() ? std::string() : std::string(s.status().message());
      });
}

// Metrics, how long events and watchers are kept, the log.
void AddServingFlags(CLI::App& app, fabric::AgentOptions& opt, Flags& f) {
  app.add_option("--metrics", opt.metrics,
                 "serve Prometheus metrics at http://ADDR:PORT/metrics (ADDR:PORT, [V6]:PORT or "
                 ":PORT); off by default");
  app.add_option("--event-window", f.event_window_s,
                 "seconds a vanished RDMA device stays reported absent, and a link flap a health "
                 "warning")
      ->check(CLI::Range(1.0, 30 * 86400.0))
      ->capture_default_str();
  app.add_option("--watch-timeout", f.watch_timeout_s,
                 "seconds a WatchInventory client may leave an event unread before it is dropped")
      ->check(CLI::Range(0.5, 86400.0))
      ->capture_default_str();
  app.add_option("--log-level", f.log_level, "debug, info, warning or error")
      ->check(CLI::IsMember({"debug", "info", "warning", "error"}))
      ->capture_default_str();
}

}  // namespace

int main(int argc, char** argv) {
  // gRPC serves on many threads; glibc would give each busy one its own arena and keep the
  // memory after a burst. Two arenas keep the daemon's footprint flat at no measurable cost.
  mallopt(M_ARENA_MAX, 2);
  fabric::AgentOptions opt;
  Flags f(opt);
  CLI::App app{
      "fabric-agent: serves this host's RDMA NICs, GPUs, topology, NIC selection and health "
      "over gRPC (Unix socket, optionally TCP)"};
  app.set_version_flag("--version", absl::StrCat("fabric-agent ", fabric::kFabricVersion));
  for (auto add : {AddApiFlags, AddDiscoveryFlags, AddPublishFlags, AddDraFlags, AddAnnounceFlags,
                   AddNeighborFlags, AddProbeFlags, AddServingFlags}) {
    add(app, opt, f);
  }
  if (auto kind = fabric::docs::GenerateKind(std::vector<std::string>(argv, argv + argc))) {
    return fabric::docs::PrintGenerated(*kind, Page(app),
                                        fabric::docs::CompletionOf(app, "fabric-agent"));
  }
  // "--opt=" and an option missing its value swallow the next argument in CLI11 (the shared
  // rules, agent/common/cli_args.h and cli_args_cli11.h).
  const std::vector<std::string_view> may_be_empty(OptionalPaths().begin(), OptionalPaths().end());
  const std::vector<std::string> given(argv + 1, argv + argc);
  absl::Status s = fabric::RefuseEmptyValues(given, may_be_empty);
  if (s.ok()) s = fabric::RefuseMissingValues(app, given);
  if (!s.ok()) {
    std::fprintf(stderr, "fabric-agent: %s\nRun with --help for more information.\n",
                 std::string(s.message()).c_str());
    return fabric::kAgentBadConfig;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : fabric::kAgentBadConfig;
  }
  fabric::LogLevel level = fabric::LogLevel::kInfo;
  (void)fabric::ParseLogLevel(f.log_level, &level);
  fabric::InitLog("fabric-agent", level);
  opt.rescan_interval = absl::Seconds(f.rescan_s);
  opt.announce_hold = absl::Seconds(f.hold_s);
  opt.cdi_dir_explicit = f.cdi_dir_opt->count() > 0;
  if (f.no_cdi) opt.cdi_dir.clear();
  opt.host_file_dir_explicit = f.host_file_dir_opt->count() > 0;
  opt.state_dir_explicit = f.state_dir_opt->count() > 0;
  opt.kmsg_explicit = f.kmsg_opt->count() > 0;
  opt.device_plugin_dir_explicit = f.device_plugin_dir_opt->count() > 0;
  opt.event_window = absl::Seconds(f.event_window_s);
  opt.watch_timeout = absl::Seconds(f.watch_timeout_s);
  auto notifier = fabric::MakeSdNotifier();
  return fabric::RunAgent(opt, notifier.get());
}
