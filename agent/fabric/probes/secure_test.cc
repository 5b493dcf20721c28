// The responder's guards over the TCP transport on 127.0.0.1: the allow-list, the shared secret
// (both directions, missing on either side, a truncated and a replayed hello), the per-peer rate
// limit and a client that connects and says nothing. In one process through the library, with
// hand-driven clients for what a real client would never send, and as real fabric-probe
// processes for the exit codes.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <mutex>
#include <thread>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "agent/fabric/probe_cli/cli.h"
#include "agent/fabric/probes/auth.h"
#include "agent/fabric/probes/probe.h"
#include "tests/testing/netns.h"
#include "tests/testing/subprocess.h"

namespace fabric::probes {
namespace {

using fabric::testing::Subprocess;

ProbeSpec TcpSpec(uint16_t port) {
  ProbeSpec spec;
  spec.params = DefaultParams(TestKind::kWriteLat);
  spec.params.transport = Transport::kTcp;
  spec.params.iterations = 100;
  spec.host = "127.0.0.1";
  spec.port = port;
  spec.local.timeout = absl::Seconds(5);
  return spec;
}

ServerOptions Loopback() {
  ServerOptions so;
  so.bind = "127.0.0.1";
  so.port = 0;
  so.local.timeout = absl::Seconds(5);
  return so;
}

// A server answering `n` clients one after another on a thread; their outcomes in order.
class Serving {
 public:
  Serving(const ServerOptions& so, int n) {
    absl::StatusOr<std::unique_ptr<ProbeServer>> s = ProbeServer::Create(so);
    if (!s.ok()) {
      ADD_FAILURE() << s.status();
      return;
    }
    server_ = *std::move(s);
    thread_ = std::thread([this, n] {
      for (int i = 0; i < n; ++i) {
        absl::StatusOr<ServedTest> t = server_->ServeOne();
        if (!t.ok()) return;
        served_.push_back(t->status);
      }
    });
  }
  ~Serving() { Finish(); }
  uint16_t port() const { return server_ ? server_->port() : 0; }
  ProbeServer* server() { return server_.get(); }
  // Joins after the clients it expects (the test bounds each by its timeout).
  const std::vector<absl::Status>& Finish() {
    if (thread_.joinable()) thread_.join();
    return served_;
  }

 private:
  std::unique_ptr<ProbeServer> server_;
  std::thread thread_;
  std::vector<absl::Status> served_;
};

class Secure : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/probe_secure_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    secret_ = Write("secret", "correct horse battery staple\n");
    other_ = Write("other", "another secret\n");
  }
  void TearDown() override { (void)std::system(("rm -rf " + dir_).c_str()); }
  std::string Write(const std::string& name, const std::string& content) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << content;
    return path;
  }
  // A hand-driven client: connected, framed, bounded by 5 s a step.
  static std::unique_ptr<Channel> Connect(uint16_t port) {
    absl::StatusOr<Fd> fd = ConnectTcp("127.0.0.1", port, Deadline::In(absl::Seconds(5)), nullptr);
    if (!fd.ok()) {
      ADD_FAILURE() << fd.status();
      return nullptr;
    }
    return std::make_unique<Channel>(std::move(*fd), absl::Seconds(5), nullptr);
  }
  static wire::Hello AuthHello(uint16_t port) {
    wire::Hello h{TcpSpec(port).params, ""};
    h.auth = true;
    h.nonce = *RandomNonce();
    return h;
  }

  std::string dir_, secret_, other_;
};

TEST_F(Secure, DefaultAllowsThisHostsSubnetsAndRuns) {
  Serving s(Loopback(), 1);
  ASSERT_NE(s.port(), 0);
  EXPECT_TRUE(s.server()->allow().Allows("127.0.0.1")) << s.server()->allow().ToString();
  absl::StatusOr<ProbeResult> r = RunProbe(TcpSpec(s.port()));
  EXPECT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(s.Finish().size(), 1u);
  EXPECT_TRUE(s.Finish()[0].ok()) << s.Finish()[0];
}

TEST_F(Secure, PeerOutsideTheAllowListIsRefusedWithTheReason) {
  ServerOptions so = Loopback();
  so.allow = *AllowList::Parse("10.0.0.0/8,fd00::/8");
  DeviceLocks locks;
  so.locks = &locks;
  Serving s(so, 1);
  absl::StatusOr<ProbeResult> r = RunProbe(TcpSpec(s.port()));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(r.status())) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(),
                                "this responder does not serve 127.0.0.1 (not in its allow-list)"))
      << r.status();
  ASSERT_EQ(s.Finish().size(), 1u);
  EXPECT_TRUE(absl::IsPermissionDenied(s.Finish()[0])) << s.Finish()[0];
}

TEST_F(Secure, MatchingSecretRuns) {
  ServerOptions so = Loopback();
  so.secret_file = secret_;
  Serving s(so, 1);
  ProbeSpec spec = TcpSpec(s.port());
  spec.secret_file = Write("copy", "correct horse battery staple");  // no newline: same secret
  absl::StatusOr<ProbeResult> r = RunProbe(spec);
  EXPECT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(s.Finish().size(), 1u);
  EXPECT_TRUE(s.Finish()[0].ok()) << s.Finish()[0];
}

// Different secrets: the responder proves itself first, so the client finds out and says so;
// the responder records the client's failure.
TEST_F(Secure, DifferentSecretsFailOnBothSides) {
  ServerOptions so = Loopback();
  so.secret_file = secret_;
  Serving s(so, 1);
  ProbeSpec spec = TcpSpec(s.port());
  spec.secret_file = other_;
  absl::StatusOr<ProbeResult> r = RunProbe(spec);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsPermissionDenied(r.status())) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "did not prove the shared secret"))
      << r.status();
  ASSERT_EQ(s.Finish().size(), 1u);
  EXPECT_FALSE(s.Finish()[0].ok());
  EXPECT_TRUE(absl::StrContains(s.Finish()[0].message(), "did not prove the shared secret"))
      << s.Finish()[0];
}

// A client that goes on with a wrong proof (a real one stops at the responder's proof): the
// responder refuses it with the reason.
TEST_F(Secure, ClientWithAWrongProofIsRefused) {
  ServerOptions so = Loopback();
  so.secret_file = secret_;
  Serving s(so, 1);
  std::unique_ptr<Channel> ch = Connect(s.port());
  ASSERT_NE(ch, nullptr);
  const wire::Hello hello = AuthHello(s.port());
  ASSERT_TRUE(ch->Send(hello).ok());
  absl::StatusOr<wire::Challenge> c = ch->RecvAs<wire::Challenge>("challenge");
  ASSERT_TRUE(c.ok()) << c.status();
  // The responder's proof is right for the right secret only.
  EXPECT_TRUE(MacEqual(c->mac, ServerMac("correct horse battery staple", c->nonce, hello)));
  EXPECT_FALSE(MacEqual(c->mac, ServerMac("another secret", c->nonce, hello)));
  ASSERT_TRUE(ch->Send(wire::Proof{ClientMac("another secret", c->nonce, hello)}).ok());
  absl::StatusOr<wire::Accept> a = ch->RecvAs<wire::Accept>("answer");
  ASSERT_FALSE(a.ok());
  EXPECT_TRUE(absl::StrContains(a.status().message(), "peer refused: authentication failed"))
      << a.status();
  ASSERT_EQ(s.Finish().size(), 1u);
  EXPECT_TRUE(absl::IsPermissionDenied(s.Finish()[0])) << s.Finish()[0];
}

TEST_F(Secure, SecretMissingOnEitherSideIsRefused) {
  {
    ServerOptions so = Loopback();
    so.secret_file = secret_;
    Serving s(so, 1);
    absl::StatusOr<ProbeResult> r = RunProbe(TcpSpec(s.port()));
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(absl::IsFailedPrecondition(r.status())) << r.status();
    EXPECT_TRUE(absl::StrContains(r.status().message(), "requires the shared secret"))
        << r.status();
    ASSERT_EQ(s.Finish().size(), 1u);
    EXPECT_TRUE(absl::IsPermissionDenied(s.Finish()[0])) << s.Finish()[0];
  }
  {
    Serving s(Loopback(), 1);
    ProbeSpec spec = TcpSpec(s.port());
    spec.secret_file = secret_;
    absl::StatusOr<ProbeResult> r = RunProbe(spec);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(absl::StrContains(r.status().message(), "has no shared secret")) << r.status();
    ASSERT_EQ(s.Finish().size(), 1u);
    EXPECT_FALSE(s.Finish()[0].ok());
  }
  // A missing file is an error before anything is sent.
  ProbeSpec spec = TcpSpec(1);
  spec.secret_file = dir_ + "/missing";
  absl::StatusOr<ProbeResult> r = RunProbe(spec);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.status().message(), "missing")) << r.status();
  ServerOptions so = Loopback();
  so.secret_file = Write("empty", "\n");
  EXPECT_FALSE(ProbeServer::Create(so).ok());
}

TEST_F(Secure, TruncatedHelloIsRefused) {
  ServerOptions so = Loopback();
  so.secret_file = secret_;
  Serving s(so, 2);
  // The auth flag without the nonce, in a frame of consistent length.
  {
    std::unique_ptr<Channel> ch = Connect(s.port());
    ASSERT_NE(ch, nullptr);
    std::vector<uint8_t> f = wire::Encode(wire::Hello{TcpSpec(s.port()).params, ""});
    f[wire::kHeaderSize + 2] |= 2;
    ASSERT_TRUE(
        WriteAll(ch->fd(), f.data(), f.size(), Deadline::In(absl::Seconds(5)), nullptr, "hello")
            .ok());
    absl::StatusOr<wire::Challenge> c = ch->RecvAs<wire::Challenge>("answer");
    ASSERT_FALSE(c.ok());
    EXPECT_TRUE(absl::StrContains(c.status().message(), "hello: truncated")) << c.status();
  }
  // Half a frame, then the client closes.
  {
    std::unique_ptr<Channel> ch = Connect(s.port());
    ASSERT_NE(ch, nullptr);
    std::vector<uint8_t> f = wire::Encode(AuthHello(s.port()));
    ASSERT_TRUE(
        WriteAll(ch->fd(), f.data(), f.size() / 2, Deadline::In(absl::Seconds(5)), nullptr, "hello")
            .ok());
  }
  const std::vector<absl::Status>& served = s.Finish();
  ASSERT_EQ(served.size(), 2u);
  EXPECT_TRUE(absl::IsInvalidArgument(served[0])) << served[0];
  EXPECT_FALSE(served[1].ok());
}

// What a listener on the wire captured of a good exchange, sent again on a new connection: the
// responder's nonce is new, so the old proof fails.
TEST_F(Secure, ReplayedHelloAndProofAreRefused) {
  ServerOptions so = Loopback();
  so.secret_file = secret_;
  Serving s(so, 2);
  const wire::Hello hello = AuthHello(s.port());
  const std::vector<uint8_t> hello_bytes = wire::Encode(hello);
  std::vector<uint8_t> proof_bytes;
  wire::Nonce first_nonce{};
  {
    std::unique_ptr<Channel> ch = Connect(s.port());
    ASSERT_NE(ch, nullptr);
    ASSERT_TRUE(WriteAll(ch->fd(), hello_bytes.data(), hello_bytes.size(),
                         Deadline::In(absl::Seconds(5)), nullptr, "hello")
                    .ok());
    absl::StatusOr<wire::Challenge> c = ch->RecvAs<wire::Challenge>("challenge");
    ASSERT_TRUE(c.ok()) << c.status();
    first_nonce = c->nonce;
    proof_bytes =
        wire::Encode(wire::Proof{ClientMac("correct horse battery staple", c->nonce, hello)});
    ASSERT_TRUE(WriteAll(ch->fd(), proof_bytes.data(), proof_bytes.size(),
                         Deadline::In(absl::Seconds(5)), nullptr, "proof")
                    .ok());
    absl::StatusOr<wire::Accept> a = ch->RecvAs<wire::Accept>("answer");
    EXPECT_TRUE(a.ok()) << a.status();  // the genuine exchange passes
  }
  {
    std::unique_ptr<Channel> ch = Connect(s.port());
    ASSERT_NE(ch, nullptr);
    ASSERT_TRUE(WriteAll(ch->fd(), hello_bytes.data(), hello_bytes.size(),
                         Deadline::In(absl::Seconds(5)), nullptr, "hello")
                    .ok());
    absl::StatusOr<wire::Challenge> c = ch->RecvAs<wire::Challenge>("challenge");
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_NE(c->nonce, first_nonce);
    ASSERT_TRUE(WriteAll(ch->fd(), proof_bytes.data(), proof_bytes.size(),
                         Deadline::In(absl::Seconds(5)), nullptr, "proof")
                    .ok());
    absl::StatusOr<wire::Accept> a = ch->RecvAs<wire::Accept>("answer");
    ASSERT_FALSE(a.ok());
    EXPECT_TRUE(absl::StrContains(a.status().message(), "authentication failed")) << a.status();
  }
  const std::vector<absl::Status>& served = s.Finish();
  ASSERT_EQ(served.size(), 2u);
  EXPECT_TRUE(absl::IsPermissionDenied(served[1])) << served[1];
}

TEST_F(Secure, RateLimitTripsAfterN) {
  ServerOptions so = Loopback();
  so.rate_per_minute = 2;
  Serving s(so, 3);
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<ProbeResult> r = RunProbe(TcpSpec(s.port()));
    EXPECT_TRUE(r.ok()) << i << ": " << r.status();
  }
  absl::StatusOr<ProbeResult> r = RunProbe(TcpSpec(s.port()));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(r.status())) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(),
                                "rate limit: at most 2 tests a minute from 127.0.0.1"))
      << r.status();
  const std::vector<absl::Status>& served = s.Finish();
  ASSERT_EQ(served.size(), 3u);
  EXPECT_TRUE(absl::IsResourceExhausted(served[2])) << served[2];
}

// With a secret the refusal comes where the challenge was expected: still ResourceExhausted.
TEST_F(Secure, RateLimitWithASecretIsStillResourceExhausted) {
  ServerOptions so = Loopback();
  so.rate_per_minute = 1;
  so.secret_file = secret_;
  Serving s(so, 2);
  ProbeSpec spec = TcpSpec(s.port());
  spec.secret_file = secret_;
  absl::StatusOr<ProbeResult> r = RunProbe(spec);
  EXPECT_TRUE(r.ok()) << r.status();
  r = RunProbe(spec);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(r.status())) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "rate limit: at most 1 tests")) << r.status();
}

// A client that connects and says nothing holds the responder for one step timeout, and no
// device; the next client is served after it.
TEST_F(Secure, SilentClientIsReleasedAfterTheStepTimeout) {
  DeviceLocks locks;
  ServerOptions so = Loopback();
  so.local.timeout = absl::Seconds(1);
  so.locks = &locks;
  Serving s(so, 2);
  const absl::Time start = absl::Now();
  std::unique_ptr<Channel> silent = Connect(s.port());
  ASSERT_NE(silent, nullptr);
  // This host's own test gets the device while the silent peer is connected.
  EXPECT_TRUE(locks.Acquire("tcp", absl::Milliseconds(100)).has_value());
  ProbeSpec spec = TcpSpec(s.port());
  spec.local.timeout = absl::Seconds(10);
  absl::StatusOr<ProbeResult> r = RunProbe(spec);
  EXPECT_TRUE(r.ok()) << r.status();
  const absl::Duration took = absl::Now() - start;
  const std::vector<absl::Status>& served = s.Finish();
  ASSERT_EQ(served.size(), 2u);
  EXPECT_TRUE(absl::IsDeadlineExceeded(served[0])) << served[0];
  EXPECT_TRUE(served[1].ok()) << served[1];
  EXPECT_GE(took, absl::Milliseconds(900));
  EXPECT_LT(took, absl::Seconds(8));
  EXPECT_FALSE(locks.held("tcp"));
}

// Serving several at once (the agent's responder), a silent client takes one slot until the
// step timeout and no device: another client is served meanwhile.
TEST_F(Secure, SilentClientDoesNotBlockConcurrentServing) {
  DeviceLocks locks;
  ServerOptions so = Loopback();
  so.local.timeout = absl::Seconds(3);
  so.locks = &locks;
  so.max_clients = 2;
  absl::StatusOr<std::unique_ptr<ProbeServer>> server = ProbeServer::Create(so);
  ASSERT_TRUE(server.ok()) << server.status();
  std::mutex mu;
  std::vector<absl::Status> served;
  std::thread t([&] {
    (void)(*server)->Serve([&](const ServedTest& st) {
      std::lock_guard<std::mutex> lock(mu);
      served.push_back(st.status);
    });
  });
  std::unique_ptr<Channel> silent = Connect((*server)->port());
  ASSERT_NE(silent, nullptr);
  const absl::Time start = absl::Now();
  absl::StatusOr<ProbeResult> r = RunProbe(TcpSpec((*server)->port()));
  EXPECT_TRUE(r.ok()) << r.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));  // not after the silent one's timeout
  EXPECT_TRUE(fabric::testing::WaitFor(
      [&] {
        std::lock_guard<std::mutex> lock(mu);
        return served.size() == 2;
      },
      absl::Seconds(10)));
  (*server)->Stop();
  t.join();
  ASSERT_EQ(served.size(), 2u);
  EXPECT_TRUE(served[0].ok()) << served[0];
  EXPECT_TRUE(absl::IsDeadlineExceeded(served[1])) << served[1];
  EXPECT_FALSE(locks.held("tcp"));
}

// --- the real binary ----------------------------------------------------------------------

std::unique_ptr<Subprocess> StartServer(std::vector<std::string> args, uint16_t* port,
                                        std::string* allowed) {
  args.insert(args.begin(), FABRIC_PROBE);
  args.insert(args.end(), {"--transport", "tcp", "-p", "0", "--bind", "127.0.0.1"});
  absl::StatusOr<std::unique_ptr<Subprocess>> s = Subprocess::Start(args);
  if (!s.ok()) return nullptr;
  std::optional<std::string> p =
      fabric::testing::WaitForLogged(**s, "waiting for a client on port ", absl::Seconds(10));
  int n = 0;
  if (!p.has_value() || !absl::SimpleAtoi(*p, &n)) return nullptr;
  *port = static_cast<uint16_t>(n);
  *allowed = fabric::testing::WaitForLogged(**s, "serving ", absl::Seconds(1)).value_or("");
  return std::move(*s);
}

absl::StatusOr<fabric::testing::RunResult> RunClient(uint16_t port,
                                                     std::vector<std::string> more = {}) {
  std::vector<std::string> args = {
      FABRIC_PROBE,  "write_lat", "127.0.0.1", "-p", absl::StrCat(port),
      "--transport", "tcp",       "-n",        "100"};
  args.insert(args.end(), more.begin(), more.end());
  return fabric::testing::Run(args, absl::Seconds(30));
}

TEST_F(Secure, BinaryOutsideTheAllowListExitsOne) {
  uint16_t port = 0;
  std::string allowed;
  std::unique_ptr<Subprocess> server =
      StartServer({"write_lat", "--allow", "10.0.0.0/8, fd00::/8"}, &port, &allowed);
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(allowed, "10.0.0.0/8, fd00::/8");
  absl::StatusOr<fabric::testing::RunResult> c = RunClient(port);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->status, kExitFailure) << c->err;
  EXPECT_TRUE(absl::StrContains(
      c->err, "peer refused: this responder does not serve 127.0.0.1 (not in its allow-list)"))
      << c->err;
  EXPECT_EQ(server->Wait(absl::Seconds(10)), kExitFailure) << server->Stderr();
}

TEST_F(Secure, BinaryDefaultsToThisHostsSubnets) {
  uint16_t port = 0;
  std::string allowed;
  std::unique_ptr<Subprocess> server = StartServer({"write_lat"}, &port, &allowed);
  ASSERT_NE(server, nullptr);
  EXPECT_TRUE(absl::StrContains(allowed, "127.0.0.0/8")) << allowed;
  EXPECT_TRUE(absl::StrContains(allowed, "(this host's subnets; set --allow to change)"))
      << allowed;
  absl::StatusOr<fabric::testing::RunResult> c = RunClient(port);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->status, kExitOk) << c->err;
  EXPECT_EQ(server->Wait(absl::Seconds(10)), kExitOk) << server->Stderr();
}

TEST_F(Secure, BinarySecretFile) {
  uint16_t port = 0;
  std::string allowed;
  std::unique_ptr<Subprocess> server =
      StartServer({"write_lat", "--secret-file", secret_}, &port, &allowed);
  ASSERT_NE(server, nullptr);
  absl::StatusOr<fabric::testing::RunResult> c = RunClient(port, {"--secret-file", secret_});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->status, kExitOk) << c->err;
  EXPECT_EQ(server->Wait(absl::Seconds(10)), kExitOk) << server->Stderr();

  server = StartServer({"write_lat", "--secret-file", secret_}, &port, &allowed);
  ASSERT_NE(server, nullptr);
  c = RunClient(port, {"--secret-file", other_});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->status, kExitFailure) << c->err;
  EXPECT_TRUE(absl::StrContains(c->err, "did not prove the shared secret")) << c->err;
  EXPECT_EQ(server->Wait(absl::Seconds(10)), kExitFailure) << server->Stderr();

  // An empty or missing secret file is a usage error on either side.
  for (const std::string& bad : {Write("empty", ""), dir_ + "/missing"}) {
    c = RunClient(port, {"--secret-file", bad});
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->status, kExitUsage) << c->err;
    EXPECT_TRUE(absl::StrContains(c->err, bad)) << c->err;
  }
}

// The default allow-list follows the host: an address configured after the responder started
// (a back-end NIC set up late at boot) lets its subnet's peers in. Throwaway namespaces: the
// responder in "pod", the client in "peer", the veth addresses added once it runs.
constexpr char kIp[] = "/usr/sbin/ip";

TEST_F(Secure, BinaryDefaultFollowsAddressesAddedLater) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root for network namespaces";
  fabric::testing::VethPairSpec spec;
  spec.prefix = "fps";
  absl::StatusOr<std::unique_ptr<fabric::testing::VethPair>> pair =
      fabric::testing::VethPair::Create(spec);
  ASSERT_TRUE(pair.ok()) << pair.status();
  absl::StatusOr<std::unique_ptr<Subprocess>> server =
      Subprocess::Start({kIp, "netns", "exec", (*pair)->pod(), FABRIC_PROBE, "write_lat",
                         "--transport", "tcp", "-p", "0", "--forever"});
  ASSERT_TRUE(server.ok()) << server.status();
  std::optional<std::string> port =
      fabric::testing::WaitForLogged(**server, "waiting for a client on port ", absl::Seconds(10));
  ASSERT_TRUE(port.has_value()) << (*server)->Stderr();
  EXPECT_FALSE(absl::StrContains((*server)->Stderr(), "10.251.7.0/24")) << (*server)->Stderr();
  for (const auto& [ns, dev, cidr] : {std::tuple((*pair)->pod(), "eth0", "10.251.7.2/24"),
                                      std::tuple((*pair)->peer(), "peer0", "10.251.7.1/24")}) {
    absl::StatusOr<fabric::testing::RunResult> ip =
        fabric::testing::Run({kIp, "-n", ns, "addr", "add", cidr, "dev", dev}, absl::Seconds(10));
    ASSERT_TRUE(ip.ok() && ip->status == 0) << cidr;
  }
  absl::StatusOr<fabric::testing::RunResult> c = fabric::testing::Run(
      {kIp, "netns", "exec", (*pair)->peer(), FABRIC_PROBE, "write_lat", "10.251.7.2", "-p", *port,
       "--transport", "tcp", "-n", "100", "--timeout", "5"},
      absl::Seconds(30));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->status, kExitOk) << c->err << (*server)->Stderr();
  EXPECT_TRUE(absl::StrContains((*server)->Stderr(), "10.251.7.0/24")) << (*server)->Stderr();
  (*server)->Signal(SIGTERM);
  EXPECT_EQ((*server)->Wait(absl::Seconds(10)), kExitOk) << (*server)->Stderr();
}

}  // namespace
}  // namespace fabric::probes
