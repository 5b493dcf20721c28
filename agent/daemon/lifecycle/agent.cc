#include "agent/daemon/lifecycle/agent.h"

#include <fcntl.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "agent/common/errno.h"
#include "agent/common/excerpt.h"
#include "agent/common/k8s_label.h"
#include "agent/common/log.h"
#include "agent/common/socket_file.h"
#include "agent/common/status.h"
#include "agent/config/config.h"
#include "agent/daemon/lifecycle/agent_state.h"
#include "agent/fabric/announce/handoff.h"
#include "agent/fabric/probe_schedule/schedule.h"
#include "agent/policy/select/gpu_names.h"
#include "agent/publish/deviceplugin/resource_section.h"
#include "agent/publish/podrecord/pod_record.h"

namespace fabric {
namespace {

constexpr char kServiceName[] = "fabric.v1.FabricAgent";

class SdNotifier final : public Notifier {
 public:
  void Notify(const std::string& state) override { (void)sd_notify(0, state.c_str()); }
  absl::Duration WatchdogInterval() override {
    uint64_t usec = 0;
    if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0) return absl::ZeroDuration();
    return absl::Microseconds(usec) / 2;
  }
};

// ---- Start-up steps ----

absl::Status StepSignals(AgentState& st) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  // Blocked before gRPC starts its threads, so they inherit the mask and only signalfd sees
  // these signals.
  if (pthread_sigmask(SIG_BLOCK, &set, nullptr) != 0) {
    return absl::InternalError("cannot block SIGTERM/SIGINT/SIGHUP");
  }
  signal(SIGPIPE, SIG_IGN);
  st.process.signals.reset(signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!st.process.signals.valid()) {
    return absl::InternalError(absl::StrCat("signalfd: ", ErrnoText(errno)));
  }
  return absl::OkStatus();
}
void StopSignals(AgentState& st) { st.process.signals.reset(); }

absl::Status StepConfig(AgentState& st) {
  if (st.opt.config.empty()) return absl::OkStatus();
  auto config = LoadConfig(st.opt.config);
  if (!config.ok()) return config.status();
  // A device plugin socket bind(2) cannot take is a config error, not a retry forever.
  if (!st.opt.device_plugin_dir.empty()) {
    FABRIC_RETURN_IF_ERROR(
        deviceplugin::CheckSocketPaths(st.opt.device_plugin_dir, config->device_plugin()));
  }
  st.process.config = *std::move(config);
  st.cycle.SetPolicy(st.process.config.selection());
  return absl::OkStatus();
}

absl::Status StepSocketLock(AgentState& st) {
  const std::string& path = st.opt.socket;
  if (path.empty()) return absl::InvalidArgumentError("--socket is empty");
  if (path.size() >= sizeof(sockaddr_un{}.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("--socket=", path, " is longer than ",
                                                   sizeof(sockaddr_un{}.sun_path) - 1,
                                                   " bytes, the limit of a Unix socket path"));
  }
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot create the socket directory ", dir.string(), ": ", ec.message()));
    }
  }
  // A lock beside the socket decides who owns it: gRPC would silently unlink a live
  // instance's socket, and a stale socket from a crash must not block a restart.
  AgentState::Process& pr = st.process;
  pr.lock_path = path + ".lock";
  pr.lock.reset(open(pr.lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!pr.lock.valid()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open the socket lock ", pr.lock_path, ": ", ErrnoText(errno)));
  }
  if (flock(pr.lock.get(), LOCK_EX | LOCK_NB) != 0) {
    char buf[32] = {};
    ssize_t n = pread(pr.lock.get(), buf, sizeof(buf) - 1, 0);
    std::string pid = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "?";
    while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
    pr.lock.reset();
    return absl::AlreadyExistsError(absl::StrCat("another fabric-agent (pid ", pid, ") is serving ",
                                                 path, "; stop it or choose another --socket"));
  }
  std::string pid = absl::StrCat(getpid(), "\n");
  if (ftruncate(pr.lock.get(), 0) != 0 || pwrite(pr.lock.get(), pid.data(), pid.size(), 0) < 0) {
    Log(LogLevel::kWarning, "cannot write the pid to ", pr.lock_path, ": ", ErrnoText(errno));
  }
  // Stale when its owner is gone (we hold the lock); a listener there without the lock is not
  // an agent of ours, and is refused rather than unlinked under it.
  return ClearStaleSocket(path, "--socket");
}
void StopSocketLock(AgentState& st) {
  (void)RemoveBoundSocket(st.process.socket_file);
  if (st.process.lock.valid()) {
    unlink(st.process.lock_path.c_str());
    st.process.lock.reset();  // Releases the lock.
  }
}

// A directory the agent writes for others (CDI specs, the published host, device plugin sockets):
// on the live host by default; for another sysfs root (an example host) only when asked, as its
// contents would describe devices this machine does not have.
bool Publishes(const AgentState& st, const std::string& dir, bool explicit_dir) {
  return !dir.empty() && (explicit_dir || st.opt.sysfs == "/sys");
}

// CLOCK_BOOTTIME: one clock for every process of a boot, so the saved memory's times stay
// comparable across a restart; wall time only for display.
MemoryClock BootClock() {
  timespec ts{};
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return {absl::DurationFromTimespec(ts), absl::Now()};
}

// The health monitor, a publisher from the first inventory on. Its memory is kept under
// --state-dir for the boot the procfs root names; without a boot ID nothing is kept (a state of
// an unknown boot could be a previous boot's).
absl::Status StepHealthMonitor(AgentState& st) {
  HealthMonitorOptions o;
  o.config = st.process.config.health();
  auto boot_id = st.procfs.ReadFile("sys/kernel/random/boot_id");
  if (boot_id.ok()) o.boot_id = std::string(absl::StripAsciiWhitespace(*boot_id));
  if (Publishes(st, st.opt.state_dir, st.opt.state_dir_explicit) && !o.boot_id.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(st.opt.state_dir, ec);
    if (ec) {
      Log(LogLevel::kWarning, "state directory ", st.opt.state_dir, ": ", ec.message(),
          "; the health memory is not kept across restarts");
    } else {
      o.state_file = absl::StrCat(st.opt.state_dir, "/health-memory.pb");
    }
  }
  st.workers.health = std::make_unique<HealthMonitor>(&st.sysfs, std::move(o), BootClock);
  st.workers.health->Start();
  st.cycle.AddPublisher(st.workers.health.get());
  if (!st.process.config.health().no_kmsg() && Publishes(st, st.opt.kmsg, st.opt.kmsg_explicit)) {
    KmsgSourceOptions ko;
    ko.path = st.opt.kmsg;
    auto source = KmsgSourceImpl::Open(ko);
    if (source.ok()) {
      st.workers.kmsg_source = *std::move(source);
      st.workers.kmsg = std::make_unique<KmsgReader>(st.workers.kmsg_source.get());
    }
    // Not readable (no CAP_SYSLOG under kernel.dmesg_restrict=1, no /dev/kmsg in a container):
    // said in health as OK, the counters are still judged.
    st.workers.health->SetKernelLogStatus(source.status());
  }
  return absl::OkStatus();
}
void StopHealthMonitor(AgentState& st) {
  st.workers.kmsg.reset();
  st.workers.kmsg_source.reset();
  if (st.workers.health != nullptr) st.cycle.RemovePublisher(st.workers.health.get());
}

// The kubelet device plugins, when the config names resources; they answer from the first
// snapshot on. Config reloads do not change the resources (the kubelet knows them by socket).
absl::Status StartDevicePlugins(AgentState& st) {
  const v1::DevicePluginConfig& config = st.process.config.device_plugin();
  if (config.resources().empty() ||
      !Publishes(st, st.opt.device_plugin_dir, st.opt.device_plugin_dir_explicit)) {
    return absl::OkStatus();
  }
  DevicePluginOptions o;
  o.dir = st.opt.device_plugin_dir;
  o.config = config;
  if (st.host_file != nullptr) o.allocate.host_file_dir = st.opt.host_file_dir;
  o.allocate.pod_helper = st.opt.pod_helper;
  o.allocate.nccl_env_plugin = st.opt.pod_nccl_env_plugin;
  o.allocate.dev_root = st.opt.dev_root;
  o.allocate.cdi = st.cdi != nullptr;
  auto plugins = DevicePlugins::Start(std::move(o));
  if (!plugins.ok()) return plugins.status();
  st.device_plugins = *std::move(plugins);
  st.cycle.AddPublisher(st.device_plugins.get());  // It logs what it serves.
  return absl::OkStatus();
}

// The DRA driver's API server and node, with --dra: credentials that cannot be read and a node
// name that is not one are a bad config. Reaching the server is not checked here: an API server
// down at start is a finding and a retry, not a failed start.
absl::Status StepDraConfig(AgentState& st) {
  if (!st.opt.dra) return absl::OkStatus();
  absl::StatusOr<kubeapi::KubeConfig> config =
      st.opt.kubeconfig.empty()
          ? kubeapi::InClusterConfig([](const char* name) -> std::optional<std::string> {
              const char* v = std::getenv(name);
              return v == nullptr ? std::nullopt : std::optional<std::string>(v);
            })
          : kubeapi::LoadKubeconfig(st.opt.kubeconfig);
  if (!config.ok()) return config.status();
  st.dra_config = *config;
  auto api = kubeapi::KubeApiImpl::Create(*std::move(config));
  if (!api.ok()) return api.status();
  st.dra_api = *std::move(api);
  std::string node = st.opt.node_name;
  if (node.empty() && std::getenv("NODE_NAME") != nullptr) node = std::getenv("NODE_NAME");
  if (node.empty()) {
    char name[256] = {};
    if (gethostname(name, sizeof(name) - 1) == 0) node = name;
  }
  if (!IsDnsSubdomain(node)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--dra: node name ", Excerpt(node), " is not a DNS subdomain (--node-name)"));
  }
  st.dra_node = std::move(node);
  return absl::OkStatus();
}

// The DRA driver's slices and kubelet plugin, after the device plugins (whose NICs it leaves out)
// and the CDI spec (whose per-NIC devices a prepared claim names).
absl::Status StartDra(AgentState& st) {
  if (st.dra_api == nullptr) return absl::OkStatus();
  const v1::DevicePluginConfig dp =
      st.device_plugins != nullptr ? st.process.config.device_plugin() : v1::DevicePluginConfig{};
  if (!st.opt.dra_kubelet_dir.empty()) {
    if (st.cdi == nullptr) {
      return absl::FailedPreconditionError(
          "--dra's kubelet plugin prepares claims as CDI devices: keep the CDI spec (--cdi-dir), "
          "or serve slices only (--dra-kubelet-dir=)");
    }
    auto api = kubeapi::KubeApiImpl::Create(st.dra_config);  // Its own connection.
    if (!api.ok()) return api.status();
    DraPluginOptions po;
    po.registry_dir = absl::StrCat(st.opt.dra_kubelet_dir, "/plugins_registry");
    po.plugin_dir = absl::StrCat(st.opt.dra_kubelet_dir, "/plugins/", dra::kDriver);
    po.cdi_dir = st.opt.cdi_dir;
    po.node = st.dra_node;
    po.device_plugin = dp;
    // The claims' network data from fabric-cni's records (its envDir is the published host's).
    if (st.host_file != nullptr) {
      po.records_dir = absl::StrCat(st.opt.host_file_dir, "/", podrecord::kDirName);
    }
    auto plugin = DraPlugin::Start(*std::move(api), std::move(po));
    if (!plugin.ok()) return plugin.status();
    st.dra_plugin = *std::move(plugin);
    st.cycle.AddPublisher(st.dra_plugin.get());
    Log(LogLevel::kInfo, "DRA driver ", dra::kDriver, ": kubelet plugin on ",
        st.dra_plugin->RegistrationSocket());
  }
  DraSlicesOptions o;
  o.node = st.dra_node;
  o.device_plugin = dp;
  auto dra = DraSlices::Start(std::move(st.dra_api), std::move(o));
  if (!dra.ok()) return dra.status();
  st.dra = *std::move(dra);
  st.cycle.AddPublisher(st.dra.get());
  Log(LogLevel::kInfo, "DRA driver ", dra::kDriver, ": keeping the ResourceSlices of node ",
      st.dra_node);
  return absl::OkStatus();
}

// The publishers first: the first snapshot's labels, CDI spec and published host are written as
// it is published. A directory that cannot be written is a health finding, not a failed start:
// the agent serves without it.
absl::Status StepFirstInventory(AgentState& st) {
  if (!st.opt.nfd_features_dir.empty()) {
    st.nfd = std::make_unique<NfdPublisher>(st.opt.nfd_features_dir);
    st.cycle.AddPublisher(st.nfd.get());
  }
  if (Publishes(st, st.opt.cdi_dir, st.opt.cdi_dir_explicit)) {
    // NCCL's environment plugin in every container given a device of the spec, where the
    // published host is kept for it to read.
    const bool host_file = Publishes(st, st.opt.host_file_dir, st.opt.host_file_dir_explicit);
    st.cdi = std::make_unique<CdiPublisher>(
        st.opt.cdi_dir, cdi::SpecOptions{.dev_root = st.opt.dev_root,
                                         .nccl_env_plugin = st.opt.pod_nccl_env_plugin,
                                         .pod_helper = st.opt.pod_helper,
                                         .host_file_dir = host_file ? st.opt.host_file_dir : ""});
    st.cycle.AddPublisher(st.cdi.get());
    Log(LogLevel::kInfo, "keeping the CDI spec ", st.cdi->path());
  }
  if (Publishes(st, st.opt.host_file_dir, st.opt.host_file_dir_explicit)) {
    st.host_file = std::make_unique<HostFilePublisher>(st.opt.host_file_dir);
    st.cycle.AddPublisher(st.host_file.get());
    // fabric-cni's pod records beside it (envDir = this directory): those of gone pods removed.
    st.pod_records = std::make_unique<PodRecordSweeper>(
        absl::StrCat(st.opt.host_file_dir, "/", podrecord::kDirName));
    st.cycle.AddPublisher(st.pod_records.get());
    Log(LogLevel::kInfo, "keeping the published host ", st.host_file->path());
  }
  if (absl::Status s = StartDevicePlugins(st); !s.ok()) return s;
  if (absl::Status s = StartDra(st); !s.ok()) return s;
  return st.cycle.First();
}
void StopFirstInventory(AgentState& st) {
  if (st.dra != nullptr) {
    st.cycle.RemovePublisher(st.dra.get());
    st.dra.reset();  // Joins the worker; a call in flight ends within the client's bound.
  }
  if (st.dra_plugin != nullptr) {
    st.cycle.RemovePublisher(st.dra_plugin.get());
    st.dra_plugin.reset();  // Stops both servers, removes the sockets.
  }
  if (st.device_plugins != nullptr) {
    st.cycle.RemovePublisher(st.device_plugins.get());
    st.device_plugins.reset();  // Stops the servers, removes the sockets.
  }
  if (st.nfd != nullptr) st.cycle.RemovePublisher(st.nfd.get());
  if (st.cdi != nullptr) st.cycle.RemovePublisher(st.cdi.get());
  if (st.host_file != nullptr) st.cycle.RemovePublisher(st.host_file.get());
  if (st.pod_records != nullptr) st.cycle.RemovePublisher(st.pod_records.get());
}

absl::Status StepEvents(AgentState& st) {
  // Not fatal: without events the periodic rescan still keeps the inventory (health says so).
  auto route = OpenRouteEvents(st.opt.netlink_rcvbuf);
  if (route.ok()) {
    st.events.kernel.push_back(*std::move(route));
  } else {
    Log(LogLevel::kWarning, route.status().message(), "; relying on the periodic rescan");
  }
  auto uevents = OpenUevents(st.opt.netlink_rcvbuf);
  if (uevents.ok()) {
    st.events.kernel.push_back(*std::move(uevents));
  } else {
    Log(LogLevel::kWarning, uevents.status().message(),
        "; RDMA devices added or removed are seen by the periodic rescan");
  }
  if (!st.opt.config.empty()) {
    auto watch = OpenFileWatch(st.opt.config);
    if (watch.ok()) {
      st.events.config_watch = *std::move(watch);
    } else {
      Log(LogLevel::kWarning, watch.status().message(), "; reload the config with SIGHUP");
    }
  }
  CountSources(st);
  AgentState::Workers& w = st.workers;
  const v1::Host& host = *st.cycle.store().Current()->host;
  if (st.opt.lldp) {
    // Not fatal either: without CAP_NET_RAW no neighbours (each netdev logged, counted).
    w.lldp = std::make_unique<LldpListener>();
    w.lldp->Sync(host, absl::Now());
    st.cycle.AddNeighborSource(w.lldp.get());
    st.cycle.AddPublisher(w.lldp.get());
  }
  if (st.opt.ib_neighbors) {
    // Asked on a worker thread; a port without a umad device (RoCE, a container without
    // /dev/infiniband/umad*) simply has no InfiniBand neighbour.
    w.ib = std::make_unique<IbNeighbors>();
    w.ib->Sync(host, absl::Now());
    st.cycle.AddNeighborSource(w.ib.get());
  }
  st.cycle.Republish();  // Health reflects missing sources.
  return absl::OkStatus();
}
// The workers stay until the process ends (the loop has stopped): only the sources close here.
void StopEvents(AgentState& st) {
  st.events.config_watch.reset();
  st.events.kernel.clear();
}

// Which hand-off socket, and that no one serves it yet: another agent's live socket is a
// configuration conflict (exit 2) for the operator to resolve with --announce-socket.
absl::Status StepAnnounceSocket(AgentState& st) {
  st.process.announce_socket = st.opt.announce_socket == "auto"
                                   ? announce::HandoffSocketBeside(st.opt.socket)
                                   : st.opt.announce_socket;
  if (st.process.announce_socket.empty()) return absl::OkStatus();
  return ClearStaleSocket(st.process.announce_socket, "--announce-socket");
}

absl::Status StepAnnouncer(AgentState& st) {
  AnnouncerOptions o;
  o.socket = st.process.announce_socket;
  o.hold = st.opt.announce_hold;
  auto a = Announcer::Start(o);
  if (!a.ok()) return a.status();
  st.workers.announcer = *std::move(a);
  if (!o.socket.empty()) Log(LogLevel::kInfo, "accepting announcement hand-offs on ", o.socket);
  return absl::OkStatus();
}
void StopAnnouncer(AgentState& st) { st.workers.announcer.reset(); }

ProberOptions ProberOptionsOf(const AgentState& st) {
  ProberOptions o;
  o.listen = st.opt.probe_listen;
  o.sysfs = st.opt.sysfs;
  o.responder_clients = st.opt.probe_clients;
  o.allow = st.opt.probe_allow;
  o.perftest = st.opt.probe_perftest;
  o.rate_per_minute = st.opt.probe_rate;
  o.secret_file = st.opt.probe_secret_file;
  return o;
}
// The probe options' own errors (a --probe-perftest port used twice) are a bad flag: exit 2,
// before anything starts, as the other options' are.
absl::Status StepProbeOptions(AgentState& st) { return Prober::CheckOptions(ProberOptionsOf(st)); }
absl::Status StepProbes(AgentState& st) {
  auto p = Prober::Start(ProberOptionsOf(st), &st.cycle.store());
  if (!p.ok()) return p.status();
  Prober& prober = *(st.workers.prober = *std::move(p));
  const v1::ProbeSchedule& schedule = st.process.config.probes();
  prober.SetSchedule(schedule);
  if (!prober.responder().empty()) {
    Log(LogLevel::kInfo, "probe responder on ", prober.responder());
  }
  if (probes::ScheduleEnabled(schedule)) {
    Log(LogLevel::kInfo, "probing ", schedule.peers_size(), " peers",
        schedule.peer_dns().empty() ? ""
                                    : absl::StrCat(" and the addresses of ", schedule.peer_dns()),
        " every ", absl::FormatDuration(probes::Interval(schedule)));
  }
  return absl::OkStatus();
}
void StopProbes(AgentState& st) { st.workers.prober.reset(); }

// Certificates that do not load are a configuration error (exit 2), before anything serves.
absl::Status StepTls(AgentState& st) {
  if (st.opt.tls.cert.empty() && st.opt.tls.key.empty()) return absl::OkStatus();
  auto tls = TlsContext::Load(st.opt.tls);
  if (tls.ok()) st.api.tls = *std::move(tls);
  return tls.status();
}

absl::Status StepServe(AgentState& st) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  ServiceOptions so;
  so.watch_timeout = st.opt.watch_timeout;
  so.callers = &st.api.callers;
  so.max_watches = st.opt.max_watches;
  so.max_watches_per_caller = st.opt.max_watches_per_caller;
  so.counters = &st.api.counters;
  so.max_blocking_calls = st.opt.max_threads;
  so.sysfs = &st.sysfs;
  so.mig = ProcessMigResolver();  // NVML, loaded on the first MIG-... name.
  st.api.service = std::make_unique<FabricAgentService>(
      &st.cycle.store(), st.workers.announcer.get(), st.workers.prober.get(), so);
  ApiServerOptions ao;
  ao.socket = st.opt.socket;
  ao.listen = st.opt.listen;
  ao.policy.agent_uid = geteuid();
  if (!st.opt.control_group.empty()) {
    auto gid = ResolveGroup("--control-group", st.opt.control_group);
    if (!gid.ok()) return gid.status();
    ao.policy.control_gid = *gid;
    ao.policy.control_group = st.opt.control_group;
  }
  ao.max_connections = st.opt.max_connections;
  ao.max_streams = st.opt.max_streams;
  ao.max_threads = st.opt.max_threads;
  ao.tls = st.api.tls.get();
  ao.relay_unix = st.opt.relay_unix;
  auto api = ApiServer::Start(ao, {st.api.service.get()}, &st.api.callers);
  if (!api.ok()) return api.status();
  st.api.server = *std::move(api);
  st.process.socket_file = st.api.server->socket_file();
  st.api.server->server()->GetHealthCheckService()->SetServingStatus(kServiceName, false);
  Log(LogLevel::kInfo, st.api.server->Describe(ao));
  return absl::OkStatus();
}
void StopServe(AgentState& st) {
  st.cycle.store()
      .Shutdown();  // Watch streams end now (UNAVAILABLE), before the server waits on them.
  if (st.api.server != nullptr) {
    st.api.server->server()->GetHealthCheckService()->Shutdown();
    st.api.server->Shutdown(absl::Milliseconds(300));
    st.api.server.reset();
  }
  st.api.service.reset();
}

absl::Status StepMetrics(AgentState& st) {
  if (st.opt.metrics.empty()) return absl::OkStatus();
  MetricsSources src;
  src.store = &st.cycle.store();
  src.sysfs = &st.sysfs;
  src.counters = &st.counters;
  src.prober = st.workers.prober.get();
  src.announcer = st.workers.announcer.get();
  src.health = st.workers.health.get();
  src.api = st.api.server.get();
  src.api_counters = &st.api.counters;
  src.device_plugins = st.device_plugins.get();
  auto server = metrics::MetricsHttpServer::Start(
      st.opt.metrics, [src] { return RenderAgentMetrics(src, absl::Now()); });
  if (!server.ok()) {
    return absl::Status(server.status().code(), absl::StrCat("--metrics=", st.opt.metrics, ": ",
                                                             server.status().message()));
  }
  st.api.metrics = *std::move(server);
  Log(LogLevel::kInfo, "metrics on http://", st.api.metrics->address(), "/metrics");
  return absl::OkStatus();
}
void StopMetrics(AgentState& st) { st.api.metrics.reset(); }

absl::Status StepSocketPermissions(AgentState& st) {
  const char* path = st.opt.socket.c_str();
  if (!st.opt.socket_group.empty()) {
    auto gid = ResolveGroup("--socket-group", st.opt.socket_group);
    if (!gid.ok()) return gid.status();
    if (chown(path, static_cast<uid_t>(-1), *gid) != 0) {
      return absl::PermissionDeniedError(absl::StrCat("cannot give ", path, " to group ",
                                                      st.opt.socket_group, ": ", ErrnoText(errno)));
    }
  }
  if (chmod(path, 0660) != 0) {
    return absl::PermissionDeniedError(absl::StrCat("chmod 0660 ", path, ": ", ErrnoText(errno)));
  }
  return absl::OkStatus();
}

// Written with the first snapshot already; a directory that could not take it ends start-up.
absl::Status StepNfd(AgentState& st) {
  if (st.nfd == nullptr) return absl::OkStatus();
  return st.nfd->Write(*st.cycle.store().Current());
}

absl::Status StepReady(AgentState& st) {
  st.api.server->server()->GetHealthCheckService()->SetServingStatus(kServiceName, true);
  const auto snap = st.cycle.store().Current();
  st.notifier->Notify(absl::StrCat("READY=1\nSTATUS=serving ", snap->host->rdma_devices_size(),
                                   " RDMA devices, ", snap->host->accelerators_size(),
                                   " accelerators"));
  return absl::OkStatus();
}

struct Step {
  const char* name;
  absl::Status (*start)(AgentState&);
  void (*stop)(AgentState&);  // Null when there is nothing to undo.
  int exit_code;              // When `start` fails.
};

constexpr Step kSteps[] = {
    {"block signals", StepSignals, StopSignals, kAgentFailed},
    // A burst of clients must not run the agent out of descriptors: take the hard limit.
    {"raise the file limit", [](AgentState&) { return RaiseFileLimit(), absl::OkStatus(); },
     nullptr, kAgentFailed},
    {"load config", StepConfig, nullptr, kAgentBadConfig},
    {"load TLS certificates", StepTls, nullptr, kAgentBadConfig},
    {"probe options", StepProbeOptions, nullptr, kAgentBadConfig},
    {"DRA driver's API server", StepDraConfig, nullptr, kAgentBadConfig},
    {"lock the socket", StepSocketLock, StopSocketLock, kAgentFailed},
    {"health monitor", StepHealthMonitor, StopHealthMonitor, kAgentFailed},
    {"first inventory", StepFirstInventory, StopFirstInventory, kAgentFailed},
    {"watch netlink and uevents", StepEvents, StopEvents, kAgentFailed},
    {"hand-off socket", StepAnnounceSocket, nullptr, kAgentBadConfig},
    {"announcement hand-offs", StepAnnouncer, StopAnnouncer, kAgentFailed},
    {"probes", StepProbes, StopProbes, kAgentFailed},
    {"serve gRPC", StepServe, StopServe, kAgentFailed},
    {"socket permissions", StepSocketPermissions, nullptr, kAgentFailed},
    {"metrics", StepMetrics, StopMetrics, kAgentFailed},
    {"NFD feature file", StepNfd, nullptr, kAgentFailed},
    {"notify ready", StepReady, nullptr, kAgentFailed},
};

}  // namespace

std::unique_ptr<Notifier> MakeSdNotifier() { return std::make_unique<SdNotifier>(); }

int RunAgent(const AgentOptions& options, Notifier* notifier) {
  AgentState st(options, notifier);
  size_t started = 0;
  int code = kAgentOk;
  for (const Step& step : kSteps) {
    Log(LogLevel::kDebug, "start-up: ", step.name);
    absl::Status s = step.start(st);
    if (!s.ok()) {
      Log(LogLevel::kError, step.name, ": ", s.message());
      code = step.exit_code;
      ++started;  // Its teardown undoes whatever it got done.
      break;
    }
    ++started;
  }
  if (code == kAgentOk) {
    RunLoop(st);
    notifier->Notify("STOPPING=1");
  }
  while (started > 0) {
    const Step& step = kSteps[--started];
    if (step.stop != nullptr) {
      Log(LogLevel::kDebug, "teardown: ", step.name);
      step.stop(st);
    }
  }
  return code;
}

}  // namespace fabric
