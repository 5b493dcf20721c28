#include "agent/daemon/agent.h"

#include <fcntl.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <functional>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/common/errno.h"
#include "agent/common/log.h"
#include "agent/config/config.h"
#include "agent/daemon/agent_metrics.h"
#include "agent/daemon/announcer.h"
#include "agent/daemon/api_server.h"
#include "agent/daemon/event_sources.h"
#include "agent/daemon/memory.h"
#include "agent/daemon/prober.h"
#include "agent/daemon/scan_trust.h"
#include "agent/daemon/service.h"
#include "agent/daemon/snapshot.h"
#include "agent/fabric/probes/schedule.h"
#include "agent/inventory/changes/changes.h"
#include "agent/inventory/discovery/discovery.h"
#include "agent/inventory/hostfs/host_fs.h"
#include "agent/policy/health/health.h"
#include "agent/policy/select/pairing.h"
#include "agent/publish/metrics/http_server.h"
#include "agent/publish/nfd/nfd.h"

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

// Everything start-up builds; the steps' teardowns release it in reverse order.
struct AgentState {
  AgentState(const AgentOptions& o, Notifier* n)
      : opt(o), notifier(n), sysfs(o.sysfs), procfs(o.procfs) {}

  const AgentOptions& opt;
  Notifier* notifier;
  HostFsImpl sysfs;
  HostFsImpl procfs;

  int signal_fd = -1;
  v1::AgentConfig config;
  int lock_fd = -1;
  std::string lock_path;
  bool own_socket = false;

  SnapshotStore store;
  uint64_t generation = 0;
  v1::Host start_host;  // GID tables at start, for "changed since start".
  std::string agent_findings_key;
  absl::Status last_scan;
  // While rescans are not trusted (transient read failures): since when, how many retries so
  // far, when the next one runs, and the finding that says so. Loop thread only.
  absl::Time stale_since = absl::InfiniteFuture();
  int stale_retries = 0;
  absl::Time stale_retry_at = absl::InfiniteFuture();
  std::optional<v1::Finding> stale_finding;

  std::vector<std::unique_ptr<EventSource>> sources;
  std::unique_ptr<EventSource> config_watch;  // --config changes reload it, as SIGHUP does.
  std::unique_ptr<Announcer> announcer;
  std::unique_ptr<Prober> prober;
  CallerTable callers;
  ApiCounters api_counters;
  std::unique_ptr<FabricAgentService> service;
  std::unique_ptr<ApiServer> api;
  std::unique_ptr<metrics::MetricsHttpServer> metrics;

  EventLog events;         // Loop thread only; each snapshot gets a copy.
  AgentCounters counters;  // Read by scrapes.
  HeapTrimmer trimmer;
  std::unique_ptr<TlsContext> tls;
};

// Which kernel event sources work, for health and metrics.
void CountSources(AgentState& st) {
  bool route = false, uevent = false;
  for (const auto& s : st.sources) {
    route = route || std::string(s->name()) == "route netlink";
    uevent = uevent || std::string(s->name()) == "uevent";
  }
  st.counters.route_events = route;
  st.counters.uevents = uevent;
}

// The agent's own findings: what degrades its answers without being the host's fault.
std::vector<v1::Finding> AgentFindings(const AgentState& st) {
  std::vector<v1::Finding> out;
  auto add = [&](v1::Severity sev, const std::string& msg) {
    v1::Finding f;
    f.set_severity(sev);
    f.set_check("agent");
    f.set_message(msg);
    out.push_back(std::move(f));
  };
  if (!st.counters.route_events.load()) {
    add(v1::SEVERITY_WARNING,
        absl::StrCat("route netlink events unavailable: changes are seen only by the periodic "
                     "rescan (every ",
                     absl::FormatDuration(st.opt.rescan_interval), ")"));
  }
  if (!st.last_scan.ok()) {
    add(v1::SEVERITY_UNKNOWN, absl::StrCat("the last rescan failed (", st.last_scan.message(),
                                           "); serving the previous inventory"));
  }
  if (st.stale_finding) out.push_back(*st.stale_finding);
  return out;
}

std::string FindingsKey(const std::vector<v1::Finding>& fs) {
  std::string key;
  for (const auto& f : fs) absl::StrAppend(&key, f.severity(), f.check(), f.message(), "\n");
  return key;
}

// Builds and publishes a snapshot when the host, the policy or the agent's findings changed.
void Publish(AgentState& st, std::optional<v1::Host> host, bool policy_changed) {
  auto cur = st.store.Current();
  std::vector<v1::InventoryChange> changes;
  bool host_changed = cur == nullptr;
  const absl::Time now = absl::Now();
  if (cur != nullptr && host) {
    changes = DiffHosts(cur->host, *host);
    host_changed = !changes.empty();
    st.events.Record(cur->host, changes, now);
  }
  st.events.Expire(now, st.opt.event_window);
  std::vector<v1::Finding> agent = AgentFindings(st);
  std::string key = FindingsKey(agent);
  if (!host_changed && !policy_changed && key == st.agent_findings_key) return;
  st.agent_findings_key = key;

  auto snap = std::make_shared<Snapshot>();
  if (host_changed) {
    snap->generation = ++st.generation;
    snap->discovered_at = now;
    snap->host = *std::move(host);
  } else {
    snap->generation = cur->generation;
    snap->discovered_at = cur->discovered_at;
    snap->host = cur->host;
  }
  snap->policy = st.config.selection();
  *snap->host.mutable_pairing() = PairGpus(snap->host, snap->policy);  // Once, not per request.
  snap->health = EvaluateHealth(snap->host, snap->policy);
  for (v1::Finding& f : GidChangeFindings(st.start_host, snap->host)) {
    AddFinding(&snap->health, std::move(f));
  }
  for (v1::Finding& f : agent) AddFinding(&snap->health, std::move(f));
  snap->events = st.events;
  snap->event_window = st.opt.event_window;
  for (const v1::InventoryChange& c : changes) {
    Log(LogLevel::kInfo, "change: ", v1::InventoryChange::Kind_Name(c.kind()), " ", c.subject(),
        c.old_value().empty() && c.new_value().empty() ? "" : " ", c.old_value(),
        c.old_value().empty() ? "" : " -> ", c.new_value());
  }
  const v1::Host& h = snap->host;
  st.store.Publish(snap);
  if (!st.opt.nfd_features_dir.empty()) {
    auto wrote = WriteNfdFeatures(st.opt.nfd_features_dir, RenderNfdFeatures(h, snap->policy));
    if (!wrote.ok()) Log(LogLevel::kWarning, "NFD feature file: ", wrote.status().message());
  }
}

// `policy_changed`: the config was just reloaded, so publish even when the host is the same.
void Rescan(AgentState& st, const std::string& why, bool policy_changed = false) {
  ++st.counters.rescans;
  st.stale_retry_at = absl::InfiniteFuture();  // Only an untrusted scan schedules a retry.
  const absl::Time start = absl::Now();
  auto host = Discover(st.sysfs, st.procfs);
  Log(LogLevel::kDebug, "rescan (", why, ") took ", absl::FormatDuration(absl::Now() - start));
  if (!host.ok()) {
    if (st.last_scan.ok()) Log(LogLevel::kWarning, "rescan failed: ", host.status().message());
    ++st.counters.rescan_errors;
    st.last_scan = host.status();
    Publish(st, std::nullopt, policy_changed);
    return;
  }
  st.last_scan = absl::OkStatus();
  const auto cur = st.store.Current();
  const ScanTrust trust = cur != nullptr ? JudgeScan(cur->host, *host) : ScanTrust{};
  const absl::Time now = absl::Now();
  if (!trust.trusted) {
    // A hole from a read that may succeed next time is no evidence that anything is gone: keep
    // the last good inventory (no new generation, no NFD labels or health from this scan).
    ++st.counters.stale_scans;
    if (st.stale_since == absl::InfiniteFuture()) {
      st.stale_since = now;
      st.counters.stale_since_unix_ns = absl::ToUnixNanos(now);
      const v1::FieldProblem& p = trust.new_transient.front();
      Log(LogLevel::kWarning, "rescan (", why, ") not published: ", trust.new_transient.size(),
          " reads failed for now, first ", p.path(), ": ", p.reason(),
          "; serving the last good inventory and retrying");
    }
    st.stale_finding = StaleFinding(st.stale_since, trust);
    st.stale_retry_at = now + StaleRetryDelay(++st.stale_retries, st.opt.rescan_interval);
    Publish(st, std::nullopt, policy_changed);
    return;
  }
  if (st.stale_finding) {
    Log(LogLevel::kInfo, "inventory no longer stale (stale since ",
        absl::FormatTime(absl::RFC3339_sec, st.stale_since, absl::UTCTimeZone()), ", ",
        st.stale_retries, " rescans not published)");
    st.stale_finding.reset();
    st.stale_since = absl::InfiniteFuture();
    st.stale_retries = 0;
    st.counters.stale_since_unix_ns = 0;
  }
  st.counters.last_scan_ok_unix_ns = absl::ToUnixNanos(now);
  Publish(st, *std::move(host), policy_changed);
}

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
  st.signal_fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (st.signal_fd < 0) return absl::InternalError(absl::StrCat("signalfd: ", ErrnoText(errno)));
  return absl::OkStatus();
}
void StopSignals(AgentState& st) {
  if (st.signal_fd >= 0) close(st.signal_fd);
  st.signal_fd = -1;
}

absl::Status StepConfig(AgentState& st) {
  if (st.opt.config.empty()) return absl::OkStatus();
  auto config = LoadConfig(st.opt.config);
  if (!config.ok()) return config.status();
  st.config = *std::move(config);
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
  st.lock_path = path + ".lock";
  st.lock_fd = open(st.lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (st.lock_fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open the socket lock ", st.lock_path, ": ", ErrnoText(errno)));
  }
  if (flock(st.lock_fd, LOCK_EX | LOCK_NB) != 0) {
    char buf[32] = {};
    ssize_t n = pread(st.lock_fd, buf, sizeof(buf) - 1, 0);
    std::string pid = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "?";
    while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
    close(st.lock_fd);
    st.lock_fd = -1;
    return absl::AlreadyExistsError(absl::StrCat("another fabric-agent (pid ", pid, ") is serving ",
                                                 path, "; stop it or choose another --socket"));
  }
  std::string pid = absl::StrCat(getpid(), "\n");
  if (ftruncate(st.lock_fd, 0) != 0 || pwrite(st.lock_fd, pid.data(), pid.size(), 0) < 0) {
    Log(LogLevel::kWarning, "cannot write the pid to ", st.lock_path, ": ", ErrnoText(errno));
  }
  struct stat sb;
  if (lstat(path.c_str(), &sb) == 0) {
    if (!S_ISSOCK(sb.st_mode)) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, " exists and is not a socket; refusing to replace it"));
    }
    unlink(path.c_str());  // Stale: its owner is gone (we hold the lock).
  }
  return absl::OkStatus();
}
void StopSocketLock(AgentState& st) {
  if (st.own_socket) unlink(st.opt.socket.c_str());
  if (st.lock_fd >= 0) {
    unlink(st.lock_path.c_str());
    close(st.lock_fd);  // Releases the lock.
    st.lock_fd = -1;
  }
}

absl::Status StepFirstInventory(AgentState& st) {
  auto host = Discover(st.sysfs, st.procfs);
  if (!host.ok()) return host.status();
  st.start_host = *host;
  ++st.counters.rescans;
  st.counters.last_scan_ok_unix_ns = absl::ToUnixNanos(absl::Now());
  Log(LogLevel::kInfo, "inventory: ", host->rdma_devices_size(), " RDMA devices, ",
      host->netdevs_size(), " netdevs, ", host->accelerators_size(), " accelerators, ",
      host->problems_size(), " discovery problems (", st.opt.sysfs, ")");
  Publish(st, *std::move(host), true);
  return absl::OkStatus();
}

absl::Status StepEvents(AgentState& st) {
  // Not fatal: without events the periodic rescan still keeps the inventory (health says so).
  auto route = OpenRouteEvents(st.opt.netlink_rcvbuf);
  if (route.ok()) {
    st.sources.push_back(*std::move(route));
  } else {
    Log(LogLevel::kWarning, route.status().message(), "; relying on the periodic rescan");
  }
  auto uevents = OpenUevents(st.opt.netlink_rcvbuf);
  if (uevents.ok()) {
    st.sources.push_back(*std::move(uevents));
  } else {
    Log(LogLevel::kWarning, uevents.status().message(),
        "; RDMA devices added or removed are seen by the periodic rescan");
  }
  if (!st.opt.config.empty()) {
    auto watch = OpenFileWatch(st.opt.config);
    if (watch.ok()) {
      st.config_watch = *std::move(watch);
    } else {
      Log(LogLevel::kWarning, watch.status().message(), "; reload the config with SIGHUP");
    }
  }
  CountSources(st);
  Publish(st, std::nullopt, false);  // Health reflects missing sources.
  return absl::OkStatus();
}
void StopEvents(AgentState& st) {
  st.config_watch.reset();
  st.sources.clear();
}

absl::Status StepAnnouncer(AgentState& st) {
  AnnouncerOptions o;
  o.socket = st.opt.announce_socket;
  if (o.socket == "auto") {
    o.socket = (std::filesystem::path(st.opt.socket).parent_path() / "announce.sock").string();
  }
  o.hold = st.opt.announce_hold;
  auto a = Announcer::Start(o);
  if (!a.ok()) return a.status();
  st.announcer = *std::move(a);
  if (!o.socket.empty()) Log(LogLevel::kInfo, "accepting announcement hand-offs on ", o.socket);
  return absl::OkStatus();
}
void StopAnnouncer(AgentState& st) { st.announcer.reset(); }

absl::Status StepProbes(AgentState& st) {
  ProberOptions o;
  o.listen = st.opt.probe_listen;
  o.sysfs = st.opt.sysfs;
  o.responder_clients = st.opt.probe_clients;
  o.allow = st.opt.probe_allow;
  o.rate_per_minute = st.opt.probe_rate;
  o.secret_file = st.opt.probe_secret_file;
  auto p = Prober::Start(o, &st.store);
  if (!p.ok()) return p.status();
  st.prober = *std::move(p);
  st.prober->SetSchedule(st.config.probes());
  if (!st.prober->responder().empty()) {
    Log(LogLevel::kInfo, "probe responder on ", st.prober->responder());
  }
  if (probes::ScheduleEnabled(st.config.probes())) {
    Log(LogLevel::kInfo, "probing ", st.config.probes().peers_size(), " peers",
        st.config.probes().peer_dns().empty()
            ? ""
            : absl::StrCat(" and the addresses of ", st.config.probes().peer_dns()),
        " every ", absl::FormatDuration(probes::Interval(st.config.probes())));
  }
  return absl::OkStatus();
}
void StopProbes(AgentState& st) { st.prober.reset(); }

// Certificates that do not load are a configuration error (exit 2), before anything serves.
absl::Status StepTls(AgentState& st) {
  if (st.opt.tls.cert.empty() && st.opt.tls.key.empty()) return absl::OkStatus();
  auto tls = TlsContext::Load(st.opt.tls);
  if (tls.ok()) st.tls = *std::move(tls);
  return tls.status();
}

absl::Status StepServe(AgentState& st) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  ServiceOptions so;
  so.watch_timeout = st.opt.watch_timeout;
  so.callers = &st.callers;
  so.max_watches = st.opt.max_watches;
  so.max_watches_per_caller = st.opt.max_watches_per_caller;
  so.counters = &st.api_counters;
  so.max_blocking_calls = st.opt.max_threads;
  st.service =
      std::make_unique<FabricAgentService>(&st.store, st.announcer.get(), st.prober.get(), so);
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
  ao.tls = st.tls.get();
  ao.relay_unix = st.opt.relay_unix;
  auto api = ApiServer::Start(ao, {st.service.get()}, &st.callers);
  if (!api.ok()) return api.status();
  st.api = *std::move(api);
  st.own_socket = true;
  st.api->server()->GetHealthCheckService()->SetServingStatus(kServiceName, false);
  Log(LogLevel::kInfo, st.api->Describe(ao));
  return absl::OkStatus();
}
void StopServe(AgentState& st) {
  st.store.Shutdown();  // Watch streams end now (UNAVAILABLE), before the server waits on them.
  if (st.api != nullptr) {
    st.api->server()->GetHealthCheckService()->Shutdown();
    st.api->Shutdown(absl::Milliseconds(300));
    st.api.reset();
  }
  st.service.reset();
}

absl::Status StepMetrics(AgentState& st) {
  if (st.opt.metrics.empty()) return absl::OkStatus();
  MetricsSources src;
  src.store = &st.store;
  src.sysfs = &st.sysfs;
  src.counters = &st.counters;
  src.prober = st.prober.get();
  src.announcer = st.announcer.get();
  src.api = st.api.get();
  src.api_counters = &st.api_counters;
  auto server = metrics::MetricsHttpServer::Start(
      st.opt.metrics, [src] { return RenderAgentMetrics(src, absl::Now()); });
  if (!server.ok()) {
    return absl::Status(server.status().code(), absl::StrCat("--metrics=", st.opt.metrics, ": ",
                                                             server.status().message()));
  }
  st.metrics = *std::move(server);
  Log(LogLevel::kInfo, "metrics on http://", st.metrics->address(), "/metrics");
  return absl::OkStatus();
}
void StopMetrics(AgentState& st) { st.metrics.reset(); }

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

absl::Status StepNfd(AgentState& st) {
  if (st.opt.nfd_features_dir.empty()) return absl::OkStatus();
  auto snap = st.store.Current();
  auto wrote =
      WriteNfdFeatures(st.opt.nfd_features_dir, RenderNfdFeatures(snap->host, snap->policy));
  if (!wrote.ok()) return wrote.status();
  return absl::OkStatus();
}

absl::Status StepReady(AgentState& st) {
  st.api->server()->GetHealthCheckService()->SetServingStatus(kServiceName, true);
  const auto snap = st.store.Current();
  st.notifier->Notify(absl::StrCat("READY=1\nSTATUS=serving ", snap->host.rdma_devices_size(),
                                   " RDMA devices, ", snap->host.accelerators_size(),
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
    {"lock the socket", StepSocketLock, StopSocketLock, kAgentFailed},
    {"first inventory", StepFirstInventory, nullptr, kAgentFailed},
    {"watch netlink and uevents", StepEvents, StopEvents, kAgentFailed},
    {"announcement hand-offs", StepAnnouncer, StopAnnouncer, kAgentFailed},
    {"probes", StepProbes, StopProbes, kAgentFailed},
    {"serve gRPC", StepServe, StopServe, kAgentFailed},
    {"socket permissions", StepSocketPermissions, nullptr, kAgentFailed},
    {"metrics", StepMetrics, StopMetrics, kAgentFailed},
    {"NFD feature file", StepNfd, nullptr, kAgentFailed},
    {"notify ready", StepReady, nullptr, kAgentFailed},
};

// `why`: "SIGHUP" or "file changed", for the log.
void Reload(AgentState& st, const char* why) {
  st.notifier->Notify("RELOADING=1");
  bool policy_changed = false;
  if (!st.opt.config.empty()) {
    auto config = LoadConfig(st.opt.config);
    if (config.ok()) {
      st.config = *std::move(config);
      policy_changed = true;
      if (st.prober != nullptr) st.prober->SetSchedule(st.config.probes());
      Log(LogLevel::kInfo, "reloaded ", st.opt.config, " (", why, ")");
    } else {
      Log(LogLevel::kError, "keeping the previous config (", why, "): ", config.status().message());
    }
  }
  Rescan(st, why, policy_changed);
  st.notifier->Notify("READY=1");
}

int PollMillis(absl::Time now, absl::Time deadline) {
  if (deadline == absl::InfiniteFuture()) return -1;
  if (deadline <= now) return 0;
  return static_cast<int>(std::min<int64_t>(
      INT_MAX, absl::ToInt64Milliseconds(absl::Ceil(deadline - now, absl::Milliseconds(1)))));
}

// Runs until SIGTERM or SIGINT.
void Loop(AgentState& st) {
  const absl::Duration watchdog = st.notifier->WatchdogInterval();
  absl::Time now = absl::Now();
  absl::Time next_rescan = now + st.opt.rescan_interval;
  absl::Time next_watchdog = watchdog > absl::ZeroDuration() ? now : absl::InfiniteFuture();
  absl::Time dirty_at = absl::InfiniteFuture();  // When coalesced events are handled.
  std::string dirty_why;
  absl::Time reload_at = absl::InfiniteFuture();  // When a changed config file is read.
  for (;;) {
    now = absl::Now();
    const absl::Time deadline = std::min(
        {next_rescan, next_watchdog, dirty_at, reload_at, st.stale_retry_at, st.trimmer.next()});
    std::vector<pollfd> fds;
    fds.push_back({st.signal_fd, POLLIN, 0});
    // The config watch (if any) is second, so the sources start at index 2.
    fds.push_back({st.config_watch != nullptr ? st.config_watch->fd() : -1, POLLIN, 0});
    for (const auto& s : st.sources) fds.push_back({s->fd(), POLLIN, 0});
    int n = poll(fds.data(), fds.size(), PollMillis(now, deadline));
    if (n < 0 && errno != EINTR) {
      Log(LogLevel::kError, "poll: ", ErrnoText(errno));
      return;
    }
    if (n > 0 && (fds[0].revents & POLLIN) != 0) {
      signalfd_siginfo si;
      while (read(st.signal_fd, &si, sizeof(si)) == sizeof(si)) {
        if (si.ssi_signo == SIGHUP) {
          Reload(st, "SIGHUP");
        } else {
          Log(LogLevel::kInfo, "received ", strsignal(static_cast<int>(si.ssi_signo)),
              "; stopping");
          return;
        }
      }
    }
    now = absl::Now();
    if (n > 0 && fds[1].revents != 0 && st.config_watch != nullptr) {
      auto d = st.config_watch->Drain();
      if (!d.ok()) {
        Log(LogLevel::kWarning, d.status().message(), "; reload the config with SIGHUP");
        st.config_watch.reset();
      } else if (d->relevant > 0 || d->overflow) {
        // Editors write in several steps: read it once they are done.
        if (reload_at == absl::InfiniteFuture()) reload_at = now + st.opt.debounce;
      }
    }
    for (size_t i = 2; n > 0 && i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      EventSource& src = *st.sources[i - 2];
      auto d = src.Drain();
      if (!d.ok()) {
        // A broken source would spin the loop; drop it and let health say so.
        Log(LogLevel::kWarning, d.status().message(), "; no more ", src.name(), " events");
        st.sources.erase(st.sources.begin() + static_cast<long>(i - 2));
        CountSources(st);
        Publish(st, std::nullopt, false);
        break;
      }
      if (d->overflow) {
        ++st.counters.netlink_resyncs;
        Log(LogLevel::kInfo, src.name(), " overflowed (ENOBUFS): full resync");
      }
      if (d->relevant > 0 || d->overflow) {
        if (dirty_at == absl::InfiniteFuture()) dirty_at = now + st.opt.debounce;
        dirty_why = d->overflow ? absl::StrCat(src.name(), " resync") : d->last;
      }
    }
    now = absl::Now();
    if (now >= reload_at) {
      Reload(st, "file changed");
      reload_at = absl::InfiniteFuture();
    }
    if (now >= dirty_at || now >= next_rescan || now >= st.stale_retry_at) {
      Rescan(st, now >= dirty_at      ? dirty_why
                 : now >= next_rescan ? "periodic"
                                      : "retry of a stale inventory");
      dirty_at = absl::InfiniteFuture();
      next_rescan = absl::Now() + st.opt.rescan_interval;
    }
    if (now >= st.trimmer.next()) st.trimmer.Tick(now);
    if (now >= next_watchdog) {
      st.notifier->Notify("WATCHDOG=1");
      next_watchdog = now + watchdog;
    }
  }
}

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
    Loop(st);
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
