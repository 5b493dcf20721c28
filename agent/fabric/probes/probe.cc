#include "agent/fabric/probes/probe.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <atomic>
#include <limits>
#include <list>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/common/log.h"
#include "agent/common/status.h"
#include "agent/common/strings.h"
#include "agent/fabric/probes/auth.h"
#include "agent/fabric/probes/clock.h"
#include "agent/fabric/probes/engine.h"
#include "agent/fabric/probes/stats.h"

namespace fabric::probes {
namespace {

// The control connection may sit idle for a whole bandwidth test; keep-alives notice a peer
// host that vanished without a FIN within about 11 s.
void KeepAlive(int fd) {
  const int on = 1, idle = 5, intvl = 2, cnt = 3;
  (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
}

// Workers that only refuse (busy) at once, beyond those serving tests.
constexpr size_t kMaxRefusing = 16;

Deadline Never() { return Deadline::At(std::numeric_limits<int64_t>::max()); }

// Appends what the peer said about a failure, when it said something already.
absl::Status WithPeerReason(Channel& ch, absl::Status s) {
  if (!ch.Readable()) return s;
  absl::StatusOr<wire::Message> m =
      ch.Recv("the peer's reason", Deadline::In(absl::Milliseconds(200)));
  if (!m.ok()) return s;
  std::string why;
  if (const auto* r = std::get_if<wire::Reject>(&*m)) why = r->reason;
  if (const auto* d = std::get_if<wire::Done>(&*m); d != nullptr && !d->ok) why = d->message;
  if (why.empty()) return s;
  return absl::Status(s.code(), absl::StrCat(s.message(), " (peer: ", why, ")"));
}

// Tells the peer why this side stops, when the connection still works.
void SendFailure(Channel& ch, const absl::Status& s) {
  (void)ch.Send(wire::Done{false, 0, std::string(s.message())});
}

// Refuses a client after reading its hello (bounded by the step timeout), so that it sees the
// reason rather than a reset.
absl::Status RefuseAfterHello(Channel& ch, absl::Status s, ServedTest* served) {
  absl::StatusOr<wire::Message> m = ch.Recv("the client's hello");
  // What it asked for, for the log.
  if (m.ok()) {
    if (const auto* h = std::get_if<wire::Hello>(&*m)) served->params = h->params;
  }
  (void)ch.Send(wire::Reject{std::string(s.message())});
  return s;
}

absl::Status Refuse(Channel& ch, absl::Status s) {
  (void)ch.Send(wire::Reject{std::string(s.message())});
  return s;
}

// The client's half of the secret exchange (auth.h): checks the server's proof, sends its own.
absl::Status ProveSecret(Channel& ch, const std::string& secret, const wire::Hello& hello) {
  absl::StatusOr<wire::Message> m = ch.Recv("the server's challenge");
  if (!m.ok()) return m.status();
  if (const auto* r = std::get_if<wire::Reject>(&*m)) {
    return absl::FailedPreconditionError(absl::StrCat("peer refused: ", r->reason));
  }
  const auto* c = std::get_if<wire::Challenge>(&*m);
  if (c == nullptr) {
    return absl::PermissionDeniedError(absl::StrCat(
        "the responder answered with ", Av(wire::TypeName(wire::TypeOf(*m))),
        " instead of proving the shared secret (it has none, or is not the responder meant)"));
  }
  if (!MacEqual(c->mac, ServerMac(secret, c->nonce, hello))) {
    return absl::PermissionDeniedError(
        "the responder did not prove the shared secret (it holds a different one)");
  }
  return ch.Send(wire::Proof{ClientMac(secret, c->nonce, hello)});
}

absl::Status WithTeardown(absl::Status s, const absl::Status& released) {
  if (released.ok()) return s;
  return absl::Status(s.code(),
                      absl::StrCat(s.message(), "; releasing resources: ", released.message()));
}

}  // namespace

absl::Status FillResult(const ProbeParams& p, const Measurement& m, ProbeResult* r) {
  r->iterations = m.messages;
  if (IsLatency(p.test)) {
    absl::StatusOr<LatencyResult> lat =
        ComputeLatency(SamplesFromPosts(m.posts, VerbOf(p.test) == Verb::kRead ? 1 : 2));
    if (!lat.ok()) return lat.status();
    r->lat = *lat;
    return absl::OkStatus();
  }
  // Over TCP a "completion" is only a copy into the socket buffer: no peak.
  static const std::vector<CompletionMark> kNone;
  absl::StatusOr<BandwidthResult> bw = ComputeBandwidth(
      p.size, m.messages, m.first_ns, m.last_ns, p.transport == Transport::kTcp ? kNone : m.marks);
  if (!bw.ok()) return bw.status();
  r->bw = *bw;
  return absl::OkStatus();
}

absl::StatusOr<ProbeResult> RunProbe(const ProbeSpec& spec) {
  // Which protocol is chosen above this library (agent/fabric/perftest/peer.h has the other).
  if (spec.perftest) {
    return absl::InvalidArgumentError(
        "a stock perftest peer is RunPerftestProbe's, not RunProbe's");
  }
  const ProbeParams& p = spec.params;
  FABRIC_RETURN_IF_ERROR(ValidateParams(p));
  if (spec.host.empty()) return absl::InvalidArgumentError("no server host given");
  FABRIC_RETURN_IF_ERROR(CheckGpuMemory(p, spec.local));
  wire::Hello hello{p, spec.remote_device};
  std::string secret;
  if (!spec.secret_file.empty()) {
    absl::StatusOr<std::string> s = LoadSecret(spec.secret_file);
    if (!s.ok()) return s.status();
    absl::StatusOr<wire::Nonce> nonce = RandomNonce();
    if (!nonce.ok()) return nonce.status();
    secret = *std::move(s);
    hello.auth = true;
    hello.nonce = *nonce;
  }
  // Open the device first: a missing one fails here, before bothering the server.
  std::unique_ptr<RdmaTest> rdma;
  if (p.transport == Transport::kRdma) {
    absl::StatusOr<std::unique_ptr<RdmaTest>> t =
        RdmaTest::Prepare(RdmaTest::Role::kClient, p, spec.local, "", spec.cancel);
    if (!t.ok()) return t.status();
    rdma = std::move(*t);
  }
  absl::StatusOr<Fd> fd =
      ConnectTcp(spec.host, spec.port, Deadline::In(spec.local.timeout), spec.cancel,
                 spec.connect_retry > absl::ZeroDuration() ? Deadline::In(spec.connect_retry)
                                                           : Deadline::At(0));
  if (!fd.ok()) return fd.status();
  if (spec.hold != nullptr) spec.hold->Admit(LocalEndpoint(fd->get()));
  KeepAlive(fd->get());
  Channel ch(std::move(*fd), spec.local.timeout, spec.cancel);
  ProbeResult r;
  r.params = p;
  r.peer = PeerAddress(ch.fd());
  r.clock = kClockName;

  auto fail = [&](absl::Status s) -> absl::Status {
    s = WithPeerReason(ch, std::move(s));
    SendFailure(ch, s);
    return rdma ? WithTeardown(s, rdma->Release()) : s;
  };

  // The responder refuses before or after the secret exchange; busy and its rate limit are
  // worth a later try.
  auto refused = [&](absl::Status s) -> absl::Status {
    s = fail(std::move(s));
    if (absl::IsFailedPrecondition(s) && (absl::StrContains(s.message(), kBusyReason) ||
                                          absl::StrContains(s.message(), kRateLimitReason))) {
      return absl::ResourceExhaustedError(s.message());
    }
    return s;
  };
  FABRIC_RETURN_IF_ERROR(ch.Send(hello));
  if (hello.auth) {
    if (absl::Status s = ProveSecret(ch, secret, hello); !s.ok()) return refused(s);
  }
  absl::StatusOr<wire::Accept> accept = ch.RecvAs<wire::Accept>("the server's answer");
  if (!accept.ok()) return refused(accept.status());
  absl::StatusOr<Measurement> m;
  if (rdma) {
    if (absl::Status s = rdma->Connect(ch, r.peer, accept->cm_port); !s.ok()) return fail(s);
    r.device = rdma->device();
    r.ib_port = rdma->port();
    r.gid_index = rdma->gid_index();
    r.memory = rdma->memory();
    m = rdma->RunClient();
  } else {
    m = RunTcpClient(ch, p);
  }
  if (!m.ok()) return fail(m.status());
  if (absl::Status s = ch.Send(wire::Done{true, m->messages, ""}); !s.ok()) return fail(s);
  absl::StatusOr<wire::Done> theirs = ch.RecvAs<wire::Done>("the server's report");
  if (!theirs.ok()) return fail(theirs.status());
  if (rdma) {
    if (absl::Status s = rdma->Release(); !s.ok()) r.teardown_error = std::string(s.message());
  }
  FABRIC_RETURN_IF_ERROR(FillResult(p, *m, &r));
  return r;
}

ProbeServer::ProbeServer(const ServerOptions& options, AllowList allow, Fd listener,
                         std::unique_ptr<Canceller> cancel)
    : options_(options),
      allow_(std::move(allow)),
      rate_(options.rate_per_minute),
      listener_(std::move(listener)),
      cancel_(std::move(cancel)) {
  port_ = LocalPort(listener_.get());
}

ProbeServer::~ProbeServer() = default;

absl::StatusOr<std::unique_ptr<ProbeServer>> ProbeServer::Create(const ServerOptions& options) {
  absl::StatusOr<std::unique_ptr<Canceller>> cancel = Canceller::Create();
  if (!cancel.ok()) return cancel.status();
  if (!options.secret_file.empty()) {
    if (absl::StatusOr<std::string> s = LoadSecret(options.secret_file); !s.ok()) return s.status();
  }
  absl::StatusOr<AllowList> allow =
      options.allow.has_value() ? *options.allow : AllowList::HostSubnets();
  if (!allow.ok()) return allow.status();
  absl::StatusOr<Fd> listener = ListenTcp(options.bind, options.port);
  if (!listener.ok()) return listener.status();
  return std::unique_ptr<ProbeServer>(
      new ProbeServer(options, *std::move(allow), std::move(*listener), std::move(*cancel)));
}

void ProbeServer::Stop() { cancel_->Cancel(); }

absl::StatusOr<ServedTest> ProbeServer::ServeOne() {
  absl::StatusOr<Fd> fd = AcceptTcp(listener_.get(), Never(), cancel_.get(), &acceptor_);
  if (!fd.ok()) return fd.status();
  ServedTest served;
  served.status = ServeClient(std::move(*fd), &served);
  if (cancel_->cancelled()) return absl::CancelledError("stopped");
  return served;
}

absl::Status ProbeServer::Serve(const std::function<void(const ServedTest&)>& on_served) {
  if (options_.max_clients > 1) return ServeConcurrently(on_served);
  for (;;) {
    absl::StatusOr<ServedTest> s = ServeOne();
    if (!s.ok()) return absl::IsCancelled(s.status()) ? absl::OkStatus() : s.status();
    if (on_served) on_served(*s);
  }
}

absl::Status ProbeServer::ServeConcurrently(
    const std::function<void(const ServedTest&)>& on_served) {
  struct Worker {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::list<Worker> workers;
  std::atomic<uint32_t> serving{0};
  auto reap = [&](bool all) {
    for (auto it = workers.begin(); it != workers.end();) {
      if (!all && !it->done->load()) {
        ++it;
        continue;
      }
      it->thread.join();
      it = workers.erase(it);
    }
  };
  absl::Status status;
  for (;;) {
    absl::StatusOr<Fd> fd = AcceptTcp(listener_.get(), Never(), cancel_.get(), &acceptor_);
    reap(false);
    if (!fd.ok()) {
      if (!cancel_->cancelled()) status = fd.status();
      break;
    }
    // A refusal's worker lives until the client's hello (bounded by the step timeout); past
    // kMaxRefusing of them a flood is dropped outright rather than given a thread each.
    if (workers.size() >= options_.max_clients + kMaxRefusing) continue;
    const bool over = serving.load() >= options_.max_clients;
    if (!over) ++serving;
    auto done = std::make_shared<std::atomic<bool>>(false);
    auto conn = std::make_shared<Fd>(std::move(*fd));
    workers.push_back({std::thread([this, conn, over, done, &serving, &on_served] {
                         ServedTest served;
                         if (over) {
                           Channel ch(std::move(*conn), options_.local.timeout, cancel_.get());
                           served.peer = PeerAddress(ch.fd());
                           served.status = CheckPeer(served.peer, false);
                           if (served.status.ok()) {
                             served.status = absl::ResourceExhaustedError(
                                 absl::StrCat(kBusyReason, options_.max_clients,
                                              " probes are running here; try again later"));
                           }
                           served.status = RefuseAfterHello(ch, served.status, &served);
                         } else {
                           served.status = ServeClient(std::move(*conn), &served);
                           --serving;
                         }
                         if (on_served && !cancel_->cancelled()) on_served(served);
                         done->store(true);
                       }),
                       done});
  }
  cancel_->Cancel();  // Workers still running end now.
  reap(true);
  return status;
}

absl::Status ProbeServer::ServeClient(Fd fd, ServedTest* served) {
  KeepAlive(fd.get());
  Endpoint local = options_.local;
  Channel ch(std::move(fd), local.timeout, cancel_.get());
  served->peer = PeerAddress(ch.fd());
  // Who the peer is decides before anything it says.
  if (absl::Status s = CheckPeer(served->peer, true); !s.ok()) {
    return RefuseAfterHello(ch, s, served);
  }
  absl::StatusOr<wire::Hello> hello = ch.RecvAs<wire::Hello>("the client's hello");
  if (!hello.ok()) {
    if (absl::IsInvalidArgument(hello.status())) {
      (void)ch.Send(wire::Reject{std::string(hello.status().message())});
    }
    return hello.status();
  }
  served->params = hello->params;
  FABRIC_RETURN_IF_ERROR(Authenticate(ch, *hello));
  const ProbeParams& p = hello->params;
  served->params = p;
  ProbeParams expect = options_.expect;
  expect.test = options_.test.value_or(p.test);
  if (absl::Status s = CheckParamsMatch(expect, options_.explicit_fields, p); !s.ok()) {
    (void)ch.Send(wire::Reject{std::string(s.message())});
    return s;
  }
  if (!hello->device.empty() && p.transport == Transport::kRdma) {
    if (!local.device.empty() && local.device != hello->device) {
      absl::Status s = absl::FailedPreconditionError(absl::StrCat(
          "this responder serves ", local.device, ", not ", hello->device, " as asked"));
      (void)ch.Send(wire::Reject{std::string(s.message())});
      return s;
    }
    local.device = hello->device;
  }
  std::optional<DeviceLocks::Hold> hold;
  if (options_.locks != nullptr) {
    const std::string key = p.transport == Transport::kTcp ? "tcp" : local.device;
    hold = options_.locks->TryAcquire(key, PeerEndpoint(ch.fd()));
    if (!hold) {
      absl::Status s =
          absl::ResourceExhaustedError(absl::StrCat(kBusyReason, key.empty() ? "the device" : key,
                                                    " is under another test; try again later"));
      (void)ch.Send(wire::Reject{std::string(s.message())});
      return s;
    }
  }
  std::unique_ptr<RdmaTest> rdma;
  if (p.transport == Transport::kRdma) {
    absl::StatusOr<std::unique_ptr<RdmaTest>> t =
        RdmaTest::Prepare(RdmaTest::Role::kServer, p, local, LocalAddress(ch.fd()), cancel_.get());
    if (!t.ok()) {
      (void)ch.Send(wire::Reject{std::string(t.status().message())});
      return t.status();
    }
    rdma = std::move(*t);
  }
  auto fail = [&](absl::Status s) -> absl::Status {
    s = WithPeerReason(ch, std::move(s));
    SendFailure(ch, s);
    return rdma ? WithTeardown(s, rdma->Release()) : s;
  };
  FABRIC_RETURN_IF_ERROR(ch.Send(wire::Accept{rdma ? rdma->cm_port() : uint16_t{0}}));
  absl::Status run;
  if (rdma) {
    run = rdma->Connect(ch, served->peer, 0);
    served->device = rdma->device();
    if (run.ok()) run = rdma->RunServer(ch);
  } else {
    run = RunTcpServer(ch, p);
  }
  if (!run.ok()) return fail(run);
  // Passive tests leave the server waiting for as long as the client runs: the keep-alives
  // and the client's exit (EOF) bound that wait instead of a deadline.
  Deadline until = Never();
  if (p.duration_mode()) until = Deadline::In(p.margin + p.duration + 2 * local.timeout);
  absl::StatusOr<wire::Done> done = ch.RecvAs<wire::Done>("the client's report", until);
  if (!done.ok()) return fail(done.status());
  if (absl::Status s = ch.Send(wire::Done{true, done->count, ""}); !s.ok()) return fail(s);
  if (rdma) {
    if (absl::Status s = rdma->Release(); !s.ok()) {
      Log(LogLevel::kWarning, "releasing RDMA resources: ", s.message());
    }
  }
  return absl::OkStatus();
}

AllowList ProbeServer::allow() const {
  std::lock_guard<std::mutex> lock(allow_mu_);
  return allow_;
}

bool ProbeServer::Allowed(const std::string& peer) {
  std::lock_guard<std::mutex> lock(allow_mu_);
  if (allow_.Allows(peer)) return true;
  // This host's subnets change (addresses configured after start): look again, bounded so a
  // stranger's flood costs at most one getifaddrs a second.
  if (options_.allow.has_value() || absl::Now() - allow_read_ < absl::Seconds(1)) return false;
  allow_read_ = absl::Now();
  absl::StatusOr<AllowList> now = AllowList::HostSubnets();
  if (!now.ok()) return false;
  if (now->ToString() != allow_.ToString()) {
    Log(LogLevel::kInfo, "probe responder: this host's subnets are now ", now->ToString());
  }
  allow_ = *std::move(now);
  return allow_.Allows(peer);
}

absl::Status ProbeServer::CheckPeer(const std::string& peer, bool take) {
  if (!Allowed(peer)) {
    return absl::PermissionDeniedError(
        absl::StrCat("this responder does not serve ", peer, " (not in its allow-list)"));
  }
  if (take && !rate_.Take(peer, absl::Now())) {
    return absl::ResourceExhaustedError(absl::StrCat(kRateLimitReason, "at most ",
                                                     rate_.per_minute(), " tests a minute from ",
                                                     peer, "; try again later"));
  }
  return absl::OkStatus();
}

absl::Status ProbeServer::Authenticate(Channel& ch, const wire::Hello& hello) {
  if (options_.secret_file.empty()) {
    if (!hello.auth) return absl::OkStatus();
    return Refuse(ch, absl::FailedPreconditionError(
                          "this responder has no shared secret but the client has one"));
  }
  absl::StatusOr<std::string> secret = LoadSecret(options_.secret_file);
  if (!secret.ok()) {
    // The path is for this side's log only.
    (void)ch.Send(wire::Reject{"the responder cannot read its shared secret"});
    return secret.status();
  }
  if (!hello.auth) {
    return Refuse(
        ch, absl::PermissionDeniedError("this responder requires the shared secret (--secret-file, "
                                        "--probe-secret-file)"));
  }
  absl::StatusOr<wire::Nonce> nonce = RandomNonce();
  if (!nonce.ok()) return Refuse(ch, nonce.status());
  FABRIC_RETURN_IF_ERROR(ch.Send(wire::Challenge{*nonce, ServerMac(*secret, *nonce, hello)}));
  absl::StatusOr<wire::Proof> proof = ch.RecvAs<wire::Proof>("the client's proof");
  if (!proof.ok()) return proof.status();
  if (!MacEqual(proof->mac, ClientMac(*secret, *nonce, hello))) {
    return Refuse(ch, absl::PermissionDeniedError(
                          "authentication failed: the client does not know this responder's "
                          "shared secret"));
  }
  return absl::OkStatus();
}

}  // namespace fabric::probes
