// fabricctl against a running fabric-agent (its default mode): the same answers as local
// discovery on the same tree, health from the agent, and what happens when no agent answers.
#include <gmock/gmock.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "fabric/v1/agent.pb.h"
#include "fabric/v1/select.pb.h"
#include "tests/hosts/hosts.h"
#include "tests/testing/binaries.h"
#include "tests/testing/subprocess.h"

namespace fabric {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::RunResult;
using testing::Subprocess;

const std::string kAgent = testing::kAgentBinary;
const std::string kCtl = testing::kFabricctlBinary;
const std::string kProbe = testing::kProbeBinary;

class DaemonCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("fabricctl_daemon");
    ASSERT_FALSE(dir_.empty());
    socket_ = dir_ + "/agent.sock";
  }
  void TearDown() override {
    agent_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  void Start(const std::string& host) {
    ASSERT_TRUE(testing::WriteExampleHost(host, dir_ + "/" + host).ok());
    sysfs_ = "--sysfs=" + dir_ + "/" + host + "/sys";
    procfs_ = "--procfs=" + dir_ + "/" + host + "/proc";
    auto p = Subprocess::Start({kAgent, "--socket=" + socket_, sysfs_, procfs_});
    ASSERT_TRUE(p.ok());
    agent_ = *std::move(p);
    ASSERT_TRUE(testing::WaitForSocket(*agent_, socket_)) << agent_->Stderr();
    // Serving once the liveness check passes.
    ASSERT_TRUE(testing::WaitFor(
        [&] {
          return Ctl({"health", "--liveness"}).status == 0;
        },
        absl::Seconds(20)));
  }

  RunResult Ctl(std::vector<std::string> args) {
    args.insert(args.begin(), kCtl);
    if (args.size() > 1) args.insert(args.begin() + 2, "--target=unix://" + socket_);
    auto r = testing::Run(args, absl::Seconds(30));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : RunResult{};
  }
  RunResult Local(std::vector<std::string> args) {
    args.insert(args.begin(), kCtl);
    args.push_back(sysfs_);
    args.push_back(procfs_);
    auto r = testing::Run(args, absl::Seconds(30));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : RunResult{};
  }

  std::string dir_, socket_, sysfs_, procfs_;
  std::unique_ptr<Subprocess> agent_;
};

TEST_F(DaemonCliTest, SameAnswersAsLocalDiscovery) {
  Start("roce-9port");
  const std::vector<std::vector<std::string>> commands = {
      {"inventory"},
      {"topo"},
      {"select", "--gpus=0000:1a:00.0,3c:00.0"},
      {"env", "--gpus=all"},
      {"env", "--gpus=all", "--format=nccl-conf"},
      {"env", "--gpus=1a:00.0", "--format=json"},
      {"select", "--gpus=all", "--json"},
      {"select", "--gpus=all", "--brief"},
      {"place", "--count=2"},
      {"place", "--count=4", "--same-numa", "--json"},
  };
  for (const auto& cmd : commands) {
    RunResult remote = Ctl(cmd);
    RunResult local = Local(cmd);
    EXPECT_EQ(remote.status, 0) << cmd[0] << ": " << remote.err;
    EXPECT_EQ(remote.status, local.status) << cmd[0];
    // JSON too: map keys are sorted, so the agent's answer prints the same bytes.
    EXPECT_EQ(remote.out, local.out) << cmd[0] << " " << (cmd.size() > 1 ? cmd[1] : "");
    EXPECT_FALSE(remote.out.empty());
  }
}

TEST_F(DaemonCliTest, PlaceAndVersionAskTheAgent) {
  Start("roce-9port");
  RunResult place = Ctl({"place", "--count=2", "--one-nic-per-gpu", "--max=3"});
  ASSERT_EQ(place.status, 0) << place.err;
  // A header and three ranked sets, the best first.
  EXPECT_THAT(place.out, HasSubstr("RANK  GPUS"));
  EXPECT_THAT(place.out, HasSubstr("\n1  "));
  EXPECT_THAT(place.out, HasSubstr("\n3  "));
  EXPECT_THAT(place.out, Not(HasSubstr("\n4  ")));
  // Among candidates only, and more than there are: no set, exit 1, said in the output.
  RunResult none = Ctl({"place", "--count=3", "--gpus=1a:00.0,1e:00.0"});
  EXPECT_EQ(none.status, 1) << none.err;
  EXPECT_THAT(none.out, HasSubstr("no GPU set meets the request"));
  EXPECT_EQ(Ctl({"place", "--count=0"}).status, 2);
  EXPECT_EQ(Ctl({"place"}).status, 2);

  RunResult version = Ctl({"version"});
  ASSERT_EQ(version.status, 0) << version.err;
  EXPECT_THAT(version.out, HasSubstr("fabricctl " FABRIC_VERSION "\n"));
  EXPECT_THAT(version.out, HasSubstr("fabric-agent " FABRIC_VERSION " at unix://" + socket_));
  RunResult json = Ctl({"version", "--json"});
  EXPECT_THAT(json.out, HasSubstr("\"agent\": \"" FABRIC_VERSION "\""));
  agent_.reset();
  RunResult gone = Ctl({"version"});
  EXPECT_EQ(gone.status, 3);
  EXPECT_THAT(gone.out, HasSubstr("fabricctl " FABRIC_VERSION));
  EXPECT_THAT(gone.err, HasSubstr("is not running"));
  EXPECT_EQ(Ctl({"version", "--client"}).status, 0);
}

TEST_F(DaemonCliTest, ErrorsKeepTheirExitCodes) {
  Start("roce-9port");
  RunResult bad = Ctl({"select", "--gpus=zz:zz.z"});
  EXPECT_EQ(bad.status, 2) << bad.err;
  EXPECT_THAT(bad.err, HasSubstr("zz:zz.z"));
  RunResult unknown = Ctl({"select", "--gpus=0000:77:00.0"});
  EXPECT_EQ(unknown.status, 1) << unknown.err;
  EXPECT_THAT(unknown.err, HasSubstr("0000:77:00.0"));
  RunResult config = Ctl({"inventory", "--config=/etc/whatever.json"});
  EXPECT_EQ(config.status, 2);
  EXPECT_THAT(config.err, HasSubstr("--config applies to local discovery"));
}

// --gpus=visible against the agent: fabricctl sends its environment, the agent expands it.
TEST_F(DaemonCliTest, VisibleGpusGoToTheAgent) {
  Start("roce-9port");
  const char* vars[] = {"NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
                        "HIP_VISIBLE_DEVICES"};
  for (const char* v : vars) ::unsetenv(v);
  ::setenv("NVIDIA_VISIBLE_DEVICES", "2,5", 1);
  ::setenv("CUDA_VISIBLE_DEVICES", "1", 1);
  RunResult remote = Ctl({"select", "--gpus=visible"});
  RunResult local = Local({"select", "--gpus=visible"});
  EXPECT_EQ(remote.status, 0) << remote.err;
  EXPECT_EQ(remote.out, local.out);
  EXPECT_THAT(remote.out, HasSubstr("GPU 5 (0000:a0:00.0) -> mlx5_6:1"));
  ::setenv("NVIDIA_VISIBLE_DEVICES", "all", 1);
  remote = Ctl({"select", "--gpus=visible"});
  EXPECT_EQ(remote.status, 2) << remote.err;
  EXPECT_THAT(remote.err, HasSubstr("names no GPU"));
  ::setenv("NVIDIA_VISIBLE_DEVICES", "9", 1);
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  remote = Ctl({"select", "--gpus=visible"});
  EXPECT_EQ(remote.status, 1) << remote.err;
  for (const char* v : vars) ::unsetenv(v);
  remote = Ctl({"select", "--gpus=visible"});
  EXPECT_EQ(remote.status, 2) << remote.err;
  EXPECT_THAT(remote.err, HasSubstr("HIP_VISIBLE_DEVICES"));
}

TEST_F(DaemonCliTest, HealthComesFromTheAgent) {
  Start("many-hcas");  // One HCA's port is down: CRITICAL.
  RunResult remote = Ctl({"health"});
  RunResult local = Local({"health"});
  EXPECT_EQ(remote.status, 2) << remote.out;
  EXPECT_EQ(remote.out, local.out);
  EXPECT_THAT(remote.out, HasSubstr("CRITICAL port_state"));
  // A readiness probe that tolerates warnings still fails on CRITICAL; liveness passes.
  EXPECT_EQ(Ctl({"health", "--fail-on=critical"}).status, 2);
  RunResult live = Ctl({"health", "--liveness"});
  EXPECT_EQ(live.status, 0) << live.out;
  EXPECT_THAT(live.out, HasSubstr("FABRIC OK"));
  RunResult json = Ctl({"health", "--json"});
  EXPECT_EQ(json.status, 2);
  EXPECT_THAT(json.out, HasSubstr("\"verdict\": \"SEVERITY_CRITICAL\""));
}

TEST_F(DaemonCliTest, FailOnLetsLesserVerdictsPass) {
  Start("broken");  // Discovery problems and warnings, and a port in an unknown state.
  RunResult all = Ctl({"health"});
  ASSERT_NE(all.status, 0) << all.out;
  RunResult critical_only = Ctl({"health", "--fail-on=critical"});
  EXPECT_EQ(critical_only.status, all.status == 2 ? 2 : 0) << critical_only.out;
  EXPECT_EQ(critical_only.out, all.out) << "--fail-on changes the exit code, not the report";
}

TEST_F(DaemonCliTest, NoAgentIsCriticalForHealthAndUnreadableForQueries) {
  socket_ = dir_ + "/nobody-here.sock";
  for (const std::vector<std::string>& cmd : {std::vector<std::string>{"health"},
                                              {"health", "--liveness"},
                                              {"health", "--fail-on=critical"}}) {
    RunResult r = Ctl(cmd);
    EXPECT_EQ(r.status, 2) << r.out;
    EXPECT_THAT(r.out, HasSubstr("CRITICAL daemon"));
    EXPECT_THAT(r.out, HasSubstr("fabric-agent is not running at " + socket_));
  }
  RunResult inv = Ctl({"inventory", "--timeout=1"});
  EXPECT_EQ(inv.status, 3);
  EXPECT_THAT(inv.err, HasSubstr("is not running"));
  RunResult env = Ctl({"env", "--gpus=all", "--timeout=1"});
  EXPECT_EQ(env.status, 3);
}

TEST_F(DaemonCliTest, AgentStoppingMidwayIsReported) {
  Start("roce-9port");
  EXPECT_EQ(Ctl({"inventory"}).status, 0);
  agent_->Signal(SIGTERM);
  ASSERT_TRUE(agent_->Wait(absl::Seconds(5)).has_value());
  RunResult r = Ctl({"health"});
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.out, HasSubstr("CRITICAL daemon"));
}

// fabricctl probe asks the agent to run a test (here over TCP, against a fabric-probe
// responder), prints perftest's table or the result's JSON, and exits 1 when the test fails;
// fabricctl probes lists what the agent kept.
TEST_F(DaemonCliTest, ProbeAndProbes) {
  Start("roce-9port");
  auto responder = Subprocess::Start(
      {kProbe, "send_lat", "-p", "0", "--bind", "127.0.0.1", "--transport", "tcp", "--forever"});
  ASSERT_TRUE(responder.ok());
  std::optional<std::string> port =
      testing::WaitForLogged(**responder, "waiting for a client on port ", absl::Seconds(20));
  ASSERT_TRUE(port.has_value()) << (*responder)->Stderr();
  const std::string peer = "--peer=127.0.0.1:" + *port;

  RunResult r = Ctl({"probe", peer, "--test=send_lat", "--transport=tcp", "-n", "100"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("Send Latency Test  (over TCP: not an RDMA figure)"));
  EXPECT_THAT(r.out, HasSubstr("t_typical[usec]"));

  r = Ctl({"probe", peer, "--test=send_lat", "--transport=tcp", "-n", "50", "--json"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"t_typical_us\""));
  EXPECT_THAT(r.out, HasSubstr("\"transport\": \"tcp\""));

  // The responder serves send_lat only: it refuses, and the result says why (exit 1).
  r = Ctl({"probe", peer, "--test=write_bw", "--transport=tcp"});
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_THAT(r.err, HasSubstr("FAILED_PRECONDITION"));

  r = Ctl({"probes"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("responder: off"));
  EXPECT_THAT(r.out, HasSubstr("schedule: off"));
  EXPECT_THAT(r.out, HasSubstr("on-demand"));
  EXPECT_THAT(r.out, HasSubstr("send_lat"));
  EXPECT_THAT(r.out, HasSubstr("FAILED_PRECONDITION"));
  r = Ctl({"probes", "--test=write_bw", "--json"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"test\": \"write_bw\""));
  EXPECT_THAT(r.out, Not(HasSubstr("\"test\": \"send_lat\"")));

  // Usage errors: no peer, an unknown test, -n with -D.
  EXPECT_EQ(Ctl({"probe"}).status, 2);
  EXPECT_EQ(Ctl({"probe", peer, "--test=atomic_bw"}).status, 2);
  EXPECT_EQ(Ctl({"probe", peer, "-n", "5", "-D", "2"}).status, 2);
  // The agent has RDMA devices in its model but this machine has no verbs device: auto runs
  // over TCP, as fabric-probe does, and says so.
  std::error_code ec;
  if (fs::is_empty("/sys/class/infiniband", ec) || ec) {
    r = Ctl({"probe", peer, "--test=send_lat", "--step-timeout=2"});
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_THAT(r.out, HasSubstr("transport tcp: no RDMA device on this host"));
    r = Ctl({"probe", peer, "--test=send_lat", "--json"});
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_THAT(r.out, HasSubstr("\"transport_note\": \"no RDMA device on this host"));
  }
  // A named device still means RDMA: that test fails (no such device here), its result kept
  // under DEVICE "mlx5_1:1", which --device finds as the table spells it.
  r = Ctl({"probe", peer, "--test=send_lat", "-d", "mlx5_1", "-i", "1", "--step-timeout=2"});
  EXPECT_EQ(r.status, 1) << r.out;
  r = Ctl({"probes", "--device=mlx5_1:1"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("mlx5_1:1"));
  EXPECT_THAT(r.out, Not(HasSubstr("no results")));
  r = Ctl({"probes", "--device=mlx5_1:2"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("no results"));
  // Filters no row can match are usage errors naming what is accepted.
  r = Ctl({"probes", "--test=bogus"});
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_THAT(r.err, HasSubstr("--test: unknown test \"bogus\" (write_bw, write_lat, send_bw, "
                               "send_lat, read_bw, read_lat)"));
  r = Ctl({"probes", "--device=mlx5_1:x"});
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_THAT(r.err, HasSubstr("--device: \"mlx5_1:x\""));
}

// fabricctl probe against a port nothing listens on fails at once with the reason; --retry keeps
// trying for its seconds first.
TEST_F(DaemonCliTest, ProbeRefusedFailsFastUnlessRetried) {
  Start("roce-9port");
  absl::Time start = absl::Now();
  RunResult r = Ctl({"probe", "--peer=127.0.0.1:1", "--transport=tcp", "--step-timeout=10"});
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_LT(absl::Now() - start, absl::Seconds(6));  // a bound, well under the old 10 s
  EXPECT_THAT(r.err, HasSubstr("nothing listens on 127.0.0.1:1 (is the peer's responder "
                               "running?)"));
  start = absl::Now();
  r = Ctl({"probe", "--peer=127.0.0.1:1", "--transport=tcp", "--retry=2"});
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_GE(absl::Now() - start, absl::Seconds(2));
  EXPECT_THAT(r.err, HasSubstr("still, when the retries ran out"));
  EXPECT_EQ(Ctl({"probe", "--peer=127.0.0.1:1", "--retry=0"}).status, 2);
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  return s;
}
void WriteAll(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

// fabricctl counters through the agent: the agent reads its sysfs when asked (the same tables as
// local discovery), and rates come from two readings around a change of the files.
TEST_F(DaemonCliTest, CountersReadNowByTheAgentWithRates) {
  Start("roce-9port");
  for (const std::vector<std::string>& cmd :
       {std::vector<std::string>{"counters", "--interval=0"},
        {"counters", "--interval=0", "--all", "--device=mlx5_4"}}) {
    RunResult remote = Ctl(cmd);
    RunResult local = Local(cmd);
    EXPECT_EQ(remote.status, 0) << remote.err;
    EXPECT_EQ(remote.out, local.out);
  }
  RunResult unknown = Ctl({"counters", "--device=nope"});
  EXPECT_EQ(unknown.status, 1);
  EXPECT_THAT(unknown.err, HasSubstr("no RDMA device \"nope\" on this host (devices: mlx5_0"));
  EXPECT_EQ(Ctl({"counters", "--device=mlx5_0:7"}).status, 1);
  EXPECT_EQ(Ctl({"counters", "--interval=abc"}).status, 2);

  const std::string counters = dir_ + "/roce-9port/sys/class/infiniband/mlx5_0/ports/1/counters/";
  const uint64_t rcv = std::stoull(ReadAll(counters + "port_rcv_data"));
  const uint64_t xmit_packets = std::stoull(ReadAll(counters + "port_xmit_packets"));
  // The first reading is taken at once, the second 3 s later; the files change in between.
  auto ctl = Subprocess::Start({kCtl, "counters", "--target=unix://" + socket_, "--interval=3s",
                                "--device=mlx5_0:1", "--json"});
  ASSERT_TRUE(ctl.ok());
  absl::SleepFor(absl::Milliseconds(1200));
  const uint64_t words = 12'500'000'000;  // 100 Gb/s over 4 s, in 4-octet words.
  WriteAll(counters + "port_rcv_data", absl::StrCat(rcv + words, "\n"));
  WriteAll(counters + "port_xmit_packets", "5\n");  // A reset.
  ASSERT_EQ((*ctl)->Wait(absl::Seconds(20)), 0) << (*ctl)->Stderr();
  v1::PortCountersResponse r;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage((*ctl)->Stdout(), &r).ok())
      << (*ctl)->Stdout();
  ASSERT_EQ(r.ports_size(), 1);
  EXPECT_GE(r.interval_seconds(), 3.0);
  EXPECT_LT(r.interval_seconds(), 5.0);
  bool seen_rcv = false, seen_reset = false;
  for (const v1::CounterValue& c : r.ports(0).counters()) {
    if (c.name() == "port_rcv_data") {
      seen_rcv = true;
      EXPECT_EQ(c.value(), rcv + words);
      ASSERT_TRUE(c.has_per_second());
      EXPECT_NEAR(c.per_second(), words / r.interval_seconds(), 1);
    } else if (c.name() == "port_xmit_packets") {
      seen_reset = true;
      EXPECT_EQ(c.value(), 5u);
      EXPECT_FALSE(c.has_per_second());
    } else if (c.has_per_second()) {
      EXPECT_EQ(c.per_second(), 0) << c.name() << " did not change";
    }
  }
  EXPECT_TRUE(seen_rcv);
  EXPECT_TRUE(seen_reset);
  ASSERT_EQ(r.notes_size(), 1);
  EXPECT_THAT(r.notes(0), HasSubstr(absl::StrCat("mlx5_0:1 counters/port_xmit_packets went "
                                                 "backwards (",
                                                 xmit_packets, " -> 5)")));

  // The table of the same: the Gb/s in the header, the rate in its column.
  auto table = Subprocess::Start(
      {kCtl, "counters", "--target=unix://" + socket_, "--interval=2s", "--device=mlx5_0"});
  ASSERT_TRUE(table.ok());
  absl::SleepFor(absl::Milliseconds(1000));
  WriteAll(counters + "port_rcv_data", absl::StrCat(rcv + 2 * words, "\n"));
  ASSERT_EQ((*table)->Wait(absl::Seconds(20)), 0) << (*table)->Stderr();
  const std::string out = (*table)->Stdout();
  EXPECT_THAT(out, HasSubstr("1 port; rates over 2."));
  EXPECT_THAT(out, HasSubstr("mlx5_0:1  netdev eth0  rx "));
  EXPECT_THAT(out, Not(HasSubstr("rx 0.00 Gb/s")));
  EXPECT_THAT(out, HasSubstr("tx 0.00 Gb/s"));
  EXPECT_THAT(out, HasSubstr(absl::StrCat("  counters/port_rcv_data  ")));
  EXPECT_THAT(out, HasSubstr("VALUE  PER-SECOND"));
}

}  // namespace
}  // namespace fabric
