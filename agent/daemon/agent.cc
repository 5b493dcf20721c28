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
#include "agent/common/socket_file.h"
#include "agent/config/config.h"
#include "agent/daemon/agent_state.h"
#include "agent/fabric/announce/handoff.h"
#include "agent/fabric/probes/schedule.h"
#include "agent/inventory/discovery/discovery.h"
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
  // Stale when its owner is gone (we hold the lock); a listener there without the lock is not
  // an agent of ours, and is refused rather than unlinked under it.
  return ClearStaleSocket(path, "--socket");
}
void StopSocketLock(AgentState& st) {
  (void)RemoveBoundSocket(st.socket_file);
  if (st.lock_fd >= 0) {
    unlink(st.lock_path.c_str());
    close(st.lock_fd);  // Releases the lock.
    st.lock_fd = -1;
  }
}

absl::Status StepFirstInventory(AgentState& st) {
  auto host = Discover(st.sysfs, st.procfs);
  if (!host.ok()) return host.status();
  ++st.counters.rescans;
  st.counters.last_scan_ok_unix_ns = absl::ToUnixNanos(absl::Now());
  Log(LogLevel::kInfo, "inventory: ", host->rdma_devices_size(), " RDMA devices, ",
      host->netdevs_size(), " netdevs, ", host->accelerators_size(), " accelerators, ",
      host->problems_size(), " discovery problems (", st.opt.sysfs, ")");
  RefreshedHost first = ScannedHost(*std::move(host));
  st.start_host = first.host;  // Refreshed hosts share its devices: unchanged ones are skipped.
  Publish(st, std::move(first), true);
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
  if (st.opt.lldp) {
    // Not fatal either: without CAP_NET_RAW no neighbours (each netdev logged, counted).
    st.lldp = std::make_unique<LldpListener>();
    st.lldp->Sync(*st.store.Current()->host, absl::Now());
  }
  if (st.opt.ib_neighbors) {
    // Asked on a worker thread; a port without a umad device (RoCE, a container without
    // /dev/infiniband/umad*) simply has no InfiniBand neighbour.
    st.ib = std::make_unique<IbNeighbors>();
    st.ib->Sync(*st.store.Current()->host, absl::Now());
  }
  Publish(st, std::nullopt, false);  // Health reflects missing sources.
  return absl::OkStatus();
}
void StopEvents(AgentState& st) {
  st.config_watch.reset();
  st.sources.clear();
}

// Which hand-off socket, and that no one serves it yet: another agent's live socket is a
// configuration conflict (exit 2) for the operator to resolve with --announce-socket.
absl::Status StepAnnounceSocket(AgentState& st) {
  st.announce_socket = st.opt.announce_socket == "auto"
                           ? announce::HandoffSocketBeside(st.opt.socket)
                           : st.opt.announce_socket;
  if (st.announce_socket.empty()) return absl::OkStatus();
  return ClearStaleSocket(st.announce_socket, "--announce-socket");
}

absl::Status StepAnnouncer(AgentState& st) {
  AnnouncerOptions o;
  o.socket = st.announce_socket;
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
  so.sysfs = &st.sysfs;
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
  st.socket_file = st.api->socket_file();
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
      WriteNfdFeatures(st.opt.nfd_features_dir, RenderNfdFeatures(*snap->host, snap->policy));
  if (!wrote.ok()) return wrote.status();
  return absl::OkStatus();
}

absl::Status StepReady(AgentState& st) {
  st.api->server()->GetHealthCheckService()->SetServingStatus(kServiceName, true);
  const auto snap = st.store.Current();
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
    {"lock the socket", StepSocketLock, StopSocketLock, kAgentFailed},
    {"first inventory", StepFirstInventory, nullptr, kAgentFailed},
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

// `why`: "SIGHUP" or "file changed", for the log. `events_pending`: events wait to be handled, so
// what the rescan finds is theirs, not drift.
void Reload(AgentState& st, const char* why, bool events_pending) {
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
  Rescan(st, why, policy_changed, /*safety_net=*/!events_pending);
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
  ChangeScope pending;                            // What they named.
  absl::Time reload_at = absl::InfiniteFuture();  // When a changed config file is read.
  for (;;) {
    now = absl::Now();
    const absl::Time lldp_expiry = st.lldp != nullptr
                                       ? std::min(st.lldp->NextExpiry(), st.lldp->NextSilence(now))
                                       : absl::InfiniteFuture();
    const absl::Time ib_due = st.ib != nullptr ? st.ib->NextQuery() : absl::InfiniteFuture();
    const absl::Time deadline =
        std::min({next_rescan, next_watchdog, dirty_at, reload_at, st.stale_retry_at,
                  st.trimmer.next(), lldp_expiry, ib_due});
    std::vector<pollfd> fds;
    fds.push_back({st.signal_fd, POLLIN, 0});
    // The config watch (if any) is second, so the sources start at index 2.
    fds.push_back({st.config_watch != nullptr ? st.config_watch->fd() : -1, POLLIN, 0});
    for (const auto& s : st.sources) fds.push_back({s->fd(), POLLIN, 0});
    const size_t sources_end = fds.size();
    fds.push_back({st.ib != nullptr ? st.ib->fd() : -1, POLLIN, 0});
    const size_t lldp_fds = fds.size();  // LLDP sockets last.
    if (st.lldp != nullptr) st.lldp->AppendFds(&fds);
    int n = poll(fds.data(), fds.size(), PollMillis(now, deadline));
    if (n < 0 && errno != EINTR) {
      Log(LogLevel::kError, "poll: ", ErrnoText(errno));
      return;
    }
    if (n > 0 && (fds[0].revents & POLLIN) != 0) {
      signalfd_siginfo si;
      while (read(st.signal_fd, &si, sizeof(si)) == sizeof(si)) {
        if (si.ssi_signo == SIGHUP) {
          Reload(st, "SIGHUP", dirty_at != absl::InfiniteFuture());
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
    if (st.lldp != nullptr) {
      // Neighbours change the inventory's netdevs, not what sysfs says: published at once, not
      // through a refresh (a flood is bounded per netdev by the table).
      bool heard = false;
      for (size_t i = lldp_fds; n > 0 && i < fds.size(); ++i) heard = heard || fds[i].revents != 0;
      bool changed = heard && st.lldp->Drain(now);
      changed = (now >= lldp_expiry && st.lldp->Expire(now)) || changed;
      // At a silence deadline too: the findings say which netdevs heard nothing.
      if (changed || now >= lldp_expiry) Publish(st, std::nullopt, false);
      const LldpListener::Counters& c = st.lldp->counters();
      st.counters.lldp_frames.store(c.frames);
      st.counters.lldp_malformed.store(c.malformed + c.truncated);
      st.counters.lldp_dropped.store(st.lldp->table().dropped());
      st.counters.lldp_listening.store(st.lldp->listening());
    }
    if (st.ib != nullptr) {
      // SMP answers from the worker, and ports due to be asked again.
      const bool answered = n > 0 && fds[sources_end].revents != 0 && st.ib->Collect();
      if (now >= ib_due) st.ib->Sync(*st.store.Current()->host, now);
      if (answered) Publish(st, std::nullopt, false);
    }
    for (size_t i = 2; n > 0 && i < sources_end; ++i) {
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
        pending.Merge(d->scope);
      }
    }
    now = absl::Now();
    if (now >= reload_at) {
      Reload(st, "file changed", dirty_at != absl::InfiniteFuture());
      reload_at = absl::InfiniteFuture();
    }
    if (now >= dirty_at || now >= next_rescan || now >= st.stale_retry_at) {
      const uint64_t full_before = st.counters.refreshes_full.load();
      if (now >= next_rescan || now >= st.stale_retry_at) {
        // The safety net reads everything, pending events included (then it is no drift check).
        const bool periodic = now >= next_rescan;
        Rescan(st, periodic ? "periodic" : "retry of a stale inventory", false,
               periodic && dirty_at == absl::InfiniteFuture());
      } else {
        RefreshFor(st, pending, dirty_why);
      }
      pending = ChangeScope();
      dirty_at = absl::InfiniteFuture();
      // The safety net runs --rescan-interval after the last full rescan, however many targeted
      // refreshes happened since.
      if (st.counters.refreshes_full.load() != full_before) {
        next_rescan = absl::Now() + st.opt.rescan_interval;
      }
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
