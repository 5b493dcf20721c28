#include "agent/daemon/workers/prober.h"

#include <ifaddrs.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/common/ip.h"
#include "agent/common/log.h"
#include "agent/common/strings.h"
#include "agent/fabric/probe_cli/cli.h"
#include "agent/fabric/probes/wire.h"
#include "agent/policy/health/health.h"
#include "google/protobuf/util/time_util.h"

namespace fabric {
namespace {

using probes::Transport;

constexpr absl::Duration kMaxStepTimeout = absl::Seconds(300);
constexpr uint32_t kMaxRetrySeconds = 300;

}  // namespace

absl::Status ParseProbeListen(const std::string& text, std::string* host, uint16_t* port) {
  auto hp = ParseHostPort(text);
  if (!hp.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--probe-listen=", hp.status().message()));
  }
  *host = hp->host;
  *port = hp->port;
  return absl::OkStatus();
}

namespace {

std::set<std::string> LocalAddresses() {
  std::set<std::string> out;
  ifaddrs* ifa = nullptr;
  if (getifaddrs(&ifa) != 0) return out;
  for (ifaddrs* i = ifa; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr) continue;
    const int family = i->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    char buf[NI_MAXHOST];
    const socklen_t len = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    if (getnameinfo(i->ifa_addr, len, buf, sizeof buf, nullptr, 0, NI_NUMERICHOST) == 0) {
      std::string a = buf;
      if (const size_t pct = a.find('%'); pct != std::string::npos) a.resize(pct);
      out.insert(a);
    }
  }
  freeifaddrs(ifa);
  return out;
}

// The --probe-perftest servers, checked: each line parses, each port is its own (and not the
// responder's).
absl::StatusOr<std::vector<probes::PerftestServerOptions>> PerftestServers(
    const ProberOptions& options) {
  std::vector<probes::PerftestServerOptions> out;
  std::optional<probes::AllowList> allow;
  if (!options.allow.empty()) {
    absl::StatusOr<probes::AllowList> a = probes::AllowList::Parse(options.allow);
    if (!a.ok())
      return absl::InvalidArgumentError(absl::StrCat("--probe-allow: ", a.status().message()));
    allow = *std::move(a);
  }
  std::map<uint16_t, std::string> ports;
  if (!options.listen.empty()) {
    std::string host;
    uint16_t port = 0;
    if (ParseProbeListen(options.listen, &host, &port).ok() && port != 0) {
      ports[port] = "--probe-listen";
    }
  }
  for (const std::string& line : options.perftest) {
    absl::StatusOr<probes::PerftestServerOptions> o = probes::ParsePerftestResponder(line);
    if (!o.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--probe-perftest \"", line, "\": ", o.status().message()));
    }
    auto [at, fresh] = ports.emplace(o->port, absl::StrCat("\"", line, "\""));
    if (!fresh) {
      return absl::InvalidArgumentError(absl::StrCat("--probe-perftest \"", line, "\": port ",
                                                     o->port, " is also ", at->second, "'s"));
    }
    o->local.sysfs = options.sysfs;
    o->allow = allow;
    out.push_back(*std::move(o));
  }
  return out;
}

double Uniform() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return std::uniform_real_distribution<double>(0, 1)(rng);
}

}  // namespace

Prober::Prober(const ProberOptions& options, const SnapshotStore* store,
               std::unique_ptr<probes::Canceller> cancel)
    : options_(options), store_(store), cancel_(std::move(cancel)) {}

absl::Status Prober::CheckOptions(const ProberOptions& options) {
  if (!options.listen.empty()) {
    std::string host;
    uint16_t port = 0;
    if (absl::Status s = ParseProbeListen(options.listen, &host, &port); !s.ok()) return s;
  }
  return PerftestServers(options).status();
}

absl::StatusOr<std::unique_ptr<Prober>> Prober::Start(const ProberOptions& options,
                                                      const SnapshotStore* store) {
  absl::StatusOr<std::unique_ptr<probes::Canceller>> cancel = probes::Canceller::Create();
  if (!cancel.ok()) return cancel.status();
  std::unique_ptr<Prober> p(new Prober(options, store, std::move(*cancel)));
  if (!options.listen.empty()) {
    probes::ServerOptions so;
    uint16_t port = 0;
    if (absl::Status s = ParseProbeListen(options.listen, &so.bind, &port); !s.ok()) return s;
    so.port = port;
    so.local.sysfs = options.sysfs;
    so.max_clients = std::max<uint32_t>(options.responder_clients, 1);
    so.locks = &p->locks_;
    so.secret_file = options.secret_file;
    so.rate_per_minute = options.rate_per_minute;
    if (!options.allow.empty()) {
      absl::StatusOr<probes::AllowList> allow = probes::AllowList::Parse(options.allow);
      if (!allow.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--probe-allow: ", allow.status().message()));
      }
      so.allow = *std::move(allow);
    }
    absl::StatusOr<std::unique_ptr<probes::ProbeServer>> server = probes::ProbeServer::Create(so);
    if (!server.ok()) {
      return absl::Status(
          server.status().code(),
          absl::StrCat("probe responder on ", options.listen, ": ", server.status().message()));
    }
    p->server_ = *std::move(server);
    const std::string host = so.bind.empty() ? "*"
                             : so.bind.find(':') != std::string::npos
                                 ? absl::StrCat("[", so.bind, "]")
                                 : so.bind;
    p->responder_address_ = absl::StrCat(host, ":", p->server_->port());
    Log(LogLevel::kInfo, "probe responder allows ", p->server_->allow().ToString(),
        options.allow.empty() ? " (this host's subnets; set --probe-allow to change)" : "",
        options.rate_per_minute == 0
            ? ", no rate limit"
            : absl::StrCat(", at most ", options.rate_per_minute, " tests a minute per peer"),
        options.secret_file.empty() ? "" : ", with the shared secret");
    Prober* self = p.get();
    p->server_thread_ = std::thread([self] {
      absl::Status s = self->server_->Serve([self](const probes::ServedTest& t) {
        ++self->served_;
        if (!t.status.ok()) ++self->served_failed_;
        Log(t.status.ok() ? LogLevel::kInfo : LogLevel::kWarning,
            "probe responder: ", Av(probes::TestName(t.params.test)), " for ", t.peer,
            t.device.empty() ? "" : absl::StrCat(" on ", t.device), ": ",
            t.status.ok() ? "done" : std::string(t.status.message()));
      });
      if (!s.ok()) Log(LogLevel::kError, "probe responder stopped: ", s.message());
    });
  }
  Prober* self = p.get();
  absl::StatusOr<std::vector<probes::PerftestServerOptions>> perftest = PerftestServers(options);
  if (!perftest.ok()) return perftest.status();
  for (probes::PerftestServerOptions& o : *perftest) {
    p->perftest_threads_.emplace_back(
        [self, o = std::move(o)]() mutable { self->ServePerftest(std::move(o)); });
  }
  p->scheduler_ = std::thread([self] { self->SchedulerLoop(); });
  return p;
}

void Prober::ServePerftest(probes::PerftestServerOptions o) {
  const std::string what = absl::StrCat("perftest responder (", Av(probes::TestName(o.params.test)),
                                        " on port ", o.port, ")");
  Log(LogLevel::kInfo, what, ": serving stock perftest clients from ",
      o.allow ? o.allow->ToString() : "this host's subnets");
  absl::Duration pause = absl::Seconds(1);
  probes::Fd listener;  // TCP: one for every client (rdma_cm listens per client).
  // The last try reached its client (the device opened): only then does a listener stay open
  // between clients. Until then each try opens the device before it listens, so a port whose
  // device cannot be opened is closed, never one that takes connections nobody serves.
  bool serving = false;
  ++perftest_down_;
  while (!cancel_->cancelled()) {
    if (!o.params.rdma_cm && serving && !listener.valid()) {
      absl::StatusOr<probes::Fd> l = probes::ListenTcp(o.bind, o.port);
      if (l.ok()) listener = *std::move(l);
    }
    o.listener = listener.valid() ? listener.get() : -1;
    std::optional<probes::DeviceLocks::Hold> hold;
    bool listened = false;
    o.admit = [&](const std::string& device) -> absl::Status {
      hold = locks_.Acquire(device, o.local.timeout);
      if (hold) return absl::OkStatus();
      return absl::UnavailableError(absl::StrCat(device, " stayed busy with other probes for ",
                                                 absl::FormatDuration(o.local.timeout)));
    };
    absl::StatusOr<probes::PerftestResult> r = probes::ServePerftestClient(o, cancel_.get(), [&] {
      listened = true;
      if (!serving) --perftest_down_;
      serving = true;
    });
    hold.reset();
    if (cancel_->cancelled()) break;
    ++perftest_served_;
    if (!r.ok()) ++perftest_failed_;
    if (r.ok()) {
      std::string figure = "done";
      if (r->bw) {
        figure = absl::StrFormat("%.2f %s average", r->bw->average, o.gbits ? "Gb/s" : "MB/s");
      } else if (r->lat) {
        figure = absl::StrFormat("%.2f usec typical", r->lat->typical);
      }
      Log(LogLevel::kInfo, what, ": ", r->peer, " (perftest ", r->peer_version, ") on ", r->device,
          ": ", figure);
    } else {
      Log(LogLevel::kWarning, what, ": ", r.status().message());
    }
    // A failure before listening (device gone, port taken) would come back at once: the port
    // closed, wait, longer each time, until it listens again.
    pause = listened ? absl::Seconds(1) : std::min(pause * 2, absl::Minutes(5));
    if (!listened) {
      listener.reset();
      if (serving) ++perftest_down_;
      serving = false;
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, absl::ToChronoNanoseconds(pause), [this] { return stopping_; });
    }
  }
}

Prober::~Prober() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  cancel_->Cancel();
  if (server_ != nullptr) server_->Stop();
  if (server_thread_.joinable()) server_thread_.join();
  for (std::thread& t : perftest_threads_) t.join();
  if (scheduler_.joinable()) scheduler_.join();
}

void Prober::SetSchedule(const v1::ProbeSchedule& schedule) {
  history_.SetCapacity(probes::HistorySize(schedule));
  {
    std::lock_guard<std::mutex> lock(mu_);
    schedule_ = schedule;
    ++schedule_version_;
  }
  cv_.notify_all();
}

void Prober::SchedulerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  uint64_t version = 0;
  while (!stopping_) {
    if (version != schedule_version_) {
      version = schedule_version_;
      // A new schedule starts within a second; spread so that a fleet of agents configured at
      // once does not open every round in the same instant.
      next_round_ = probes::ScheduleEnabled(schedule_)
                        ? absl::Now() + absl::Milliseconds(1000 * Uniform())
                        : absl::InfiniteFuture();
    }
    if (absl::Now() < next_round_) {
      if (next_round_ == absl::InfiniteFuture()) {
        cv_.wait(lock);
      } else {
        cv_.wait_until(lock, absl::ToChronoTime(next_round_));
      }
      continue;
    }
    const v1::ProbeSchedule schedule = schedule_;
    const absl::Time start = absl::Now();
    lock.unlock();
    Round(schedule);
    lock.lock();
    ++rounds_;
    if (version == schedule_version_) {
      next_round_ = std::max(absl::Now(), start + probes::NextRoundDelay(schedule, Uniform()));
    }
  }
}

std::vector<probes::Peer> Prober::ResolvePeers(const v1::ProbeSchedule& schedule) {
  std::vector<probes::Peer> out;
  const uint16_t port = probes::PeerPort(schedule);
  for (const std::string& text : schedule.peers()) {
    absl::StatusOr<probes::Peer> p = probes::ParsePeer(text, port);
    if (p.ok()) out.push_back(*p);  // Validated with the config already.
  }
  std::string error;
  if (!schedule.peer_dns().empty()) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    const int rc = getaddrinfo(schedule.peer_dns().c_str(), nullptr, &hints, &res);
    if (rc != 0) {
      error = absl::StrCat("cannot resolve ", schedule.peer_dns(), ": ", gai_strerror(rc));
      Log(LogLevel::kWarning, "probe schedule: ", error);
    } else {
      const std::set<std::string> self = LocalAddresses();
      std::set<std::string> seen;
      for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
        char buf[NI_MAXHOST];
        if (getnameinfo(ai->ai_addr, ai->ai_addrlen, buf, sizeof buf, nullptr, 0, NI_NUMERICHOST) !=
            0) {
          continue;
        }
        const std::string a = buf;
        if (self.count(a) > 0 || !seen.insert(a).second) continue;
        out.push_back({a, a, port});
      }
      freeaddrinfo(res);
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  peers_.clear();
  for (const probes::Peer& p : out) peers_.push_back(p.name);
  peers_error_ = error;
  return out;
}

namespace {

// A "perftest:" peer runs stock perftest servers (one test each, restarted by a loop between
// clients): its own protocol, no remote device, no secret (a stock server can prove none: the
// config naming it is the trust), and a moment's retry while the loop restarts the server.
void UsePerftestPeer(const probes::Peer& peer, probes::ProbeSpec* spec) {
  if (!peer.perftest) return;
  spec->perftest = true;
  spec->remote_device.clear();
  spec->secret_file.clear();
  spec->connect_retry = std::max(spec->connect_retry, absl::Seconds(2));
}

}  // namespace

void Prober::Round(const v1::ProbeSchedule& schedule) {
  const std::vector<probes::Peer> peers = ResolvePeers(schedule);
  const std::shared_ptr<const Snapshot> snap = store_->Current();
  if (peers.empty() || snap == nullptr) return;
  const Transport transport =
      snap->host->rdma_devices().empty() ? Transport::kTcp : Transport::kRdma;
  const std::vector<probes::TestKind> tests = probes::Tests(schedule);
  const std::vector<probes::ProbeSource> sources =
      probes::ProbeSources(*snap->host, snap->policy, schedule);
  // A worker per local device: one test at a time per device, devices side by side.
  std::vector<std::thread> workers;
  for (const probes::ProbeSource& source : sources) {
    workers.emplace_back([&, source] {
      std::vector<probes::Peer> order = peers;
      std::shuffle(order.begin(), order.end(), std::mt19937_64{std::random_device{}()});
      for (const probes::Peer& peer : order) {
        for (probes::TestKind test : tests) {
          if (cancel_->cancelled()) return;
          probes::ProbeSpec spec;
          spec.params = probes::ScheduledParams(schedule, test, transport);
          spec.host = peer.host;
          spec.port = peer.port;
          spec.local.device = source.device;
          spec.local.ib_port = static_cast<uint8_t>(source.port == 0 ? 1 : source.port);
          spec.local.sysfs = options_.sysfs;
          spec.local.timeout = probes::StepTimeout(schedule);
          if (transport == Transport::kRdma) {
            spec.remote_device = probes::RemoteDevice(schedule, source.device);
          }
          std::string host_memory_why;
          spec.local.gpu = probes::ScheduledGpu(*snap->host, snap->policy, schedule, source.device,
                                                test, transport, &host_memory_why);
          spec.cancel = cancel_.get();
          spec.secret_file = options_.secret_file;
          UsePerftestPeer(peer, &spec);
          v1::ProbeResult r;
          // The peer's device may be under another agent's test: try again a little later.
          for (int attempt = 0;; ++attempt) {
            r = Execute(spec, peer.name, v1::ProbeResult::SOURCE_SCHEDULE,
                        absl::Seconds(60) + spec.params.duration + spec.params.margin,
                        schedule.degraded_fraction());
            if (cancel_->cancelled()) return;  // The agent stops: no result to keep.
            // A rate limit refills over seconds, not the retry's wait.
            if (r.error_code() != "RESOURCE_EXHAUSTED" || attempt == 2 ||
                absl::StrContains(r.error(), probes::kRateLimitReason)) {
              break;
            }
            std::unique_lock<std::mutex> lock(mu_);
            if (cv_.wait_for(lock, std::chrono::milliseconds(500 + int(2000 * Uniform())),
                             [&] { return stopping_; })) {
              break;
            }
          }
          // Why GPU memory was not used; a failed test names the GPU it asked for.
          if (!host_memory_why.empty()) {
            r.set_memory(absl::StrCat("host memory: ", host_memory_why));
          } else if (r.memory().empty() && spec.local.gpu) {
            r.set_memory(gpumem::Describe(*spec.local.gpu));
          }
          if (!r.ok()) {
            Log(LogLevel::kWarning, "probe ", r.test(), " to ", peer.name,
                source.device.empty() ? "" : absl::StrCat(" from ", source.device), ": ",
                r.error());
          }
          history_.Add(std::move(r));
        }
      }
    });
  }
  for (std::thread& t : workers) t.join();
}

v1::ProbeResult Prober::Execute(probes::ProbeSpec spec, const std::string& peer_name,
                                v1::ProbeResult::Source source, absl::Duration wait,
                                double degraded_fraction) {
  const absl::Time start = absl::Now();
  const std::string key = spec.params.transport == Transport::kTcp ? "tcp" : spec.local.device;
  std::optional<probes::DeviceLocks::Hold> hold = locks_.Acquire(key, wait);
  // A test of this agent's own responder shares this hold rather than finding the device busy.
  if (hold) spec.hold = &*hold;
  absl::StatusOr<probes::ProbeResult> r = absl::ResourceExhaustedError(
      absl::StrCat("local ", key, " stayed under another test for ", absl::FormatDuration(wait)));
  // The one place the agent chooses between our protocol and stock perftest's ("perftest:" peers).
  if (hold) r = spec.perftest ? probes::RunPerftestProbe(spec) : probes::RunProbe(spec);
  hold.reset();
  v1::ProbeResult out =
      r.ok() ? probes::ResultProto(*r) : probes::FailedResultProto(spec.params, r.status());
  out.set_source(source);
  out.set_peer(peer_name);
  out.set_peer_port(spec.port);
  *out.mutable_started() =
      google::protobuf::util::TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(start));
  out.set_seconds(absl::ToDoubleSeconds(absl::Now() - start));
  if (!r.ok() && spec.params.transport == Transport::kRdma) {
    out.set_device(spec.local.device);
    out.set_port(spec.local.ib_port);
  }
  out.set_remote_device(spec.remote_device);
  ++(out.ok() ? runs_ok_ : runs_failed_);
  if (const std::shared_ptr<const Snapshot> snap = store_->Current(); snap != nullptr) {
    probes::RateShare(*snap->host, degraded_fraction, &out);
  }
  return out;
}

absl::StatusOr<v1::ProbeResult> Prober::Run(const v1::RunProbeRequest& req) {
  v1::ProbeSchedule schedule;
  {
    std::lock_guard<std::mutex> lock(mu_);
    schedule = schedule_;
  }
  if (req.peer().empty()) return absl::InvalidArgumentError("peer is required");
  absl::StatusOr<probes::Peer> peer = probes::ParsePeer(req.peer(), probes::kDefaultPort);
  if (!peer.ok()) return peer.status();
  const std::string test_name = req.test().empty() ? "write_bw" : req.test();
  std::optional<probes::TestKind> test = probes::ParseTestName(test_name);
  if (!test) {
    return absl::InvalidArgumentError(
        absl::StrCat("test \"", test_name, "\": one of ", probes::TestNamesText()));
  }
  const std::shared_ptr<const Snapshot> snap = store_->Current();
  if (snap == nullptr) return absl::UnavailableError("no inventory yet");
  // fabric-probe's rule (ChooseTransport), on what verbs can open rather than the inventory:
  // a device in sysfs that verbs cannot open (no /dev/infiniband in a container) is no device.
  absl::StatusOr<probes::TransportChoice> choice = probes::ChooseTransport(
      req.transport(), !req.device().empty(), req.rdma_cm(), probes::HaveRdmaDevice());
  if (!choice.ok()) return choice.status();
  const Transport transport = choice->transport;
  if (req.retry_seconds() > kMaxRetrySeconds) {
    return absl::InvalidArgumentError(absl::StrCat("retry_seconds: at most ", kMaxRetrySeconds));
  }

  probes::ProbeSpec spec;
  probes::ProbeParams& p = spec.params;
  p = probes::DefaultParams(*test);
  p.transport = transport;
  p.rdma_cm = req.rdma_cm();
  if (req.size() > 0) p.size = req.size();
  if (req.iterations() > 0 && req.duration_seconds() > 0) {
    return absl::InvalidArgumentError("iterations and duration_seconds exclude each other");
  }
  if (req.iterations() > 0) p.iterations = req.iterations();
  if (req.duration_seconds() > 0) {
    p.duration = absl::Seconds(req.duration_seconds());
    p.iterations = 0;
  }
  if (req.qps() > 0) p.num_qps = req.qps();
  if (p.inline_size > p.size) p.inline_size = static_cast<uint32_t>(p.size);
  if (absl::Status s = probes::ValidateParams(p); !s.ok()) return s;

  spec.host = peer->host;
  spec.port = peer->port;
  spec.secret_file = options_.secret_file;
  spec.local.sysfs = options_.sysfs;
  spec.local.timeout =
      req.timeout_seconds() == 0 ? absl::Seconds(10) : absl::Seconds(req.timeout_seconds());
  if (spec.local.timeout > kMaxStepTimeout) {
    return absl::InvalidArgumentError("timeout_seconds: at most 300");
  }
  if (req.ib_port() > 254) return absl::InvalidArgumentError("ib_port: 1..254");
  if (req.has_gid_index()) {
    if (req.gid_index() > 65535) return absl::InvalidArgumentError("gid_index: 0..65535");
    spec.local.gid_index = static_cast<int>(req.gid_index());
  }
  for (const std::string* d : {&req.device(), &req.remote_device()}) {
    if (!d->empty() && !probes::wire::IsValidDeviceName(*d)) {
      return absl::InvalidArgumentError(absl::StrCat("\"", *d, "\" is not an RDMA device name"));
    }
  }
  if (transport == Transport::kRdma) {
    spec.local.device = req.device();
    uint32_t port = req.ib_port();
    if (spec.local.device.empty()) {
      // The schedule's first source, else the first device: a test always names its device,
      // so that it takes the right lock.
      std::vector<probes::ProbeSource> sources =
          probes::ProbeSources(*snap->host, snap->policy, schedule);
      if (!sources.empty() && !sources.front().device.empty()) {
        spec.local.device = sources.front().device;
        if (port == 0) port = sources.front().port;
      } else if (!snap->host->rdma_devices().empty()) {
        spec.local.device = snap->host->rdma_devices(0).name();
      }
    }
    spec.local.ib_port = static_cast<uint8_t>(port == 0 ? 1 : port);
    spec.remote_device = req.remote_device();
  }
  spec.cancel = cancel_.get();
  spec.connect_retry = absl::Seconds(req.retry_seconds());
  UsePerftestPeer(*peer, &spec);
  v1::ProbeResult r =
      Execute(spec, req.peer(), v1::ProbeResult::SOURCE_ON_DEMAND,
              absl::Seconds(60) + p.duration + p.margin, schedule.degraded_fraction());
  r.set_transport_note(choice->fallback);
  return history_.Add(std::move(r));
}

v1::ListProbeResultsResponse Prober::List(const v1::ListProbeResultsRequest& req) const {
  v1::ListProbeResultsResponse out;
  for (v1::ProbeResult& r :
       history_.List(req.peer(), req.device(), req.test(), req.limit(), req.port())) {
    *out.add_results() = std::move(r);
  }
  out.set_responder(responder_address_);
  out.set_responder_served(served_.load());
  out.set_responder_failed(served_failed_.load());
  std::lock_guard<std::mutex> lock(mu_);
  out.set_schedule_enabled(probes::ScheduleEnabled(schedule_));
  for (const std::string& p : peers_) out.add_peers(p);
  out.set_peers_error(peers_error_);
  if (next_round_ != absl::InfiniteFuture()) {
    *out.mutable_next_round() =
        google::protobuf::util::TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(next_round_));
  }
  out.set_rounds(rounds_);
  return out;
}

v1::Health CurrentHealth(const Snapshot& snap, const Prober* prober) {
  v1::Health health = snap.health;
  if (prober != nullptr) {
    for (v1::Finding& f : prober->Findings()) AddFinding(&health, std::move(f));
  }
  return health;
}

Prober::Stats Prober::stats() const {
  return {runs_ok_.load(),
          runs_failed_.load(),
          served_.load() - served_failed_.load(),
          served_failed_.load(),
          perftest_served_.load() - perftest_failed_.load(),
          perftest_failed_.load(),
          static_cast<uint64_t>(std::max<int64_t>(perftest_down_.load(), 0))};
}

std::vector<v1::ProbeResult> Prober::Latest() const {
  std::vector<v1::ProbeResult> out;
  std::set<std::tuple<std::string, uint32_t, std::string, std::string, std::string>> seen;
  for (v1::ProbeResult& r : history_.List()) {
    if (seen.insert({r.device(), r.port(), r.peer(), r.test(), r.transport()}).second) {
      out.push_back(std::move(r));
    }
  }
  return out;
}

std::vector<v1::Finding> Prober::Findings() const {
  return probes::DegradedFindings(history_.List());
}

}  // namespace fabric
