// The probes without an RDMA device: every test over the TCP transport, in one process through
// the library and as real fabric-probe processes on 127.0.0.1, plus the failures a user meets
// (vanished peer, unreachable peer, missing device, mismatched parameters).
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "agent/fabric/probe_cli/cli.h"
#include "agent/fabric/probes/probe.h"
#include "tests/testing/subprocess.h"

namespace fabric::probes {
namespace {

using fabric::testing::Subprocess;
using fabric::testing::WaitFor;

ProbeParams TcpParams(TestKind test) {
  ProbeParams p = DefaultParams(test);
  p.transport = Transport::kTcp;
  p.iterations = IsLatency(test) ? 200 : 100;
  if (!IsLatency(test)) p.size = 4096;
  return p;
}

// A server in this process on 127.0.0.1, on a port the kernel picks.
ServerOptions LoopbackServer() {
  ServerOptions so;
  so.bind = "127.0.0.1";
  so.port = 0;
  return so;
}

// What one test gave on either side.
struct Outcome {
  absl::StatusOr<ProbeResult> client;
  absl::StatusOr<ServedTest> served;
};

// Runs `spec` against a server with the options `so` that serves that one test.
Outcome RunAgainstServer(const ServerOptions& so, ProbeSpec spec) {
  absl::StatusOr<std::unique_ptr<ProbeServer>> server = ProbeServer::Create(so);
  if (!server.ok()) {
    ADD_FAILURE() << "ProbeServer::Create: " << server.status();
    return {server.status(), server.status()};
  }
  absl::StatusOr<ServedTest> served;
  std::thread t([&] { served = (*server)->ServeOne(); });
  spec.host = "127.0.0.1";
  spec.port = (*server)->port();
  absl::StatusOr<ProbeResult> r = RunProbe(spec);
  t.join();
  return {std::move(r), std::move(served)};
}

class InProcess : public ::testing::TestWithParam<TestKind> {};

TEST_P(InProcess, TcpTransportRunsTheTest) {
  ServerOptions so = LoopbackServer();
  so.local.timeout = absl::Seconds(5);
  ProbeSpec spec;
  spec.params = TcpParams(GetParam());
  spec.local.timeout = absl::Seconds(5);
  auto [r, served] = RunAgainstServer(so, spec);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(served.ok()) << served.status();
  EXPECT_TRUE(served->status.ok()) << served->status;
  EXPECT_EQ(served->params, spec.params);
  EXPECT_EQ(r->params.transport, Transport::kTcp);
  EXPECT_EQ(r->clock, "CLOCK_MONOTONIC_RAW");
  if (IsLatency(GetParam())) {
    ASSERT_TRUE(r->lat.has_value());
    EXPECT_FALSE(r->bw.has_value());
    EXPECT_GT(r->lat->min_us, 0);
    EXPECT_LE(r->lat->min_us, r->lat->typical_us);
    EXPECT_LE(r->lat->typical_us, r->lat->p99_us);
    EXPECT_LE(r->lat->p99_us, r->lat->p999_us);
    EXPECT_LE(r->lat->p999_us, r->lat->max_us);
  } else {
    ASSERT_TRUE(r->bw.has_value());
    EXPECT_EQ(r->iterations, 100u);
    EXPECT_GT(r->bw->avg_gbps, 0);
    EXPECT_FALSE(r->bw->peak_gbps.has_value());  // not over TCP
  }
}

INSTANTIATE_TEST_SUITE_P(AllTests, InProcess,
                         ::testing::Values(TestKind::kWriteBw, TestKind::kWriteLat,
                                           TestKind::kSendBw, TestKind::kSendLat, TestKind::kReadBw,
                                           TestKind::kReadLat),
                         [](const auto& tp) { return std::string(TestName(tp.param)); });

class DurationMode : public ::testing::TestWithParam<TestKind> {};

TEST_P(DurationMode, CountsOnlyTheWindow) {
  ProbeSpec spec;
  spec.params = TcpParams(GetParam());
  spec.params.iterations = 0;
  spec.params.duration = absl::Milliseconds(300);
  spec.params.margin = absl::Milliseconds(100);
  absl::Time start = absl::Now();
  auto [r, served] = RunAgainstServer(LoopbackServer(), spec);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(served.ok() && served->status.ok());
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(400));
  EXPECT_GT(r->iterations, 0u);
}

INSTANTIATE_TEST_SUITE_P(SomeTests, DurationMode,
                         ::testing::Values(TestKind::kWriteBw, TestKind::kReadBw,
                                           TestKind::kSendLat, TestKind::kReadLat),
                         [](const auto& tp) { return std::string(TestName(tp.param)); });

TEST(DeviceLocks, OneHolderPerDevice) {
  DeviceLocks locks;
  std::optional<DeviceLocks::Hold> a = locks.TryAcquire("mlx5_1");
  ASSERT_TRUE(a.has_value());
  EXPECT_TRUE(locks.held("mlx5_1"));
  EXPECT_FALSE(locks.TryAcquire("mlx5_1").has_value());
  EXPECT_TRUE(locks.TryAcquire("mlx5_2").has_value());  // other devices are free
  EXPECT_FALSE(locks.held("mlx5_2"));                   // ... and released with their hold
  // A waiter gets the device once the holder lets go, and not before.
  std::optional<DeviceLocks::Hold> b;
  std::thread waiter([&] { b = locks.Acquire("mlx5_1", absl::Seconds(10)); });
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(b.has_value());
  a.reset();
  waiter.join();
  ASSERT_TRUE(b.has_value());
  EXPECT_FALSE(locks.Acquire("mlx5_1", absl::Milliseconds(20)).has_value());  // times out
  // Moving a hold moves the lock; assigning over one releases the old device.
  DeviceLocks::Hold moved = std::move(*b);
  b.reset();
  EXPECT_TRUE(locks.held("mlx5_1"));
  std::optional<DeviceLocks::Hold> other = locks.TryAcquire("tcp");
  ASSERT_TRUE(other.has_value());
  moved = std::move(*other);
  EXPECT_FALSE(locks.held("mlx5_1"));
  EXPECT_TRUE(locks.held("tcp"));
}

// A responder that shares its device locks with the host's own probes refuses a test on a busy
// device (ResourceExhausted on the client, which a schedule retries) and serves it once free.
TEST(ProbeServer, BusyDeviceIsRefusedThenServed) {
  DeviceLocks locks;
  ServerOptions so = LoopbackServer();
  so.locks = &locks;
  so.max_clients = 4;
  absl::StatusOr<std::unique_ptr<ProbeServer>> server = ProbeServer::Create(so);
  ASSERT_TRUE(server.ok()) << server.status();
  std::atomic<int> served{0}, refused{0};
  std::thread t([&] {
    (void)(*server)->Serve([&](const ServedTest& st) {
      if (st.status.ok()) ++served;
      if (absl::IsResourceExhausted(st.status)) ++refused;
    });
  });
  ProbeSpec spec;
  spec.params = TcpParams(TestKind::kWriteLat);
  spec.host = "127.0.0.1";
  spec.port = (*server)->port();
  spec.local.timeout = absl::Seconds(5);
  {
    std::optional<DeviceLocks::Hold> mine = locks.TryAcquire("tcp");  // "this host probes"
    ASSERT_TRUE(mine.has_value());
    absl::StatusOr<ProbeResult> r = RunProbe(spec);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(absl::IsResourceExhausted(r.status())) << r.status();
    EXPECT_NE(r.status().message().find("busy: tcp"), std::string::npos) << r.status();
  }
  absl::StatusOr<ProbeResult> r = RunProbe(spec);
  EXPECT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(WaitFor([&] { return served.load() == 1 && refused.load() == 1; }, absl::Seconds(5)));
  (*server)->Stop();
  t.join();
}

// A host probing its own responder (the agent's RunProbe to its own --probe-listen) is one test:
// its hold admits its own connection, which the responder then serves instead of "busy"; any
// other connection during that test is still refused as busy.
TEST(ProbeServer, OwnProbeJoinsItsHoldOthersStayBusy) {
  DeviceLocks locks;
  ServerOptions so = LoopbackServer();
  so.locks = &locks;
  so.max_clients = 4;
  absl::StatusOr<std::unique_ptr<ProbeServer>> server = ProbeServer::Create(so);
  ASSERT_TRUE(server.ok()) << server.status();
  std::thread t([&] { (void)(*server)->Serve(); });
  ProbeSpec spec;
  spec.params = TcpParams(TestKind::kWriteBw);
  spec.params.iterations = 0;  // long enough for a stranger to arrive during it
  spec.params.duration = absl::Seconds(1);
  spec.params.margin = absl::ZeroDuration();
  spec.host = "127.0.0.1";
  spec.port = (*server)->port();
  spec.local.timeout = absl::Seconds(5);
  std::optional<DeviceLocks::Hold> mine = locks.Acquire("tcp", absl::Seconds(1));
  ASSERT_TRUE(mine.has_value());
  spec.hold = &*mine;
  absl::StatusOr<ProbeResult> own;
  std::thread self([&] { own = RunProbe(spec); });
  absl::SleepFor(absl::Milliseconds(300));
  ProbeSpec stranger = spec;
  stranger.hold = nullptr;
  stranger.params = TcpParams(TestKind::kWriteLat);
  absl::StatusOr<ProbeResult> other = RunProbe(stranger);
  self.join();
  EXPECT_TRUE(own.ok()) << own.status();
  ASSERT_FALSE(other.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(other.status())) << other.status();
  // The responder's share ends with its side of the test, the lock with the holder's.
  EXPECT_TRUE(locks.held("tcp"));
  mine.reset();
  EXPECT_TRUE(WaitFor([&] { return !locks.held("tcp"); }, absl::Seconds(5)));
  (*server)->Stop();
  t.join();
}

// Nothing listening fails at once, as perftest does; a retry keeps trying for its time and
// serves a responder that starts meanwhile.
TEST(RunProbe, RefusedConnectionFailsAtOnceUnlessRetried) {
  // A port that was just free: bind one, note it, close it.
  absl::StatusOr<std::unique_ptr<ProbeServer>> gone = ProbeServer::Create(LoopbackServer());
  ASSERT_TRUE(gone.ok()) << gone.status();
  const uint16_t port = (*gone)->port();
  gone->reset();
  ProbeSpec spec;
  spec.params = TcpParams(TestKind::kWriteLat);
  spec.host = "127.0.0.1";
  spec.port = port;
  spec.local.timeout = absl::Seconds(10);
  absl::Time start = absl::Now();
  absl::StatusOr<ProbeResult> r = RunProbe(spec);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsUnavailable(r.status())) << r.status();
  EXPECT_NE(r.status().message().find(absl::StrCat("nothing listens on 127.0.0.1:", port,
                                                   " (is the peer's responder running?)")),
            std::string::npos)
      << r.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));  // the step timeout was 10 s

  spec.connect_retry = absl::Seconds(1);
  start = absl::Now();
  r = RunProbe(spec);
  ASSERT_FALSE(r.ok());
  EXPECT_GE(absl::Now() - start, absl::Seconds(1));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_NE(r.status().message().find("still, when the retries ran out"), std::string::npos)
      << r.status();

  // A responder that starts within the retry time is served.
  spec.connect_retry = absl::Seconds(20);
  absl::StatusOr<ProbeResult> late;
  std::thread client([&] { late = RunProbe(spec); });
  absl::SleepFor(absl::Milliseconds(500));
  ServerOptions so = LoopbackServer();
  so.port = port;
  absl::StatusOr<std::unique_ptr<ProbeServer>> server = ProbeServer::Create(so);
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<ServedTest> served = (*server)->ServeOne();
  client.join();
  EXPECT_TRUE(late.ok()) << late.status();
  EXPECT_TRUE(served.ok() && served->status.ok());
}

// Several clients at once: one test per device (all TCP tests share one), the rest refused as
// busy, and a responder past its client limit refuses too; none of them hangs.
TEST(ProbeServer, ConcurrentClientsAreServedOrRefusedPromptly) {
  DeviceLocks locks;
  ServerOptions so = LoopbackServer();
  so.locks = &locks;
  so.max_clients = 2;
  absl::StatusOr<std::unique_ptr<ProbeServer>> server = ProbeServer::Create(so);
  ASSERT_TRUE(server.ok()) << server.status();
  std::thread t([&] { (void)(*server)->Serve(); });
  constexpr int kClients = 6;
  std::vector<absl::StatusOr<ProbeResult>> results(kClients, absl::UnknownError("not run"));
  std::vector<std::thread> clients;
  const absl::Time start = absl::Now();
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] {
      ProbeSpec spec;
      spec.params = TcpParams(TestKind::kWriteBw);
      spec.params.iterations = 0;  // a second each, so that they overlap
      spec.params.duration = absl::Seconds(1);
      spec.params.margin = absl::ZeroDuration();
      spec.host = "127.0.0.1";
      spec.port = (*server)->port();
      spec.local.timeout = absl::Seconds(5);
      results[i] = RunProbe(spec);
    });
  }
  for (auto& c : clients) c.join();
  int ok = 0, busy = 0;
  for (const auto& r : results) {
    if (r.ok()) ++ok;
    if (!r.ok() && absl::IsResourceExhausted(r.status())) ++busy;
    EXPECT_TRUE(r.ok() || absl::IsResourceExhausted(r.status())) << r.status();
  }
  EXPECT_GE(ok, 1);
  EXPECT_GE(busy, 3);
  EXPECT_EQ(ok + busy, kClients);
  // Refusals do not wait out a timeout: at most a few one-second tests one after another.
  EXPECT_LT(absl::Now() - start, absl::Seconds(4.5));
  (*server)->Stop();
  t.join();
}

TEST(ProbeServer, StopEndsServeAtOnce) {
  absl::StatusOr<std::unique_ptr<ProbeServer>> server = ProbeServer::Create(LoopbackServer());
  ASSERT_TRUE(server.ok());
  absl::Status st = absl::UnknownError("not run");
  std::thread t([&] { st = (*server)->Serve(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const absl::Time start = absl::Now();
  (*server)->Stop();
  t.join();
  EXPECT_TRUE(st.ok()) << st;
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
}

TEST(ProbeServer, RejectsMismatchedParameters) {
  ServerOptions so = LoopbackServer();
  so.test = TestKind::kWriteBw;
  so.expect = TcpParams(TestKind::kWriteBw);
  so.expect.size = 1024;
  so.explicit_fields = kFieldSize;
  ProbeSpec spec;
  spec.params = TcpParams(TestKind::kWriteBw);
  spec.params.size = 2048;
  auto [r, served] = RunAgainstServer(so, spec);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(r.status())) << r.status();
  EXPECT_NE(r.status().message().find("size 1024 here, 2048 asked"), std::string::npos)
      << r.status();
  ASSERT_TRUE(served.ok());
  EXPECT_FALSE(served->status.ok());
}

// --- the real binary ----------------------------------------------------------------------

// Starts `fabric-probe ARGS -p 0` as a server and returns it with the port it printed.
std::unique_ptr<Subprocess> StartServer(std::vector<std::string> args, uint16_t* port) {
  args.insert(args.begin(), FABRIC_PROBE);
  args.insert(args.end(), {"-p", "0", "--bind", "127.0.0.1"});
  absl::StatusOr<std::unique_ptr<Subprocess>> s = Subprocess::Start(args);
  if (!s.ok()) return nullptr;
  const std::string marker = "waiting for a client on port ";
  bool ok = WaitFor(
      [&] {
        const std::string err = (*s)->Stderr();
        const size_t at = err.find(marker);
        if (at == std::string::npos) return false;
        const size_t end = err.find('\n', at);
        if (end == std::string::npos) return false;
        int p = 0;
        if (!absl::SimpleAtoi(err.substr(at + marker.size(), end - at - marker.size()), &p)) {
          return false;
        }
        *port = static_cast<uint16_t>(p);
        return true;
      },
      absl::Seconds(10));
  return ok ? std::move(*s) : nullptr;
}

class Binary : public ::testing::TestWithParam<std::string> {};

TEST_P(Binary, JsonOverTcp) {
  const std::string test = GetParam();
  uint16_t port = 0;
  std::unique_ptr<Subprocess> server = StartServer({test, "--transport", "tcp"}, &port);
  ASSERT_NE(server, nullptr);
  absl::StatusOr<fabric::testing::RunResult> c =
      fabric::testing::Run({FABRIC_PROBE, test, "127.0.0.1", "-p", absl::StrCat(port),
                            "--transport", "tcp", "-n", "200", "--json"},
                           absl::Seconds(30));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->status, 0) << c->err;
  EXPECT_EQ(server->Wait(absl::Seconds(10)), 0) << server->Stderr();
  nlohmann::json j = nlohmann::json::parse(c->out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded()) << c->out;
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j.value("test", ""), test);
  EXPECT_EQ(j.value("transport", ""), "tcp");
  EXPECT_FALSE(j.contains("device"));  // over TCP there is none
  EXPECT_TRUE(j["bytes"].is_number_integer());
  EXPECT_TRUE(j["iterations"].is_number_integer());
  const bool lat = test.ends_with("_lat");
  for (const char* k :
       {"t_min_us", "t_max_us", "t_typical_us", "t_avg_us", "t_stdev_us", "p99_us", "p999_us"}) {
    EXPECT_EQ(j.contains(k), lat) << k;
    if (lat) {
      EXPECT_TRUE(j[k].is_number()) << k;
    }
  }
  for (const char* k : {"bw_avg_gbps", "msg_rate_mpps"}) {
    EXPECT_EQ(j.contains(k), !lat) << k;
    if (!lat) {
      EXPECT_GT(j[k].get<double>(), 0) << k;
    }
  }
  EXPECT_FALSE(j.contains("bw_peak_gbps"));
}

INSTANTIATE_TEST_SUITE_P(AllTests, Binary,
                         ::testing::Values("write_bw", "write_lat", "send_bw", "send_lat",
                                           "read_bw", "read_lat"));

TEST(BinaryFailures, TableOutputSaysTcp) {
  uint16_t port = 0;
  std::unique_ptr<Subprocess> server = StartServer({"write_lat", "--transport", "tcp"}, &port);
  ASSERT_NE(server, nullptr);
  absl::StatusOr<fabric::testing::RunResult> c = fabric::testing::Run(
      {FABRIC_PROBE, "write_lat", "127.0.0.1", "-p", absl::StrCat(port), "--transport", "tcp"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->status, 0) << c->err;
  EXPECT_NE(c->out.find("not an RDMA figure"), std::string::npos) << c->out;
  EXPECT_NE(c->out.find("t_typical[usec]"), std::string::npos) << c->out;
  EXPECT_NE(c->out.find("CLOCK_MONOTONIC_RAW"), std::string::npos) << c->out;
}

// A server and a client half a second into a 30 s `test` over TCP, for killing one of them.
// Either is null when it did not start.
struct LongTest {
  std::unique_ptr<Subprocess> server;
  std::unique_ptr<Subprocess> client;
};
LongTest StartLongTest(const std::string& test, const std::vector<std::string>& client_args = {}) {
  LongTest t;
  uint16_t port = 0;
  t.server = StartServer({test, "--transport", "tcp"}, &port);
  if (t.server == nullptr) return t;
  std::vector<std::string> args = {FABRIC_PROBE, test, "127.0.0.1", "-p", absl::StrCat(port)};
  args.insert(args.end(), {"--transport", "tcp", "-D", "30", "--margin", "0"});
  args.insert(args.end(), client_args.begin(), client_args.end());
  absl::StatusOr<std::unique_ptr<Subprocess>> client = Subprocess::Start(args);
  if (!client.ok()) return t;
  t.client = std::move(*client);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  return t;
}

TEST(BinaryFailures, VanishedServerIsAClearErrorWithinTheTimeout) {
  LongTest t = StartLongTest("write_lat", {"--timeout", "3"});
  ASSERT_NE(t.server, nullptr);
  ASSERT_NE(t.client, nullptr);
  t.server->Signal(SIGKILL);
  const absl::Time killed = absl::Now();
  std::optional<int> rc = t.client->Wait(absl::Seconds(10));
  ASSERT_TRUE(rc.has_value()) << "client still running 10 s after the server died";
  EXPECT_LT(absl::Now() - killed, absl::Seconds(4));
  EXPECT_EQ(*rc, kExitFailure);
  const std::string err = t.client->Stderr();
  EXPECT_NE(err.find("fabric-probe: error: write_lat with 127.0.0.1"), std::string::npos) << err;
  EXPECT_TRUE(err.find("closed the connection") != std::string::npos ||
              err.find("connection to the peer lost") != std::string::npos)
      << err;
}

TEST(BinaryFailures, ClientKilledServerReportsIt) {
  LongTest t = StartLongTest("read_bw");
  ASSERT_NE(t.server, nullptr);
  ASSERT_NE(t.client, nullptr);
  t.client->Signal(SIGKILL);
  std::optional<int> rc = t.server->Wait(absl::Seconds(15));
  ASSERT_TRUE(rc.has_value());
  EXPECT_EQ(*rc, kExitFailure);
  EXPECT_NE(t.server->Stderr().find("read_bw from 127.0.0.1"), std::string::npos)
      << t.server->Stderr();
}

TEST(BinaryFailures, UnreachablePeer) {
  // A port nobody listens on: refused at once (well inside the 10 s timeout), a clear error.
  absl::Time start = absl::Now();
  absl::StatusOr<fabric::testing::RunResult> c = fabric::testing::Run(
      {FABRIC_PROBE, "write_bw", "127.0.0.1", "-p", "1", "--transport", "tcp", "--timeout", "10"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->status, kExitFailure);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_NE(c->err.find("nothing listens on 127.0.0.1:1 (is the peer's responder running?)"),
            std::string::npos)
      << c->err;
  // --retry keeps trying for its time, then says so.
  start = absl::Now();
  c = fabric::testing::Run(
      {FABRIC_PROBE, "write_bw", "127.0.0.1", "-p", "1", "--transport", "tcp", "--retry", "1"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->status, kExitFailure);
  EXPECT_GE(absl::Now() - start, absl::Seconds(1));
  EXPECT_LT(absl::Now() - start, absl::Seconds(8));
  EXPECT_NE(c->err.find("still, when the retries ran out"), std::string::npos) << c->err;
  // A name that does not resolve.
  c = fabric::testing::Run(
      {FABRIC_PROBE, "write_bw", "no-such-host.invalid", "--transport", "tcp", "--timeout", "1"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->status, kExitFailure);
  EXPECT_NE(c->err.find("cannot resolve"), std::string::npos) << c->err;
}

TEST(BinaryFailures, NonexistentDevice) {
  absl::StatusOr<fabric::testing::RunResult> c = fabric::testing::Run(
      {FABRIC_PROBE, "write_bw", "127.0.0.1", "-d", "no_such_dev0", "--timeout", "1"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->status, kExitFailure);
  EXPECT_TRUE(c->err.find("no RDMA device") != std::string::npos ||
              c->err.find("no RDMA support") != std::string::npos)
      << c->err;
}

TEST(BinaryFailures, UsageErrorsExitTwo) {
  absl::StatusOr<fabric::testing::RunResult> c =
      fabric::testing::Run({FABRIC_PROBE, "write_bw", "h", "-n", "5", "-D", "1"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->status, kExitUsage);
  EXPECT_NE(c->err.find("exclude each other"), std::string::npos) << c->err;
  c = fabric::testing::Run({FABRIC_PROBE, "bogus_test"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->status, kExitUsage);
}

TEST(BinaryFailures, MismatchedServerRejects) {
  uint16_t port = 0;
  std::unique_ptr<Subprocess> server =
      StartServer({"send_bw", "--transport", "tcp", "-s", "1024"}, &port);
  ASSERT_NE(server, nullptr);
  absl::StatusOr<fabric::testing::RunResult> c =
      fabric::testing::Run({FABRIC_PROBE, "send_bw", "127.0.0.1", "-p", absl::StrCat(port),
                            "--transport", "tcp", "-s", "2048"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->status, kExitFailure);
  EXPECT_NE(c->err.find("peer refused: test parameters differ: size 1024 here, 2048 asked"),
            std::string::npos)
      << c->err;
  EXPECT_EQ(server->Wait(absl::Seconds(5)), kExitFailure);
}

TEST(BinaryFailures, AutoTransportFallsBackToTcpWithoutADevice) {
  // Only meaningful on a host without RDMA (CI); with a device the client would use it.
  uint16_t port = 0;
  std::unique_ptr<Subprocess> server = StartServer({"write_bw"}, &port);
  ASSERT_NE(server, nullptr);
  absl::StatusOr<fabric::testing::RunResult> c = fabric::testing::Run(
      {FABRIC_PROBE, "write_bw", "127.0.0.1", "-p", absl::StrCat(port), "-n", "50", "--json"});
  ASSERT_TRUE(c.ok());
  if (c->err.find("no RDMA device on this host") == std::string::npos) {
    GTEST_SKIP() << "this host has an RDMA device";
  }
  EXPECT_EQ(c->status, 0) << c->err;
  EXPECT_NE(c->out.find("\"transport\":\"tcp\""), std::string::npos) << c->out;
}

}  // namespace
}  // namespace fabric::probes
