// Who may do what, and what bursts and hostile clients can make the agent hold: the real
// fabric-agent binary, real callers under other uids (setpriv), a real file limit (prlimit).
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/client_unary_call.h>
#include <grpcpp/impl/codegen/sync_stream.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "fabric/v1/agent.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "tests/hosts/hosts.h"
#include "tests/testing/binaries.h"
#include "tests/testing/hostile.h"
#include "tests/testing/scrape.h"
#include "tests/testing/soak.h"
#include "tests/testing/subprocess.h"

namespace fabric {
namespace {

namespace fs = std::filesystem;
using testing::Subprocess;

const std::string kAgent = testing::kAgentBinary;
const std::string kCtl = testing::kFabricctlBinary;

std::unique_ptr<grpc::ClientContext> Ctx(absl::Duration d = absl::Seconds(10)) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + absl::ToChronoNanoseconds(d));
  return ctx;
}

// A channel of its own (not shared with other channels to the same target), so that each
// stands for one connection.
std::shared_ptr<grpc::Channel> OwnChannel(const std::string& target) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
}

class AccessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("access_test");
    ASSERT_FALSE(dir_.empty());
    ASSERT_TRUE(testing::WriteExampleHost("roce-9port", dir_ + "/host").ok());
    socket_ = dir_ + "/run/agent.sock";
    // Other users must reach the socket's directory.
    fs::create_directories(dir_ + "/run");
    chmod(dir_.c_str(), 0755);
    chmod((dir_ + "/run").c_str(), 0755);
  }
  void TearDown() override {
    agent_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  void Start(std::vector<std::string> extra, std::vector<std::string> wrapper = {}) {
    std::vector<std::string> argv = wrapper;
    for (std::string a : {kAgent, "--socket=" + socket_, "--sysfs=" + dir_ + "/host/sys",
                          "--procfs=" + dir_ + "/host/proc"}) {
      argv.push_back(a);
    }
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto p = Subprocess::Start(argv);
    ASSERT_TRUE(p.ok()) << p.status();
    agent_ = *std::move(p);
    ASSERT_TRUE(Serving()) << agent_->Stderr();
  }

  // Waits until a fresh connection gets SERVING from the standard health service.
  bool Serving(absl::Duration timeout = absl::Seconds(20)) {
    return testing::WaitFor(
               [&] {
                 if (!agent_->running()) return true;
                 if (!testing::UnixSocketAccepts(socket_)) return false;
                 grpc::health::v1::HealthCheckRequest req;
                 req.set_service("fabric.v1.FabricAgent");
                 grpc::health::v1::HealthCheckResponse resp;
                 auto ctx = Ctx(absl::Milliseconds(500));
                 return grpc::health::v1::Health::NewStub(OwnChannel("unix:" + socket_))
                            ->Check(ctx.get(), req, &resp)
                            .ok() &&
                        resp.status() == grpc::health::v1::HealthCheckResponse::SERVING;
               },
               timeout) &&
           agent_->running();
  }

  // fabricctl against the agent, as `uid`:`gid` with `groups` (setpriv), or as root.
  testing::RunResult Ctl(std::vector<std::string> args, std::vector<std::string> as = {}) {
    std::vector<std::string> argv = as;
    argv.push_back(kCtl);
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back("--target=unix://" + socket_);
    auto r = testing::Run(argv, absl::Seconds(30));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : testing::RunResult{};
  }

  v1::Inventory Inventory() {
    v1::Inventory inv;
    auto ctx = Ctx();
    grpc::Status s =
        v1::FabricAgent::NewStub(OwnChannel("unix:" + socket_))->GetInventory(ctx.get(), {}, &inv);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return inv;
  }

  std::string dir_;
  std::string socket_;
  std::unique_ptr<Subprocess> agent_;
};

const std::vector<std::string> kNobody = {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534",
                                          "--clear-groups"};

TEST_F(AccessTest, ControlCallsNeedAnAllowedCallerReadsDoNot) {
  Start({"--socket-group=65534"});
  // Reads are open to whoever the socket admits.
  testing::RunResult read = Ctl({"inventory"}, kNobody);
  EXPECT_EQ(read.status, 0) << read.err;
  EXPECT_TRUE(absl::StrContains(read.out, "mlx5_1")) << read.out;
  testing::RunResult counters = Ctl({"counters", "--interval=0"}, kNobody);
  EXPECT_EQ(counters.status, 0) << counters.err;
  EXPECT_TRUE(absl::StrContains(counters.out, "counters/port_rcv_data")) << counters.out;
  // A control call from nobody is refused, with what is missing, and nothing runs.
  testing::RunResult denied = Ctl({"announce", "--container=c0ffee"}, kNobody);
  EXPECT_NE(denied.status, 0);
  EXPECT_TRUE(absl::StrContains(denied.err, "Announce is a control call")) << denied.err;
  EXPECT_TRUE(absl::StrContains(denied.err, "uid 65534 is not root")) << denied.err;
  EXPECT_TRUE(absl::StrContains(agent_->Stderr(), "denied Announce to uid 65534"))
      << agent_->Stderr();
  // Root passes the check: the agent itself then says it holds no such container.
  testing::RunResult root = Ctl({"announce", "--container=c0ffee"});
  EXPECT_NE(root.status, 0);
  EXPECT_FALSE(absl::StrContains(root.err, "control call")) << root.err;
  EXPECT_TRUE(absl::StrContains(root.err, "c0ffee")) << root.err;
}

TEST_F(AccessTest, ControlGroupMembersMayMakeControlCalls) {
  Start({"--socket-group=65534", "--control-group=4242"});
  testing::RunResult member =
      Ctl({"announce", "--container=c0ffee"},
          {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--groups=4242"});
  EXPECT_NE(member.status, 0);  // No such container, but not refused.
  EXPECT_FALSE(absl::StrContains(member.err, "control call")) << member.err;
  EXPECT_TRUE(absl::StrContains(member.err, "c0ffee")) << member.err;
  testing::RunResult other = Ctl({"announce", "--container=c0ffee"}, kNobody);
  EXPECT_TRUE(absl::StrContains(other.err, "--control-group=4242")) << other.err;
}

TEST_F(AccessTest, PlaintextTcpServesReadsOnly) {
  Start({"--listen=127.0.0.1:0"});
  std::optional<std::string> logged = testing::WaitForLogged(*agent_, "(port ", absl::Seconds(5));
  ASSERT_TRUE(logged.has_value()) << agent_->Stderr();
  const std::string port = logged->substr(0, logged->find_first_not_of("0123456789"));
  auto tcp = v1::FabricAgent::NewStub(OwnChannel("127.0.0.1:" + port));
  v1::Inventory inv;
  auto ctx = Ctx();
  ASSERT_TRUE(tcp->GetInventory(ctx.get(), {}, &inv).ok());
  v1::PortCountersResponse counters;
  ctx = Ctx();
  grpc::Status read = tcp->GetPortCounters(ctx.get(), {}, &counters);
  EXPECT_TRUE(read.ok()) << read.error_message();
  EXPECT_GT(counters.ports_size(), 0);
  v1::AnnounceRequest req;
  req.set_container_id("c0ffee");
  v1::AnnounceResponse resp;
  ctx = Ctx();
  grpc::Status s = tcp->Announce(ctx.get(), req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
  EXPECT_TRUE(absl::StrContains(s.error_message(), "reads only")) << s.error_message();
  v1::RunProbeRequest probe;
  probe.set_peer("127.0.0.1");
  v1::ProbeResult result;
  ctx = Ctx();
  s = tcp->RunProbe(ctx.get(), probe, &result);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
}

TEST_F(AccessTest, ConnectionsOverTheLimitAreToldWhy) {
  Start({"--max-connections=4"});
  std::vector<int> held;
  for (int i = 0; i < 4; ++i) {
    int fd = testing::ConnectTo("unix:" + socket_);
    ASSERT_GE(fd, 0);
    held.push_back(fd);
  }
  // Connections are accepted in order, so the next one is over the limit.
  v1::Inventory inv;
  auto ctx = Ctx();
  grpc::Status s =
      v1::FabricAgent::NewStub(OwnChannel("unix:" + socket_))->GetInventory(ctx.get(), {}, &inv);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_TRUE(absl::StrContains(s.error_message(), "--max-connections=4")) << s.error_message();
  for (int fd : held) close(fd);
  // Once they are gone, callers are served again.
  EXPECT_TRUE(Serving(absl::Seconds(10))) << agent_->Stderr();
}

TEST_F(AccessTest, WatchStreamsAreBoundedPerCallerAndInTotal) {
  Start({"--max-watches=3", "--max-watches-per-caller=2"});
  auto stub = v1::FabricAgent::NewStub(OwnChannel("unix:" + socket_));
  std::vector<std::unique_ptr<grpc::ClientContext>> ctxs;
  std::vector<std::unique_ptr<grpc::ClientReader<v1::InventoryEvent>>> streams;
  auto open = [&]() -> grpc::Status {
    ctxs.push_back(Ctx(absl::Seconds(30)));
    streams.push_back(stub->WatchInventory(ctxs.back().get(), {}));
    v1::InventoryEvent ev;
    if (streams.back()->Read(&ev)) return grpc::Status::OK;
    return streams.back()->Finish();
  };
  ASSERT_TRUE(open().ok());
  ASSERT_TRUE(open().ok());
  grpc::Status third = open();
  EXPECT_EQ(third.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << third.error_message();
  EXPECT_TRUE(absl::StrContains(third.error_message(), "--max-watches-per-caller=2"))
      << third.error_message();
  // Another caller still gets one; then the total bound holds for everyone.
  testing::RunResult other =
      Ctl({"watch", "--count=1", "--duration=10"},
          {"/usr/bin/setpriv", "--reuid=65534", "--regid=0", "--clear-groups"});
  EXPECT_EQ(other.status, 0) << other.err;
  ctxs[0]->TryCancel();
  (void)streams[0]->Finish();
  // The stream is released when the server sees the cancel.
  EXPECT_TRUE(testing::WaitFor([&] { return open().ok(); }, absl::Seconds(5)))
      << "a released stream frees its place";
}

TEST_F(AccessTest, FileDescriptorExhaustionNeitherStopsServingNorEmptiesTheInventory) {
#ifdef __SANITIZE_ADDRESS__
  // The sanitizer build also has UBSan, whose vptr check proves memory readable with a pipe(2):
  // under EMFILE that fails and a valid object is reported as "invalid vptr" (a suppression
  // cannot apply: the type is unknown then). The -Werror build runs this test.
  GTEST_SKIP() << "UBSan's vptr check cannot run without file descriptors";
#endif
  // A hard limit the agent cannot raise, and rescans twice a second while descriptors run out.
  Start({"--rescan-interval=0.5", "--metrics=127.0.0.1:0"},
        {"/usr/bin/prlimit", "--nofile=64:64", "--"});
  auto metrics = testing::WaitForLogged(*agent_, "metrics on http://127.0.0.1:", absl::Seconds(5));
  ASSERT_TRUE(metrics.has_value()) << agent_->Stderr();
  const int metrics_port = std::stoi(*metrics);
  const v1::Inventory before = Inventory();
  ASSERT_EQ(before.host().rdma_devices_size(), 9);
  std::vector<int> held;
  for (int i = 0; i < 120; ++i) {
    int fd = testing::ConnectTo("unix:" + socket_);
    if (fd >= 0) held.push_back(fd);
  }
  ASSERT_TRUE(testing::WaitFor(
      [&] { return absl::StrContains(agent_->Stderr(), "out of file descriptors"); },
      absl::Seconds(10)))
      << agent_->Stderr();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // Rescans while exhausted.
  (void)testing::HttpGet(metrics_port, "/metrics");  // The metrics listener meets EMFILE too.
  for (int fd : held) close(fd);
  ASSERT_TRUE(Serving(absl::Seconds(20))) << agent_->Stderr();
  const v1::Inventory after = Inventory();
  EXPECT_EQ(after.host().rdma_devices_size(), 9);
  EXPECT_EQ(after.generation(), before.generation()) << "a failed scan was published";
  EXPECT_FALSE(absl::StrContains(agent_->Stderr(), "DEVICE_REMOVED")) << agent_->Stderr();
  // Every listener accepts again: the metrics endpoint (libmicrohttpd) too.
  EXPECT_EQ(testing::HttpGet(metrics_port, "/metrics").first, "200 OK");
}

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;  // Quarantine and shadow memory: sizes are not comparable.
#else
constexpr bool kSanitized = false;
#endif

TEST_F(AccessTest, UndecodableAndOversizeRequestsAreRefusedForEveryMethod) {
  Start({});
  auto channel = OwnChannel("unix:" + socket_);
  // Field 0 with wire type 7: no protobuf message parses it.
  const std::string junk("\x07\xff\xff\xff", 4);
  grpc::Slice slice(junk.data(), junk.size());
  const grpc::ByteBuffer in(&slice, 1);
  const std::string huge((1 << 20) + 1, '\0');
  grpc::Slice huge_slice(huge.data(), huge.size());
  const grpc::ByteBuffer oversize(&huge_slice, 1);
  for (const char* m :
       {"GetInventory", "SelectNics", "Place", "GetHealth", "Ping", "Announce", "ListAnnouncements",
        "RunProbe", "ListProbeResults", "GetPortCounters", "Doctor"}) {
    const std::string path = absl::StrCat("/fabric.v1.FabricAgent/", m);
    grpc::internal::RpcMethod method(path.c_str(), grpc::internal::RpcMethod::NORMAL_RPC);
    grpc::ByteBuffer out;
    auto ctx = Ctx();
    grpc::Status s = grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
        channel.get(), method, ctx.get(), in, &out);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << m << ": " << s.error_message();
    EXPECT_TRUE(absl::StrContains(s.error_message(), "is not a valid fabric.v1."))
        << m << ": " << s.error_message();
    // Over the 1 MiB bound: refused before it is decoded.
    grpc::ByteBuffer big_out;
    auto big_ctx = Ctx();
    s = grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
        channel.get(), method, big_ctx.get(), oversize, &big_out);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
        << m << ": " << s.error_message();
  }
  grpc::internal::RpcMethod watch("/fabric.v1.FabricAgent/WatchInventory",
                                  grpc::internal::RpcMethod::SERVER_STREAMING);
  auto ctx = Ctx();
  std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>> reader(
      grpc::internal::ClientReaderFactory<grpc::ByteBuffer>::Create(channel.get(), watch, ctx.get(),
                                                                    in));
  grpc::ByteBuffer ev;
  EXPECT_FALSE(reader->Read(&ev));
  grpc::Status s = reader->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_TRUE(absl::StrContains(s.error_message(), "fabric.v1.WatchInventoryRequest"))
      << s.error_message();
  EXPECT_EQ(Inventory().host().rdma_devices_size(), 9) << "still serving";
}

TEST_F(AccessTest, AThousandWatchStreamsHoldNoThreadOfTheirOwn) {
  Start({"--max-watches=1100", "--max-watches-per-caller=1100"});
  const testing::ProcStats before = testing::ReadProcStats(agent_->pid());
  testing::ProcStats held;
  EXPECT_EQ(testing::HoldWatches("unix:" + socket_, 1000, agent_->pid(), &held), 1000);
  std::printf("1,000 watch streams: before %lld kB, %d threads; held %lld kB, %d threads\n",
              static_cast<long long>(before.rss_kb), before.threads,
              static_cast<long long>(held.rss_kb), held.threads);
  // A thread per stream was 1,017 threads and 755 MB for 4,000 streams.
  EXPECT_LT(held.threads, before.threads + 32);
  if (!kSanitized) {
    EXPECT_LT(held.rss_kb, before.rss_kb + 100 * 1024);
  }
  // The cancelled streams free their places: the bound still admits a new one.
  EXPECT_TRUE(testing::WaitFor(
      [&] { return testing::HoldWatches("unix:" + socket_, 1, agent_->pid(), &held) == 1; },
      absl::Seconds(10)));
  EXPECT_EQ(Inventory().host().rdma_devices_size(), 9);
}

TEST_F(AccessTest, ConnectionChurnAndRapidResetLeaveTheAgentServingAndBounded) {
  Start({});
  EXPECT_FALSE(absl::StrContains(agent_->Stderr(), "(relayed)")) << agent_->Stderr();
  const testing::ProcStats before = testing::ReadProcStats(agent_->pid());
  EXPECT_EQ(testing::ChurnConnections("unix:" + socket_, 3000), 3000);
  // The socket's connections are guarded on gRPC's own reads (read_guard.h), without the relay.
  auto sent = testing::RapidReset("unix:" + socket_, 20000, "/fabric.v1.FabricAgent/Ping");
  ASSERT_TRUE(sent.ok()) << sent.status();
  EXPECT_LT(*sent, 20000) << "the connection was not closed";
  EXPECT_TRUE(testing::WaitFor(
      [&] { return absl::StrContains(agent_->Stderr(), "rapid-reset budget"); }, absl::Seconds(5)))
      << agent_->Stderr();
  EXPECT_EQ(Inventory().host().rdma_devices_size(), 9) << agent_->Stderr();
  // Every connection is closed again.
  EXPECT_TRUE(
      testing::WaitFor([&] { return testing::ReadProcStats(agent_->pid()).fds <= before.fds + 2; },
                       absl::Seconds(10)))
      << testing::ReadProcStats(agent_->pid()).fds << " descriptors, " << before.fds << " before";
  const testing::ProcStats after = testing::ReadProcStats(agent_->pid());
  // Unguarded, 20,000 streams took gRPC 1.51 (no defence of its own before 1.57) to about 380 MB.
  if (!kSanitized) {
    EXPECT_LT(after.hwm_kb, before.rss_kb + 64 * 1024);
  }
  std::printf(
      "churn and rapid reset (%d of 20000 streams): RSS %lld -> peak %lld -> %lld kB, "
      "CPU %.2f s\n",
      *sent, static_cast<long long>(before.rss_kb), static_cast<long long>(after.hwm_kb),
      static_cast<long long>(after.rss_kb), after.cpu_s);
}

TEST_F(AccessTest, RelayedSocketKeepsEachCallersIdentityAndCutsARapidResetShort) {
  Start({"--socket-group=65534", "--relay-unix"});
  EXPECT_TRUE(absl::StrContains(agent_->Stderr(), "(relayed)")) << agent_->Stderr();
  testing::RunResult read = Ctl({"inventory"}, kNobody);
  EXPECT_EQ(read.status, 0) << read.err;
  testing::RunResult denied = Ctl({"announce", "--container=c0ffee"}, kNobody);
  EXPECT_TRUE(absl::StrContains(denied.err, "uid 65534 is not root")) << denied.err;
  testing::RunResult root = Ctl({"announce", "--container=c0ffee"});
  EXPECT_FALSE(absl::StrContains(root.err, "control call")) << root.err;
  EXPECT_TRUE(absl::StrContains(root.err, "c0ffee")) << root.err;

  const auto r = testing::RapidResetAgainst(agent_->pid(), "unix:" + socket_, 100000);
  ASSERT_TRUE(r.sent.ok()) << r.sent.status();
  EXPECT_LT(*r.sent, 100000) << "the connection was not closed";
  EXPECT_TRUE(testing::WaitFor(
      [&] { return absl::StrContains(agent_->Stderr(), "rapid-reset budget"); }, absl::Seconds(5)))
      << agent_->Stderr();
  std::printf("rapid reset over the relayed socket: %d of 100000 streams; peak RSS %lld kB\n",
              *r.sent, static_cast<long long>(r.after.hwm_kb));
  if (!kSanitized) {
    EXPECT_LT(r.after.hwm_kb, r.before.rss_kb + 64 * 1024);
  }
  EXPECT_EQ(Inventory().host().rdma_devices_size(), 9);
}

}  // namespace
}  // namespace fabric
