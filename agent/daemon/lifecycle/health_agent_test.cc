// The health monitor in the real fabric-agent on the dgx-h100-ib tree, whose counter files the
// test changes between polls (the tree seam): a link_downed increase is CRITICAL in GetHealth,
// the metrics (by code) and the NFD health label; the finding survives an agent restart with
// its first-seen time (the state directory), and a new boot ID starts clean.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "fabric/v1/agent.grpc.pb.h"
#include "tests/hosts/builder.h"
#include "tests/hosts/hosts.h"
#include "tests/testing/binaries.h"
#include "tests/testing/hostile.h"
#include "tests/testing/scrape.h"
#include "tests/testing/subprocess.h"

namespace fabric {
namespace {

namespace fs = std::filesystem;

constexpr char kCounter[] = "class/infiniband/mlx5_0/ports/1/counters/link_downed";
constexpr char kCode[] = "counter.link_downed";

class HealthAgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("health-agent");
    ASSERT_FALSE(dir_.empty());
    ASSERT_TRUE(testing::WriteExampleHost("dgx-h100-ib", dir_ + "/host").ok());
    fs::create_directories(dir_ + "/nfd");
    SetBootId("6f1d2a0e-0000-4000-8000-000000000001");
    // Polls five times a second: the test waits for polls, never sleeps a fixed time.
    std::ofstream(dir_ + "/config.json") << R"({"health": {"pollIntervalS": 0.2}})";
  }
  void TearDown() override {
    agent_.reset();
    fs::remove_all(dir_);
  }

  void SetBootId(const std::string& id) {
    fs::create_directories(dir_ + "/host/proc/sys/kernel/random");
    std::ofstream(dir_ + "/host/proc/sys/kernel/random/boot_id") << id << "\n";
  }
  void SetCounter(int value) { std::ofstream(dir_ + "/host/sys/" + kCounter) << value << "\n"; }

  void StartAgent(std::vector<std::string> flags = {}) {
    std::vector<std::string> argv = {testing::kAgentBinary,
                                     "--socket=" + dir_ + "/agent.sock",
                                     "--sysfs=" + dir_ + "/host/sys",
                                     "--procfs=" + dir_ + "/host/proc",
                                     "--config=" + dir_ + "/config.json",
                                     "--state-dir=" + dir_ + "/state",
                                     "--nfd-features-dir=" + dir_ + "/nfd",
                                     "--metrics=127.0.0.1:0",
                                     "--lldp=false",
                                     "--ib-neighbors=false",
                                     "--announce-socket=",
                                     "--rescan-interval=3600"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    auto agent = testing::Subprocess::Start(argv);
    ASSERT_TRUE(agent.ok()) << agent.status();
    agent_ = *std::move(agent);
    ASSERT_TRUE(testing::WaitForSocket(*agent_, dir_ + "/agent.sock")) << agent_->Stderr();
    std::optional<std::string> port =
        testing::WaitForLogged(*agent_, "metrics on http://127.0.0.1:", absl::Seconds(10));
    ASSERT_TRUE(port.has_value()) << agent_->Stderr();
    metrics_port_ = std::stoi(*port);
    stub_ = v1::FabricAgent::NewStub(
        grpc::CreateChannel("unix:" + dir_ + "/agent.sock", grpc::InsecureChannelCredentials()));
  }
  void StopAgent() {
    agent_->Signal(SIGTERM);
    EXPECT_EQ(agent_->Wait(absl::Seconds(20)), 0) << agent_->Stderr();
    agent_.reset();
  }

  v1::Health GetHealth() {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    v1::Health h;
    grpc::Status s = stub_->GetHealth(&ctx, {}, &h);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return h;
  }
  static std::optional<v1::Finding> Find(const v1::Health& h, const std::string& code) {
    for (const v1::Finding& f : h.findings()) {
      if (f.code() == code) return f;
    }
    return std::nullopt;
  }
  // Health once `pred` holds, or the last answer after 20 s.
  v1::Health WaitHealth(const std::function<bool(const v1::Health&)>& pred) {
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    v1::Health h = GetHealth();
    while (!pred(h) && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(50));
      h = GetHealth();
    }
    return h;
  }
  // Whether the monitor polled at least `n` times within 20 s (its metric says).
  bool WaitPolls(double n) {
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (absl::Now() < deadline) {
      auto [status, text] = testing::HttpGet(metrics_port_, "/metrics");
      if (status == "200 OK" && testing::Sample(text, "fabric_health_polls_total") >= n)
        return true;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return false;
  }
  std::string Nfd() {
    std::ifstream in(dir_ + "/nfd/fabric-agent");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  // The PCI address of an example device ("0000:3b:00.0"), from where the tree puts it.
  static std::string PciOf(const std::string& device) {
    auto spec = testing::ExampleHost("dgx-h100-ib");
    if (!spec.ok()) return "";
    auto path = testing::RdmaDevicePath(*spec, device);
    if (!path.ok()) return "";
    const std::string& p = *path;
    const size_t ib = p.rfind("/infiniband/");
    if (ib == std::string::npos || ib == 0) return "";
    const size_t start = p.rfind('/', ib - 1);
    return start == std::string::npos ? "" : p.substr(start + 1, ib - start - 1);
  }
  // Whether a finding of `code` about `subject` shows within 20 s.
  bool Shows(const std::string& code, const std::string& subject) {
    auto has = [&](const v1::Health& x) {
      for (const v1::Finding& f : x.findings()) {
        if (f.code() == code && f.subject() == subject) return true;
      }
      return false;
    };
    return has(WaitHealth(has));
  }

  // The agent's CPU time over two seconds in which nobody asks it anything (scraping the metrics
  // to wait would cost it more than its polls): a measuring window, not a wait for an event.
  struct IdleCost {
    double cpu_s = -1, wall_s = 0;
  };
  IdleCost MeasureIdle() {
    const testing::ProcStats before = testing::ReadProcStats(agent_->pid());
    const absl::Time t0 = absl::Now();
    absl::SleepFor(absl::Seconds(2));
    const testing::ProcStats after = testing::ReadProcStats(agent_->pid());
    IdleCost c;
    c.wall_s = absl::ToDoubleSeconds(absl::Now() - t0);
    if (before.cpu_s >= 0 && after.cpu_s >= 0) c.cpu_s = after.cpu_s - before.cpu_s;
    return c;
  }

  std::string dir_;
  std::unique_ptr<testing::Subprocess> agent_;
  std::unique_ptr<v1::FabricAgent::Stub> stub_;
  int metrics_port_ = 0;
};

TEST_F(HealthAgentTest, CounterBreachIsJudgedRememberedAcrossRestartAndForgottenOnANewBoot) {
  SetCounter(5);
  StartAgent();
  // The first poll is a baseline: a counter that is merely non-zero is no finding.
  v1::Health h = WaitHealth([](const v1::Health& x) { return x.verdict() == v1::SEVERITY_OK; });
  ASSERT_EQ(h.verdict(), v1::SEVERITY_OK) << h.ShortDebugString();
  EXPECT_TRUE(absl::StrContains(Nfd(), "rdma.fabric.io/health=ok\n")) << Nfd();
  ASSERT_TRUE(WaitPolls(1));  // The baseline is read.

  SetCounter(6);  // The link went down once: NVSentinel's fatal delta.
  h = WaitHealth([](const v1::Health& x) { return Find(x, kCode).has_value(); });
  std::optional<v1::Finding> f = Find(h, kCode);
  ASSERT_TRUE(f.has_value()) << h.ShortDebugString();
  EXPECT_EQ(f->severity(), v1::SEVERITY_CRITICAL);
  EXPECT_EQ(f->check(), "counter");
  EXPECT_EQ(f->subject(), "mlx5_0:1");
  EXPECT_TRUE(absl::StrContains(f->evidence(), "link_downed")) << f->evidence();
  EXPECT_NE(f->repair(), v1::REPAIR_ACTION_UNSPECIFIED);
  EXPECT_TRUE(f->has_first_seen());
  EXPECT_EQ(h.verdict(), v1::SEVERITY_CRITICAL);
  auto [status, text] = testing::HttpGet(metrics_port_, "/metrics");
  ASSERT_EQ(status, "200 OK");
  EXPECT_EQ(testing::Sample(text, R"(fabric_health_findings{check="counter",)"
                                  R"(code="counter.link_downed",severity="CRITICAL"})"),
            1)
      << text;
  EXPECT_EQ(testing::Sample(text, "fabric_health_status"), 2);
  const absl::Time nfd_deadline = absl::Now() + absl::Seconds(10);
  while (!absl::StrContains(Nfd(), "health=critical") && absl::Now() < nfd_deadline) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_TRUE(absl::StrContains(Nfd(), "rdma.fabric.io/health=critical\n")) << Nfd();
  const v1::Finding first = *f;
  StopAgent();
  EXPECT_TRUE(fs::exists(dir_ + "/state/health-memory.pb"));

  // A restart forgets nothing: the finding is there at once, first seen when it was.
  StartAgent();
  f = Find(GetHealth(), kCode);
  ASSERT_TRUE(f.has_value()) << "the restarted agent forgot the breach";
  EXPECT_EQ(f->first_seen().seconds(), first.first_seen().seconds());
  EXPECT_EQ(f->severity(), v1::SEVERITY_CRITICAL);
  StopAgent();

  // A reboot (a new boot ID) starts clean; the counter standing still breaks no rule.
  SetBootId("6f1d2a0e-0000-4000-8000-000000000002");
  StartAgent();
  ASSERT_TRUE(WaitPolls(2));
  h = GetHealth();
  EXPECT_FALSE(Find(h, kCode).has_value()) << h.ShortDebugString();
  EXPECT_THAT(agent_->Stderr(), ::testing::HasSubstr("of another boot"));
  StopAgent();
}

TEST_F(HealthAgentTest, ACorruptStateIsSaidAndRewritten) {
  fs::create_directories(dir_ + "/state");
  std::ofstream(dir_ + "/state/health-memory.pb") << "not a protobuf \xff\xff\xff";
  StartAgent();
  std::optional<v1::Finding> f = Find(GetHealth(), "health_state.corrupt");
  ASSERT_TRUE(f.has_value()) << agent_->Stderr();
  EXPECT_EQ(f->severity(), v1::SEVERITY_OK);  // The memory is lost; the hardware is not at fault.
  EXPECT_EQ(GetHealth().verdict(), v1::SEVERITY_OK);
  // Rewritten at the next save (the polls after start-up): a state this agent can load.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  v1::HealthMemoryState state;
  auto parsed = [&] {
    std::ifstream in(dir_ + "/state/health-memory.pb", std::ios::binary);
    return state.ParseFromIstream(&in) && !state.boot_id().empty();
  };
  while (!parsed() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(state.boot_id(), "6f1d2a0e-0000-4000-8000-000000000001");
  StopAgent();
}

// The kernel log through the agent, a FIFO standing in for /dev/kmsg (one record per write, as
// the device returns them): a driver's line about one of the host's NICs is a finding with its
// repair; the same line with a user facility (what `echo > /dev/kmsg` makes) is not.
TEST_F(HealthAgentTest, KernelLogLinesAboutItsNicsAreFindingsAndForgedOnesAreNot) {
  const std::string fifo = dir_ + "/kmsg";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  // Read-write: the test holds the FIFO open, so the agent never sees its writer leave.
  const int w = open(fifo.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(w, 0);
  StartAgent({"--kmsg=" + fifo});
  ASSERT_TRUE(WaitPolls(1));
  const std::string mlx5_0 = PciOf("mlx5_0"), mlx5_3 = PciOf("mlx5_3");
  ASSERT_FALSE(mlx5_0.empty());
  ASSERT_FALSE(mlx5_3.empty());
  auto write_record = [&](int prefix, int seq, const std::string& message) {
    const std::string r = absl::StrCat(prefix, ",", seq, ",", 1000 + seq, ",-;", message, "\n");
    return write(w, r.data(), r.size()) == static_cast<ssize_t>(r.size());
  };
  // Facility 1 (user), level 2: forged.
  ASSERT_TRUE(write_record(
      1 * 8 + 2, 1,
      "mlx5_core " + mlx5_3 + ": poll_health:801:(pid 0): device's health compromised"));
  ASSERT_TRUE(WaitPolls(3));  // read by now: the loop takes the FIFO between its polls
  // Facility 0 (kernel), level 2.
  ASSERT_TRUE(write_record(
      2, 2, "mlx5_core " + mlx5_0 + ": poll_health:801:(pid 0): device's health compromised"));
  ASSERT_TRUE(Shows("kmsg.health_poll_failed", "mlx5_0")) << agent_->Stderr();
  v1::Health h = GetHealth();
  EXPECT_EQ(h.verdict(), v1::SEVERITY_CRITICAL);
  for (const v1::Finding& f : h.findings()) {
    if (f.code() != "kmsg.health_poll_failed") continue;
    EXPECT_EQ(f.subject(), "mlx5_0") << "a forged line made a finding: " << f.ShortDebugString();
    EXPECT_EQ(f.repair(), v1::REPAIR_ACTION_REBOOT);
    EXPECT_TRUE(absl::StrContains(f.evidence(), mlx5_0)) << f.evidence();
  }
  auto [status, text] = testing::HttpGet(metrics_port_, "/metrics");
  EXPECT_EQ(testing::Sample(text, R"(fabric_health_kmsg_lines_total{device="watched"})"), 1);
  StopAgent();
  close(w);
}

// An unreadable kernel log is said (OK), and the verdict stays the host's.
TEST_F(HealthAgentTest, AnUnreadableKernelLogIsSaid) {
  StartAgent({"--kmsg=" + dir_ + "/no-such-kmsg"});
  ASSERT_TRUE(Shows("kmsg_access.unreadable", "kernel log"));
  EXPECT_EQ(GetHealth().verdict(), v1::SEVERITY_OK);
  StopAgent();
}

// Issue 51, bounded work: a --kmsg that is not the kernel log (/dev/zero and a regular file are
// always readable and never records) is refused when opened, said in health and the log, and the
// agent stays idle; before, its poll loop spun a core, silently. CPU time over a stretch of
// polls is measured from /proc (the loop at rest costs a few percent of one core under ASan).
TEST_F(HealthAgentTest, KmsgThatIsNotTheKernelLogIsRefusedAndTheAgentStaysIdle) {
  const std::string file = dir_ + "/kmsg-file";
  std::ofstream(file) << std::string(1 << 16, 'x');
  for (const std::string& source : {std::string("/dev/zero"), file}) {
    StartAgent({"--kmsg=" + source});
    v1::Health h = WaitHealth(
        [](const v1::Health& x) { return Find(x, "kmsg_access.unreadable").has_value(); });
    std::optional<v1::Finding> f = Find(h, "kmsg_access.unreadable");
    ASSERT_TRUE(f.has_value()) << source << ": " << agent_->Stderr();
    EXPECT_THAT(f->evidence(), ::testing::HasSubstr("not the kernel log")) << source;
    EXPECT_THAT(agent_->Stderr(), ::testing::HasSubstr("kernel log not read")) << source;
    ASSERT_TRUE(WaitPolls(2));
    const IdleCost cost = MeasureIdle();
    ASSERT_GE(cost.cpu_s, 0);
    EXPECT_LT(cost.cpu_s, 0.1 * cost.wall_s)
        << source << ": " << cost.cpu_s << " s of CPU in " << cost.wall_s << " s";
    StopAgent();
  }
}

// A FIFO whose writer left reads end-of-file and polls readable for ever: the agent reads what
// was written, counts the end (metrics, an OK finding, the log), closes it until a reopen after a
// back-off, and stays idle meanwhile.
TEST_F(HealthAgentTest, KmsgFifoWhoseWriterLeftIsCountedAndTheAgentStaysIdle) {
  const std::string fifo = dir_ + "/kmsg";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  StartAgent({"--kmsg=" + fifo});
  {
    // The agent holds the reading end by now (it opens the log before it serves).
    const int w = open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    ASSERT_GE(w, 0) << strerror(errno);
    // One write, one read: a malformed record, then the writer leaves.
    const std::string bad = "not a record\n";
    ASSERT_EQ(write(w, bad.data(), bad.size()), static_cast<ssize_t>(bad.size()));
    close(w);
  }
  v1::Health h =
      WaitHealth([](const v1::Health& x) { return Find(x, "kmsg_access.lost").has_value(); });
  std::optional<v1::Finding> f = Find(h, "kmsg_access.lost");
  ASSERT_TRUE(f.has_value()) << agent_->Stderr();
  EXPECT_EQ(f->severity(), v1::SEVERITY_OK);
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  std::string text;
  while (absl::Now() < deadline) {
    text = testing::HttpGet(metrics_port_, "/metrics").second;
    if (testing::Sample(text, R"(fabric_health_kmsg_lost_total{reason="source_ended"})") >= 1)
      break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_GE(testing::Sample(text, R"(fabric_health_kmsg_lost_total{reason="source_ended"})"), 1)
      << text;
  EXPECT_EQ(testing::Sample(text, R"(fabric_health_kmsg_records_total{result="read"})"), 1) << text;
  EXPECT_EQ(testing::Sample(text, R"(fabric_health_kmsg_lost_total{reason="malformed"})"), 1)
      << text;
  EXPECT_THAT(agent_->Stderr(), ::testing::HasSubstr("kernel log: records lost"));
  const IdleCost cost = MeasureIdle();
  ASSERT_GE(cost.cpu_s, 0);
  EXPECT_LT(cost.cpu_s, 0.1 * cost.wall_s) << cost.cpu_s << " s of CPU in " << cost.wall_s << " s";
  StopAgent();
}

}  // namespace
}  // namespace fabric
