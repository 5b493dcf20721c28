// The real fabric-agent binary on example sysfs trees, driven over its socket: the API, watch
// streams, signals, reload, the socket's edge cases and the systemd notification protocol.
#include <arpa/inet.h>
#include <google/protobuf/util/message_differencer.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <thread>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "agent/policy/select/select.h"
#include "fabric/v1/agent.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "tests/hosts/builder.h"
#include "tests/hosts/hosts.h"
#include "tests/testing/binaries.h"
#include "tests/testing/scrape.h"
#include "tests/testing/subprocess.h"

namespace fabric {
namespace {

namespace fs = std::filesystem;
using testing::RunResult;
using testing::Subprocess;

const std::string kAgent = testing::kAgentBinary;

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

std::unique_ptr<grpc::ClientContext> Ctx(absl::Duration d = absl::Seconds(10)) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + absl::ToChronoNanoseconds(d));
  return ctx;
}

class AgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("daemon_test");
    ASSERT_FALSE(dir_.empty());
    ASSERT_TRUE(testing::WriteExampleHost("roce-9port", dir_ + "/host").ok());
    socket_ = dir_ + "/run/agent.sock";
  }
  void TearDown() override {
    agent_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  std::vector<std::string> Args(std::vector<std::string> extra = {}) {
    std::vector<std::string> a = {kAgent, "--socket=" + socket_, "--sysfs=" + dir_ + "/host/sys",
                                  "--procfs=" + dir_ + "/host/proc"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }

  // One SelectNics call on a context of its own.
  grpc::Status Select(const v1::SelectNicsRequest& req, v1::Selection* sel) {
    auto ctx = Ctx();
    return stub_->SelectNics(ctx.get(), req, sel);
  }

  // Starts the agent and waits until its FabricAgent service reports SERVING.
  void StartAgent(std::vector<std::string> extra = {}, std::vector<std::string> env = {}) {
    StartCommand(Args(std::move(extra)), std::move(env));
  }

  // StartAgent for a full command line (the agent's, possibly behind a wrapper).
  void StartCommand(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
    auto p = Subprocess::Start(argv, env);
    ASSERT_TRUE(p.ok()) << p.status();
    agent_ = *std::move(p);
    // Connect once the socket exists: a channel that failed early backs off for seconds.
    ASSERT_TRUE(testing::WaitForSocket(*agent_, socket_)) << agent_->Stderr();
    channel_ = grpc::CreateChannel("unix:" + socket_, grpc::InsecureChannelCredentials());
    stub_ = v1::FabricAgent::NewStub(channel_);
    bool serving = testing::WaitFor(
        [&] {
          if (!agent_->running()) return true;
          grpc::health::v1::HealthCheckRequest req;
          req.set_service("fabric.v1.FabricAgent");
          grpc::health::v1::HealthCheckResponse resp;
          auto ctx = Ctx(absl::Milliseconds(200));
          return grpc::health::v1::Health::NewStub(channel_)->Check(ctx.get(), req, &resp).ok() &&
                 resp.status() == grpc::health::v1::HealthCheckResponse::SERVING;
        },
        absl::Seconds(20));
    ASSERT_TRUE(serving) << agent_->Stderr();
    ASSERT_TRUE(agent_->running()) << "exited: " << agent_->Stderr();
  }

  std::string Sys(const std::string& rel) { return dir_ + "/host/sys/" + rel; }

  std::string dir_;
  std::string socket_;
  std::unique_ptr<Subprocess> agent_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::FabricAgent::Stub> stub_;
};

TEST_F(AgentTest, ServesInventorySelectionPlacementAndHealth) {
  StartAgent();
  v1::Inventory inv;
  auto ctx = Ctx();
  ASSERT_TRUE(stub_->GetInventory(ctx.get(), {}, &inv).ok());
  EXPECT_EQ(inv.host().rdma_devices_size(), 9);
  EXPECT_EQ(inv.generation(), 1u);
  EXPECT_GT(inv.discovered_at().seconds(), 0);
  // The host-wide pairing comes with the snapshot: one pair per GPU, computed once.
  ASSERT_EQ(inv.host().pairing().pairs_size(), 8);
  EXPECT_EQ(inv.host().pairing().pairs(0).gpu(), "0000:1a:00.0");
  EXPECT_EQ(inv.host().pairing().pairs(0).rdma_device(), "mlx5_1");

  v1::SelectNicsRequest req;
  req.add_gpus("0000:1a:00.0");
  req.add_gpus("1e:00.0");
  req.set_include_rejected(true);
  v1::Selection sel;
  ctx = Ctx();
  grpc::Status s = stub_->SelectNics(ctx.get(), req, &sel);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(sel.assignments_size(), 2);
  EXPECT_EQ(sel.assignments(0).rdma_device(), "mlx5_1");
  EXPECT_EQ(sel.assignments(1).rdma_device(), "mlx5_2");
  // The same answer as local selection on the same tree.
  auto local = SelectNics(inv.host(), {"0000:1a:00.0", "1e:00.0"}, {});
  ASSERT_TRUE(local.ok());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(sel, *local))
      << sel.ShortDebugString() << "\n"
      << local->ShortDebugString();
  EXPECT_EQ(sel.env().at("NCCL_IB_HCA"), "=mlx5_1:1,mlx5_2:1");
  // Without include_rejected (launchers), the same choice without the losing ports; a second
  // identical call (served from the snapshot's cache) answers the same.
  req.set_include_rejected(false);
  for (int i = 0; i < 2; ++i) {
    v1::Selection compact;
    ctx = Ctx();
    ASSERT_TRUE(stub_->SelectNics(ctx.get(), req, &compact).ok());
    v1::Selection want = *local;
    for (auto& a : *want.mutable_assignments()) a.clear_rejected();
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(compact, want)) << i;
  }

  v1::PlaceRequest preq;
  preq.set_gpu_count(2);
  v1::PlaceResponse placed;
  ctx = Ctx();
  ASSERT_TRUE(stub_->Place(ctx.get(), preq, &placed).ok());
  ASSERT_FALSE(placed.placements().empty());
  EXPECT_EQ(placed.placements(0).gpus_size(), 2);

  v1::Health health;
  ctx = Ctx();
  ASSERT_TRUE(stub_->GetHealth(ctx.get(), {}, &health).ok());
  EXPECT_NE(health.verdict(), v1::SEVERITY_UNSPECIFIED);

  struct stat sb;
  ASSERT_EQ(stat(socket_.c_str(), &sb), 0);
  EXPECT_EQ(sb.st_mode & 0777, 0660u);
}

TEST_F(AgentTest, InvalidRequestsNameTheBadValue) {
  StartAgent();
  struct Case {
    std::vector<std::string> gpus;
    grpc::StatusCode code;
    std::string needle;
  };
  const Case cases[] = {
      {{}, grpc::StatusCode::INVALID_ARGUMENT, "gpus is empty"},
      {{"not-a-pci-address"}, grpc::StatusCode::INVALID_ARGUMENT, "not-a-pci-address"},
      {{"0000:1a:00.0", "1a:00.0"}, grpc::StatusCode::INVALID_ARGUMENT, "1a:00.0"},
      {{"0000:77:00.0"}, grpc::StatusCode::NOT_FOUND, "0000:77:00.0"},
  };
  for (const Case& c : cases) {
    v1::SelectNicsRequest req;
    for (const auto& g : c.gpus) req.add_gpus(g);
    v1::Selection sel;
    auto ctx = Ctx();
    grpc::Status s = stub_->SelectNics(ctx.get(), req, &sel);
    EXPECT_EQ(s.error_code(), c.code) << s.error_message();
    EXPECT_TRUE(absl::StrContains(s.error_message(), c.needle)) << s.error_message();
  }
  v1::PlaceRequest preq;  // gpu_count 0
  v1::PlaceResponse placed;
  auto ctx = Ctx();
  grpc::Status s = stub_->Place(ctx.get(), preq, &placed);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(s.error_message(), "gpu_count")) << s.error_message();
}

// SelectNics by the caller's visible devices: names expanded by the agent, echoed as given.
TEST_F(AgentTest, SelectNicsByVisibleDevices) {
  StartAgent();
  v1::SelectNicsRequest req;
  req.mutable_visible()->set_nvidia_visible_devices("3,1");
  req.mutable_visible()->set_cuda_visible_devices("1");
  v1::Selection sel;
  grpc::Status s = Select(req, &sel);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(sel.assignments_size(), 1);
  EXPECT_EQ(sel.assignments(0).given(), "1");
  EXPECT_EQ(sel.assignments(0).gpu(), "0000:1e:00.0");

  req.add_gpus("0000:1a:00.0");  // names and visible: refused
  s = Select(req, &sel);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(s.error_message(), "give one of them")) << s.error_message();

  req.clear_gpus();
  req.mutable_visible()->set_nvidia_visible_devices("all");
  s = Select(req, &sel);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(s.error_message(), "names no GPU")) << s.error_message();

  // All GPUs: the agent lists them (RequestedGpus), without an inventory asked first; with
  // visible set too, refused.
  req.set_all(true);
  s = Select(req, &sel);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(s.error_message(), "give one of them")) << s.error_message();
  req.clear_visible();
  s = Select(req, &sel);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(sel.assignments_size(), 8);  // roce-9port's eight GPUs, in PCI order.
  EXPECT_EQ(sel.assignments(0).gpu(), "0000:1a:00.0");
  EXPECT_EQ(sel.assignments(0).given(), "0000:1a:00.0");
  EXPECT_EQ(sel.assignments(7).gpu(), "0000:c0:00.0");
}

TEST_F(AgentTest, WatchSeesPortGoDownAfterSighup) {
  StartAgent();
  auto ctx = Ctx(absl::Seconds(20));
  auto reader = stub_->WatchInventory(ctx.get(), {});
  v1::InventoryEvent first;
  ASSERT_TRUE(reader->Read(&first));
  EXPECT_EQ(first.inventory().generation(), 1u);
  EXPECT_TRUE(first.changes().empty());

  WriteFile(Sys("class/infiniband/mlx5_3/ports/1/state"), "1: DOWN\n");
  agent_->Signal(SIGHUP);  // Sysfs trees in a temp dir send no netlink events: ask for a rescan.
  v1::InventoryEvent next;
  ASSERT_TRUE(reader->Read(&next));
  EXPECT_EQ(next.inventory().generation(), 2u);
  bool saw = false;
  for (const auto& c : next.changes()) {
    if (c.kind() == v1::InventoryChange::KIND_PORT_STATE && c.subject() == "mlx5_3:1") {
      saw = true;
      EXPECT_EQ(c.old_value(), "ACTIVE");
      EXPECT_EQ(c.new_value(), "DOWN");
    }
  }
  EXPECT_TRUE(saw) << next.ShortDebugString().substr(0, 2000);
  ctx->TryCancel();
}

TEST_F(AgentTest, PeriodicRescanFindsAGidMove) {
  StartAgent({"--rescan-interval=0.2"});
  auto ctx = Ctx(absl::Seconds(20));
  auto reader = stub_->WatchInventory(ctx.get(), {});
  v1::InventoryEvent first;
  ASSERT_TRUE(reader->Read(&first));
  // Remove the port's RoCE v2 IPv4 GID at index 3 and put it at 5, as the kernel does when an
  // address is removed and added back.
  const std::string port = Sys("class/infiniband/mlx5_1/ports/1/");
  std::ifstream in(port + "gids/3");
  std::string gid;
  std::getline(in, gid);
  WriteFile(port + "gids/5", gid + "\n");
  WriteFile(port + "gid_attrs/types/5", "RoCE v2\n");
  WriteFile(port + "gid_attrs/ndevs/5", "eth1\n");
  WriteFile(port + "gids/3", "0000:0000:0000:0000:0000:0000:0000:0000\n");
  v1::InventoryEvent next;
  ASSERT_TRUE(reader->Read(&next));
  bool saw = false;
  for (const auto& c : next.changes()) {
    if (c.kind() == v1::InventoryChange::KIND_GID_TABLE && c.subject() == "mlx5_1:1") {
      saw = true;
      EXPECT_EQ(c.old_roce_v2_ipv4_gid_index(), 3u);
      EXPECT_EQ(c.new_roce_v2_ipv4_gid_index(), 5u);
    }
  }
  EXPECT_TRUE(saw) << next.ShortDebugString().substr(0, 2000);
  ctx->TryCancel();

  v1::Health health;
  auto hctx = Ctx();
  ASSERT_TRUE(stub_->GetHealth(hctx.get(), {}, &health).ok());
  bool reported = false;
  for (const auto& f : health.findings()) {
    reported = reported || (f.check() == "gid_table" && f.subject() == "mlx5_1:1");
  }
  EXPECT_TRUE(reported) << health.ShortDebugString();
}

TEST_F(AgentTest, SigtermExitsZeroWithinASecondAndRemovesTheSocket) {
  StartAgent();
  // A watch stream open at the time must not hold the exit up.
  auto ctx = Ctx(absl::Seconds(20));
  auto reader = stub_->WatchInventory(ctx.get(), {});
  v1::InventoryEvent first;
  ASSERT_TRUE(reader->Read(&first));
  const absl::Time start = absl::Now();
  agent_->Signal(SIGTERM);
  auto st = agent_->Wait(absl::Seconds(5));
  const absl::Duration took = absl::Now() - start;
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(*st, 0) << agent_->Stderr();
  EXPECT_LT(took, absl::Seconds(1)) << absl::FormatDuration(took);
  EXPECT_FALSE(fs::exists(socket_));
  EXPECT_FALSE(fs::exists(socket_ + ".lock"));
  v1::InventoryEvent more;
  EXPECT_FALSE(reader->Read(&more));
}

TEST_F(AgentTest, SigintExitsZero) {
  StartAgent();
  agent_->Signal(SIGINT);
  auto st = agent_->Wait(absl::Seconds(5));
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(*st, 0);
}

TEST_F(AgentTest, SighupReloadsTheConfigAndKeepsTheOldOneWhenBroken) {
  const std::string config = dir_ + "/config.json";
  WriteFile(config, R"({"selection": {}})");
  StartAgent({"--config=" + config});
  auto select = [&](std::string* device) {
    v1::SelectNicsRequest req;
    req.add_gpus("0000:1a:00.0");
    v1::Selection sel;
    auto ctx = Ctx();
    grpc::Status s = stub_->SelectNics(ctx.get(), req, &sel);
    if (!s.ok() || sel.assignments_size() != 1) return false;
    *device = sel.assignments(0).rdma_device();
    return true;
  };
  std::string dev;
  ASSERT_TRUE(select(&dev));
  EXPECT_EQ(dev, "mlx5_1");

  WriteFile(config, R"({"selection": {"deny": ["mlx5_1"]}})");
  agent_->Signal(SIGHUP);
  EXPECT_TRUE(testing::WaitFor([&] { return select(&dev) && dev != "mlx5_1"; }, absl::Seconds(10)))
      << dev;
  {  // The pairing follows the new policy: no GPU is paired with the denied device.
    v1::Inventory inv;
    auto ctx = Ctx();
    ASSERT_TRUE(stub_->GetInventory(ctx.get(), {}, &inv).ok());
    ASSERT_GT(inv.host().pairing().pairs_size(), 0);
    for (const v1::GpuPair& p : inv.host().pairing().pairs()) EXPECT_NE(p.rdma_device(), "mlx5_1");
  }

  WriteFile(config, "{not json");
  agent_->Signal(SIGHUP);
  EXPECT_TRUE(testing::WaitFor(
      [&] { return absl::StrContains(agent_->Stderr(), "keeping the previous config"); },
      absl::Seconds(10)))
      << agent_->Stderr();
  ASSERT_TRUE(select(&dev));
  EXPECT_NE(dev, "mlx5_1") << "a broken config must not undo the last good one";
  EXPECT_TRUE(agent_->running());
}

// As a Kubernetes ConfigMap volume updates it: the file is a link through "..data", and the
// kubelet swaps "..data" to a new directory by rename. Nobody sends SIGHUP in a pod.
TEST_F(AgentTest, ConfigMapStyleUpdateReloadsWithoutSighup) {
  const std::string vol = dir_ + "/configmap";
  fs::create_directories(vol + "/..2026_01");
  WriteFile(vol + "/..2026_01/config.json", R"({"selection": {}})");
  fs::create_directory_symlink("..2026_01", vol + "/..data");
  fs::create_symlink("..data/config.json", vol + "/config.json");
  StartAgent({"--config=" + vol + "/config.json"});
  auto device = [&] {
    v1::SelectNicsRequest req;
    req.add_gpus("0000:1a:00.0");
    v1::Selection sel;
    auto ctx = Ctx();
    if (!stub_->SelectNics(ctx.get(), req, &sel).ok() || sel.assignments_size() != 1)
      return std::string();
    return sel.assignments(0).rdma_device();
  };
  EXPECT_EQ(device(), "mlx5_1");
  fs::create_directories(vol + "/..2026_02");
  WriteFile(vol + "/..2026_02/config.json", R"({"selection": {"deny": ["mlx5_1"]}})");
  fs::create_directory_symlink("..2026_02", vol + "/..data_tmp");
  fs::rename(vol + "/..data_tmp", vol + "/..data");
  EXPECT_TRUE(testing::WaitFor([&] { return device() == "mlx5_2"; }, absl::Seconds(10)))
      << device() << "\n"
      << agent_->Stderr();
  EXPECT_TRUE(absl::StrContains(agent_->Stderr(), "(file changed)")) << agent_->Stderr();
}

TEST_F(AgentTest, CreatesAMissingSocketDirectory) {
  socket_ = dir_ + "/a/b/c/agent.sock";
  StartAgent();
  EXPECT_TRUE(fs::exists(socket_));
}

TEST_F(AgentTest, SocketDirectoryThatCannotExistIsAClearError) {
  WriteFile(dir_ + "/file", "x");
  socket_ = dir_ + "/file/agent.sock";
  auto r = testing::Run(Args(), absl::Seconds(20));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 1);
  EXPECT_TRUE(absl::StrContains(r->err, "cannot create the socket directory")) << r->err;
}

TEST_F(AgentTest, SecondInstanceOnTheSameSocketIsRefused) {
  StartAgent();
  auto r = testing::Run(Args(), absl::Seconds(20));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 1);
  EXPECT_TRUE(absl::StrContains(
      r->err, absl::StrCat("another fabric-agent (pid ", agent_->pid(), ") is serving")))
      << r->err;
  // The first one still serves.
  v1::Inventory inv;
  auto ctx = Ctx();
  EXPECT_TRUE(stub_->GetInventory(ctx.get(), {}, &inv).ok());
}

TEST_F(AgentTest, StaleSocketFromACrashIsReplaced) {
  StartAgent();
  agent_->Signal(SIGKILL);
  ASSERT_TRUE(agent_->Wait(absl::Seconds(5)).has_value());
  ASSERT_TRUE(fs::exists(socket_));  // Left behind, as after a crash.
  StartAgent();
  v1::Inventory inv;
  auto ctx = Ctx();
  EXPECT_TRUE(stub_->GetInventory(ctx.get(), {}, &inv).ok());
}

TEST_F(AgentTest, BadConfigAndUnreadableSysfsFailStartup) {
  WriteFile(dir_ + "/bad.json", R"({"selection": {"deny": 7}})");
  auto r = testing::Run(Args({"--config=" + dir_ + "/bad.json"}), absl::Seconds(20));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 2);
  EXPECT_TRUE(absl::StrContains(r->err, "bad.json")) << r->err;

  auto args = Args();
  args[2] = "--sysfs=" + dir_ + "/no-such-root";
  r = testing::Run(args, absl::Seconds(20));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 1);
  EXPECT_TRUE(absl::StrContains(r->err, "no-such-root")) << r->err;
  EXPECT_FALSE(fs::exists(socket_ + ".lock")) << "teardown must undo the lock step";
}

TEST_F(AgentTest, ServesTcpWhenAsked) {
  StartAgent({"--listen=127.0.0.1:0"});
  // The agent logs the port it got: "... and 127.0.0.1:0 (port 41234; ...)".
  std::optional<std::string> logged = testing::WaitForLogged(*agent_, "(port ", absl::Seconds(5));
  ASSERT_TRUE(logged.has_value()) << agent_->Stderr();
  const std::string port = logged->substr(0, logged->find_first_not_of("0123456789"));
  auto tcp = v1::FabricAgent::NewStub(
      grpc::CreateChannel("127.0.0.1:" + port, grpc::InsecureChannelCredentials()));
  v1::Inventory inv;
  auto ctx = Ctx();
  ASSERT_TRUE(tcp->GetInventory(ctx.get(), {}, &inv).ok());
  EXPECT_EQ(inv.host().rdma_devices_size(), 9);
}

using testing::HttpGet;
using testing::Sample;

TEST_F(AgentTest, MetricsFollowCountersEventsAndVanishedDevices) {
  const std::string port1 = "class/infiniband/mlx5_1/ports/1/";
  WriteFile(Sys(port1 + "counters/port_rcv_data"), "1000\n");  // 4-byte words
  WriteFile(Sys(port1 + "counters/link_downed"), "7\n");
  WriteFile(Sys(port1 + "hw_counters/np_cnp_sent"), "77\n");
  // The health monitor polls ten times a second: a vanished device is judged within a second.
  WriteFile(dir_ + "/health.json", R"({"health": {"pollIntervalS": 0.1}})");
  StartAgent({"--metrics=127.0.0.1:0", "--event-window=600", "--config=" + dir_ + "/health.json"});
  std::optional<std::string> logged =
      testing::WaitForLogged(*agent_, "metrics on http://127.0.0.1:", absl::Seconds(10));
  ASSERT_TRUE(logged.has_value()) << agent_->Stderr();
  const int port = std::stoi(*logged);
  auto [status, text] = HttpGet(port, "/metrics");
  ASSERT_EQ(status, "200 OK") << text;
  EXPECT_EQ(Sample(text, R"(fabric_port_data_received_bytes_total{device="mlx5_1",port="1"})"),
            4000);
  EXPECT_EQ(Sample(text, R"(fabric_port_link_downed_total{device="mlx5_1",port="1"})"), 7);
  EXPECT_EQ(
      Sample(text,
             R"(fabric_port_hw_counter_total{device="mlx5_1",port="1",counter="np_cnp_sent"})"),
      77);
  EXPECT_EQ(Sample(text, "fabric_rdma_devices"), 9);
  EXPECT_EQ(Sample(text, "fabric_inventory_generation"), 1);
  EXPECT_EQ(Sample(text, "fabric_health_status"), 0);
  EXPECT_EQ(
      Sample(
          text,
          R"(fabric_gpu_nic_distance{gpu="0000:1a:00.0",device="mlx5_1",port="1",distance="PIX"})"),
      1);
  EXPECT_EQ(Sample(text, R"(fabric_announce_frames_total{kind="arp"})"), 0);
  EXPECT_EQ(Sample(text, "fabric_scrape_dropped_samples"), 0);
  EXPECT_GE(Sample(text, "fabric_inventory_age_seconds"), 0);
  // Another implementation of the format accepts the whole scrape.
  auto checked = testing::Run(
      {"/usr/bin/python3", FABRIC_SOURCE_DIR "/agent/publish/metrics/exposition_check.py"},
      absl::Seconds(30), {}, text);
  ASSERT_TRUE(checked.ok());
  EXPECT_EQ(checked->status, 0) << checked->out << checked->err;
  EXPECT_EQ(HttpGet(port, "/nope").first, "404 Not Found");

  // A device gone from sysfs before any rescan: its series vanish, the scrape still works.
  const std::string away = dir_ + "/mlx5_4.away";
  fs::rename(Sys("class/infiniband/mlx5_4"), away);
  std::tie(status, text) = HttpGet(port, "/metrics");
  ASSERT_EQ(status, "200 OK");
  // (The inventory still lists it until a rescan: selection may still name it.)
  EXPECT_EQ(text.find("fabric_port_state_id{device=\"mlx5_4\""), std::string::npos);
  EXPECT_EQ(text.find("fabric_port_hw_counter_total{device=\"mlx5_4\""), std::string::npos);
  EXPECT_GT(Sample(text, R"(fabric_port_state_id{device="mlx5_1",port="1"})"), 0);
  fs::rename(away, Sys("class/infiniband/mlx5_4"));

  // A link flap and a removed device, as rescans see them, in the watch stream, the
  // inventory, health and metrics.
  auto ctx = Ctx(absl::Seconds(30));
  auto reader = stub_->WatchInventory(ctx.get(), {});
  v1::InventoryEvent ev;
  ASSERT_TRUE(reader->Read(&ev));
  const std::string state = Sys("class/infiniband/mlx5_2/ports/1/state");
  for (int i = 1; i <= 2; ++i) {
    WriteFile(state, "1: DOWN\n");
    agent_->Signal(SIGHUP);
    ASSERT_TRUE(reader->Read(&ev));
    ASSERT_EQ(ev.changes_size(), 1) << ev.ShortDebugString();
    EXPECT_EQ(ev.changes(0).kind(), v1::InventoryChange::KIND_PORT_STATE);
    EXPECT_EQ(ev.changes(0).subject(), "mlx5_2:1");
    EXPECT_EQ(ev.changes(0).count(), static_cast<uint64_t>(i));
    WriteFile(state, "4: ACTIVE\n");
    agent_->Signal(SIGHUP);
    ASSERT_TRUE(reader->Read(&ev));
    EXPECT_EQ(ev.changes(0).new_value(), "ACTIVE");
  }
  fs::rename(Sys("class/infiniband/mlx5_3"), dir_ + "/mlx5_3.away");
  agent_->Signal(SIGHUP);
  ASSERT_TRUE(reader->Read(&ev));
  EXPECT_EQ(ev.changes(0).kind(), v1::InventoryChange::KIND_DEVICE_REMOVED);
  ASSERT_EQ(ev.inventory().absent_devices_size(), 1);
  EXPECT_EQ(ev.inventory().absent_devices(0).name(), "mlx5_3");
  EXPECT_EQ(ev.inventory().absent_devices(0).ports_size(), 1);
  v1::Health health;
  std::set<std::string> checks;
  // Missing for three polls in a row: CRITICAL.
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        auto hctx = Ctx();
        checks.clear();
        if (!stub_->GetHealth(hctx.get(), {}, &health).ok()) return false;
        for (const v1::Finding& f : health.findings()) checks.insert(f.code() + " " + f.subject());
        return checks.count("device_missing.gone mlx5_3") > 0;
      },
      absl::Seconds(10)))
      << health.ShortDebugString();
  EXPECT_EQ(health.verdict(), v1::SEVERITY_CRITICAL);
  // The flaps, as the health monitor judged them when the publishes showed the port down.
  EXPECT_TRUE(checks.count("port_state.flap mlx5_2:1")) << health.ShortDebugString();
  std::tie(status, text) = HttpGet(port, "/metrics");
  EXPECT_EQ(Sample(text, R"(fabric_port_link_flaps_total{device="mlx5_2",port="1"})"), 2);
  EXPECT_EQ(Sample(text, R"(fabric_device_absent{device="mlx5_3",pci="0000:3d:00.0"})"), 1);
  EXPECT_EQ(Sample(text, "fabric_health_status"), 2);
  EXPECT_EQ(
      Sample(
          text,
          R"(fabric_health_findings{check="device_missing",code="device_missing.gone",severity="CRITICAL"})"),
      1);
  EXPECT_GE(Sample(text, "fabric_agent_rescans_total"), 6);

  // Back: no longer absent (the flaps stay counted).
  fs::rename(dir_ + "/mlx5_3.away", Sys("class/infiniband/mlx5_3"));
  agent_->Signal(SIGHUP);
  ASSERT_TRUE(reader->Read(&ev));
  EXPECT_EQ(ev.inventory().absent_devices_size(), 0);
  std::tie(status, text) = HttpGet(port, "/metrics");
  EXPECT_EQ(Sample(text, R"(fabric_device_absent{device="mlx5_3",pci="0000:3d:00.0"})"), -1);
  EXPECT_EQ(Sample(text, R"(fabric_port_link_flaps_total{device="mlx5_2",port="1"})"), 2);
  ctx->TryCancel();
}

TEST_F(AgentTest, MetricsAddressInUseFailsStartup) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  auto r = testing::Run(Args({absl::StrCat("--metrics=127.0.0.1:", ntohs(a.sin_port))}),
                        absl::Seconds(20));
  close(fd);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 1);
  EXPECT_TRUE(absl::StrContains(r->err, "--metrics=127.0.0.1:")) << r->err;
  EXPECT_FALSE(fs::exists(socket_)) << "teardown must remove the socket";
}

// A watch client that stops reading: the agent's write to it blocks (flow control), yet other
// watchers get every event, queries see the newest inventory at once, and after
// --watch-timeout the stuck stream is dropped.
TEST_F(AgentTest, StuckWatchClientBlocksNoOneAndIsDropped) {
  StartAgent({"--watch-timeout=2"});
  // A small receive window and no BDP probing (which would grow it to megabytes): the stream
  // blocks after an event or two instead of after dozens.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 16 * 1024);
  auto stuck_stub = v1::FabricAgent::NewStub(
      grpc::CreateCustomChannel("unix:" + socket_, grpc::InsecureChannelCredentials(), args));
  auto stuck_ctx = Ctx(absl::Seconds(60));
  auto stuck = stuck_stub->WatchInventory(stuck_ctx.get(), {});
  v1::InventoryEvent ev;
  ASSERT_TRUE(stuck->Read(&ev));  // ... and no more reads until the end
  auto live_ctx = Ctx(absl::Seconds(60));
  auto live = stub_->WatchInventory(live_ctx.get(), {});
  ASSERT_TRUE(live->Read(&ev));

  // Enough events to fill the stuck stream's flow-control window many times over (each event
  // carries the whole inventory).
  const std::string state = Sys("class/infiniband/mlx5_2/ports/1/state");
  uint64_t generation = ev.inventory().generation();
  absl::Duration slowest_query;
  for (int i = 0; i < 40; ++i) {
    WriteFile(state, i % 2 == 0 ? "1: DOWN\n" : "4: ACTIVE\n");
    agent_->Signal(SIGHUP);
    ASSERT_TRUE(live->Read(&ev)) << i;
    EXPECT_EQ(ev.inventory().generation(), generation + 1) << "the live watcher missed one";
    generation = ev.inventory().generation();
    const absl::Time start = absl::Now();
    v1::Inventory inv;
    auto ctx = Ctx(absl::Seconds(5));
    ASSERT_TRUE(stub_->GetInventory(ctx.get(), {}, &inv).ok());
    slowest_query = std::max(slowest_query, absl::Now() - start);
    EXPECT_EQ(inv.generation(), generation);
  }
  EXPECT_LT(slowest_query, absl::Seconds(1));
  ASSERT_TRUE(
      testing::WaitFor([&] { return absl::StrContains(agent_->Stderr(), "dropping watch client"); },
                       absl::Seconds(15)))
      << agent_->Stderr();
  // The stuck client finds what was buffered for it, then the end of the stream.
  int buffered = 0;
  while (stuck->Read(&ev)) ++buffered;
  EXPECT_LT(buffered, 40) << "the stream was never blocked: the test proves nothing";
  grpc::Status s = stuck->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::CANCELLED) << s.error_message();
  // The live watcher is still served.
  WriteFile(state, "1: DOWN\n");
  agent_->Signal(SIGHUP);
  ASSERT_TRUE(live->Read(&ev));
  EXPECT_EQ(ev.inventory().generation(), generation + 1);
  live_ctx->TryCancel();
}

// Probes between two agents on a host without RDMA (the TCP transport): agent B serves probes
// on a loopback port; agent A's config schedules tests against it, and RunProbe runs one now.
class AgentProbeTest : public AgentTest {
 protected:
  void SetUp() override {
    AgentTest::SetUp();
    std::error_code ec;
    fs::remove_all(Sys("class/infiniband"), ec);  // no RDMA: tests run over TCP
    ASSERT_FALSE(ec);
  }
  void TearDown() override {
    responder_.reset();
    AgentTest::TearDown();
  }
  // Starts agent B with a responder on 127.0.0.1 and returns "127.0.0.1:PORT". The schedules
  // here run far more tests a minute than the default rate limit allows.
  std::string StartResponder(std::vector<std::string> extra = {"--probe-rate=0"}) {
    std::vector<std::string> argv = {
        kAgent, "--socket=" + dir_ + "/b/agent.sock", "--sysfs=" + dir_ + "/host/sys",
        "--procfs=" + dir_ + "/host/proc", "--probe-listen=127.0.0.1:0"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto p = Subprocess::Start(argv);
    if (!p.ok()) {
      ADD_FAILURE() << p.status();
      return "";
    }
    responder_ = *std::move(p);
    std::optional<std::string> address =
        testing::WaitForLogged(*responder_, "probe responder on ", absl::Seconds(20));
    EXPECT_TRUE(address.has_value()) << responder_->Stderr();
    return address.value_or("");
  }
  v1::ListProbeResultsResponse List(v1::ListProbeResultsRequest req = {}) {
    v1::ListProbeResultsResponse out;
    auto ctx = Ctx();
    grpc::Status s = stub_->ListProbeResults(ctx.get(), req, &out);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return out;
  }

  std::unique_ptr<Subprocess> responder_;
};

TEST_F(AgentProbeTest, ScheduleAndOnDemandProbesAgainstAnotherAgent) {
  const std::string peer = StartResponder();
  ASSERT_TRUE(absl::StartsWith(peer, "127.0.0.1:")) << peer;
  WriteFile(dir_ + "/config.json",
            absl::StrCat(R"({"probes": {"peers": [")", peer,
                         R"("], "intervalSeconds": 1, "tests": ["write_bw", "read_lat"],
                         "iterations": 200, "history": 8, "timeoutSeconds": 2,
                         "memory": "gpu-dmabuf"}})"));
  StartAgent({"--config=" + dir_ + "/config.json"});

  // The schedule's first rounds: each test against B, over TCP, labelled so.
  v1::ListProbeResultsResponse list;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        list = List();
        return list.results_size() >= 4 && list.rounds() >= 2;
      },
      absl::Seconds(30)))
      << list.ShortDebugString() << agent_->Stderr();
  EXPECT_TRUE(list.schedule_enabled());
  EXPECT_EQ(list.responder(), "");  // A has none
  ASSERT_EQ(list.peers_size(), 1);
  EXPECT_EQ(list.peers(0), peer);
  EXPECT_GE(list.rounds(), 2u);
  std::set<std::string> tests;
  for (const v1::ProbeResult& r : list.results()) {
    EXPECT_TRUE(r.ok()) << r.ShortDebugString();
    EXPECT_EQ(r.source(), v1::ProbeResult::SOURCE_SCHEDULE);
    EXPECT_EQ(r.transport(), "tcp");
    EXPECT_EQ(r.peer(), peer);
    EXPECT_EQ(r.peer_address(), "127.0.0.1");
    EXPECT_EQ(r.iterations(), 200u);
    EXPECT_FALSE(r.has_fraction_of_rate());  // a TCP figure is never held against a port
    tests.insert(r.test());
    if (r.test() == "write_bw") {
      EXPECT_GT(r.bw_avg_gbps(), 0);
      EXPECT_FALSE(r.has_bw_peak_gbps());
      // GPU memory asked: over TCP there is none to use, and the result says why.
      EXPECT_EQ(r.memory(), "host memory: no RDMA device: the test runs over TCP");
    } else {
      EXPECT_GT(r.t_typical_us(), 0);
      EXPECT_EQ(r.memory(), "");  // latency tests poll host memory by design: nothing to say
    }
  }
  EXPECT_EQ(tests, (std::set<std::string>{"write_bw", "read_lat"}));
  EXPECT_GT(list.results(0).id(), list.results(1).id());  // newest first

  // On demand: a test the schedule does not run, kept with the rest.
  v1::RunProbeRequest req;
  req.set_peer(peer);
  req.set_test("send_lat");
  req.set_iterations(100);
  v1::ProbeResult r;
  // The schedule keeps probing B every second: a run that meets one of its rounds on B's
  // responder is refused as busy ("try again later"), and a client does just that.
  for (int attempt = 0; attempt < 10; ++attempt) {
    auto ctx = Ctx(absl::Seconds(60));
    r.Clear();
    grpc::Status s = stub_->RunProbe(ctx.get(), req, &r);
    ASSERT_TRUE(s.ok()) << s.error_message();
    if (r.error_code() != "RESOURCE_EXHAUSTED") break;
    absl::SleepFor(absl::Milliseconds(200));
  }
  EXPECT_TRUE(r.ok()) << r.ShortDebugString();
  EXPECT_EQ(r.source(), v1::ProbeResult::SOURCE_ON_DEMAND);
  EXPECT_EQ(r.test(), "send_lat");
  EXPECT_EQ(r.iterations(), 100u);
  v1::ListProbeResultsRequest only;
  only.set_test("send_lat");
  list = List(only);
  ASSERT_GE(list.results_size(), 1);
  EXPECT_EQ(list.results(0).id(), r.id());

  // The history is bounded by the config (8), and B counted what it served.
  EXPECT_LE(List().results_size(), 8);
  auto bch =
      grpc::CreateChannel("unix:" + dir_ + "/b/agent.sock", grpc::InsecureChannelCredentials());
  v1::ListProbeResultsResponse b;
  // B counts a test once its side is released, a moment after A has its result.
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        auto bctx = Ctx();
        return v1::FabricAgent::NewStub(bch)->ListProbeResults(bctx.get(), {}, &b).ok() &&
               b.responder_served() >= 5;
      },
      absl::Seconds(10)))
      << b.ShortDebugString();
  EXPECT_EQ(b.responder(), peer);
  EXPECT_FALSE(b.schedule_enabled());

  // A vanished peer is a failed result within the step bounds (the schedule's tests against it
  // may hold the device first, each failing after its own 2 s), not an RPC error or a hang.
  responder_->Signal(SIGKILL);
  (void)responder_->Wait(absl::Seconds(5));
  req.set_test("write_bw");
  req.set_timeout_seconds(2);
  auto ctx = Ctx(absl::Seconds(60));
  const absl::Time start = absl::Now();
  grpc::Status s = stub_->RunProbe(ctx.get(), req, &r);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.error_code(), "UNAVAILABLE") << r.ShortDebugString();
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
}

// The responder's guards through the agents: a shared secret (both agents; the file is read
// again for every test, so a changed one applies at once), the default allow-list and the rate
// limit, each refusal a result that says why.
TEST_F(AgentProbeTest, SecretAllowListAndRateLimit) {
  WriteFile(dir_ + "/b.secret", "s3cret\n");
  WriteFile(dir_ + "/a.secret", "s3cret");
  const std::string peer =
      StartResponder({"--probe-secret-file=" + dir_ + "/b.secret", "--probe-rate=2"});
  ASSERT_TRUE(absl::StartsWith(peer, "127.0.0.1:")) << peer;
  std::optional<std::string> allows =
      testing::WaitForLogged(*responder_, "probe responder allows ", absl::Seconds(5));
  ASSERT_TRUE(allows.has_value()) << responder_->Stderr();
  EXPECT_TRUE(absl::StrContains(*allows, "127.0.0.0/8")) << *allows;
  EXPECT_TRUE(absl::StrContains(*allows, "(this host's subnets; set --probe-allow to change)"))
      << *allows;
  EXPECT_TRUE(absl::StrContains(*allows, "at most 2 tests a minute per peer")) << *allows;
  StartAgent({"--probe-secret-file=" + dir_ + "/a.secret"});
  auto run = [&] {
    v1::RunProbeRequest req;
    req.set_peer(peer);
    req.set_test("write_lat");
    req.set_iterations(100);
    req.set_timeout_seconds(5);
    v1::ProbeResult r;
    auto ctx = Ctx(absl::Seconds(60));
    grpc::Status s = stub_->RunProbe(ctx.get(), req, &r);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return r;
  };
  v1::ProbeResult r = run();
  EXPECT_TRUE(r.ok()) << r.ShortDebugString();
  WriteFile(dir_ + "/a.secret", "another secret");
  r = run();
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.error_code(), "PERMISSION_DENIED") << r.ShortDebugString();
  EXPECT_TRUE(absl::StrContains(r.error(), "did not prove the shared secret"))
      << r.ShortDebugString();
  WriteFile(dir_ + "/a.secret", "s3cret");
  r = run();  // the third test from 127.0.0.1 this minute
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.error_code(), "RESOURCE_EXHAUSTED") << r.ShortDebugString();
  EXPECT_TRUE(absl::StrContains(r.error(), "rate limit: at most 2 tests a minute from 127.0.0.1"))
      << r.ShortDebugString();
}

TEST_F(AgentProbeTest, PeerOutsideTheAllowListIsARefusedResult) {
  const std::string peer = StartResponder({"--probe-allow=10.0.0.0/8,fd00::/8"});
  std::optional<std::string> allows =
      testing::WaitForLogged(*responder_, "probe responder allows ", absl::Seconds(5));
  ASSERT_TRUE(allows.has_value()) << responder_->Stderr();
  EXPECT_TRUE(absl::StartsWith(*allows, "10.0.0.0/8, fd00::/8, at most 6 tests")) << *allows;
  StartAgent();
  v1::RunProbeRequest req;
  req.set_peer(peer);
  req.set_test("write_lat");
  req.set_iterations(100);
  v1::ProbeResult r;
  auto ctx = Ctx(absl::Seconds(60));
  grpc::Status s = stub_->RunProbe(ctx.get(), req, &r);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.error_code(), "FAILED_PRECONDITION") << r.ShortDebugString();
  EXPECT_TRUE(absl::StrContains(r.error(), "does not serve 127.0.0.1 (not in its allow-list)"))
      << r.ShortDebugString();
}

// An agent probing its own responder is not "busy" to itself: its test holds the TCP lock, and
// its responder serves that very connection under the same hold.
TEST_F(AgentProbeTest, SelfProbeIsServed) {
  StartAgent({"--probe-listen=127.0.0.1:0", "--probe-rate=0"});
  std::optional<std::string> self =
      testing::WaitForLogged(*agent_, "probe responder on ", absl::Seconds(20));
  ASSERT_TRUE(self.has_value()) << agent_->Stderr();
  v1::RunProbeRequest req;
  req.set_peer(*self);
  req.set_test("write_lat");
  req.set_iterations(100);
  req.set_timeout_seconds(5);
  v1::ProbeResult r;
  auto ctx = Ctx(absl::Seconds(60));
  grpc::Status s = stub_->RunProbe(ctx.get(), req, &r);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(r.ok()) << r.ShortDebugString();
  EXPECT_EQ(r.transport(), "tcp");
  EXPECT_TRUE(testing::WaitFor([&] { return List().responder_served() >= 1; }, absl::Seconds(10)))
      << List().ShortDebugString();
}

// A port nothing listens on fails at once, as perftest does (the old client retried the refusal
// for its whole 10 s step timeout); retry_seconds keeps trying for that long, then says so.
TEST_F(AgentProbeTest, RefusedConnectionFailsFastUnlessRetried) {
  // A port that was just free.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const std::string peer = absl::StrCat("127.0.0.1:", ntohs(a.sin_port));
  close(fd);
  StartAgent();
  v1::RunProbeRequest req;
  req.set_peer(peer);
  req.set_test("write_lat");
  req.set_timeout_seconds(10);
  v1::ProbeResult r;
  auto ctx = Ctx(absl::Seconds(60));
  absl::Time start = absl::Now();
  grpc::Status s = stub_->RunProbe(ctx.get(), req, &r);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));  // a bound, well under the old 10 s
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.error_code(), "UNAVAILABLE") << r.ShortDebugString();
  EXPECT_TRUE(absl::StrContains(
      r.error(), absl::StrCat("nothing listens on ", peer, " (is the peer's responder running?)")))
      << r.ShortDebugString();

  req.set_retry_seconds(2);
  ctx = Ctx(absl::Seconds(60));
  start = absl::Now();
  s = stub_->RunProbe(ctx.get(), req, &r);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_GE(absl::Now() - start, absl::Seconds(2));
  EXPECT_LT(absl::Now() - start, absl::Seconds(9));
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.error(), "still, when the retries ran out"))
      << r.ShortDebugString();
  req.set_retry_seconds(301);
  ctx = Ctx();
  s = stub_->RunProbe(ctx.get(), req, &r);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
}

// peerDns names every agent, this one included: the name is resolved before each round and
// this host's own addresses are left out ("localhost" resolves to nothing else).
TEST_F(AgentProbeTest, DnsPeersLeaveThisHostOut) {
  WriteFile(dir_ + "/config.json", R"({"probes": {"peerDns": "localhost", "intervalSeconds": 1}})");
  StartAgent({"--config=" + dir_ + "/config.json"});
  v1::ListProbeResultsResponse list;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        list = List();
        return list.rounds() >= 2;
      },
      absl::Seconds(20)))
      << list.ShortDebugString();
  EXPECT_TRUE(list.schedule_enabled());
  EXPECT_EQ(list.peers_size(), 0) << list.ShortDebugString();
  EXPECT_EQ(list.peers_error(), "");
  EXPECT_EQ(list.results_size(), 0);
  EXPECT_TRUE(list.has_next_round());
}

TEST_F(AgentProbeTest, BadProbeRequestsAndConfigs) {
  // A schedule the agent cannot run is a bad config: exit 2, naming the key.
  WriteFile(dir_ + "/bad.json", R"({"probes": {"peers": ["10.0.0.2"], "tests": ["atomic_bw"]}})");
  auto r = testing::Run({kAgent, "--socket=" + socket_, "--sysfs=" + dir_ + "/host/sys",
                         "--config=" + dir_ + "/bad.json"},
                        absl::Seconds(20));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 2);
  EXPECT_TRUE(absl::StrContains(r->err, "probes.tests[0]")) << r->err;
  r = testing::Run({kAgent, "--socket=" + socket_, "--probe-listen=18515"}, absl::Seconds(20));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 2);
  EXPECT_TRUE(absl::StrContains(r->err, "--probe-listen")) << r->err;
  // The responder's guards: a bad network, an empty or missing secret file.
  WriteFile(dir_ + "/empty.secret", "\n");
  for (const std::string& flag :
       {std::string("--probe-allow=10.0.0.0/33"), "--probe-secret-file=" + dir_ + "/empty.secret",
        "--probe-secret-file=" + dir_ + "/missing.secret"}) {
    r = testing::Run({kAgent, "--socket=" + socket_, "--probe-listen=127.0.0.1:0", flag},
                     absl::Seconds(20));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, 2) << flag;
    EXPECT_TRUE(absl::StrContains(r->err, flag.substr(0, flag.find('=')))) << r->err;
  }

  StartAgent();
  struct Case {
    std::function<void(v1::RunProbeRequest*)> set;
    std::string needle;
  };
  const Case cases[] = {
      {[](v1::RunProbeRequest*) {}, "peer is required"},
      {[](v1::RunProbeRequest* q) { q->set_peer("a b"); }, "not a host"},
      {[](v1::RunProbeRequest* q) { q->set_peer("h:0"); }, "port"},
      {[](v1::RunProbeRequest* q) {
         q->set_peer("h");
         q->set_test("atomic_bw");
       },
       "atomic_bw"},
      {[](v1::RunProbeRequest* q) {
         q->set_peer("h");
         q->set_transport("ib");
       },
       "transport"},
      {[](v1::RunProbeRequest* q) {
         q->set_peer("h");
         q->set_iterations(5);
         q->set_duration_seconds(5);
       },
       "exclude"},
      {[](v1::RunProbeRequest* q) {
         q->set_peer("h");
         q->set_size(uint64_t{1} << 40);
       },
       "size"},
      {[](v1::RunProbeRequest* q) {
         q->set_peer("h");
         q->set_timeout_seconds(1000);
       },
       "timeout_seconds"},
      {[](v1::RunProbeRequest* q) {
         q->set_peer("h");
         q->set_remote_device("../x");
       },
       "not an RDMA device name"},
  };
  for (const Case& c : cases) {
    v1::RunProbeRequest req;
    c.set(&req);
    v1::ProbeResult out;
    auto ctx = Ctx();
    grpc::Status s = stub_->RunProbe(ctx.get(), req, &out);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << req.ShortDebugString();
    EXPECT_TRUE(absl::StrContains(s.error_message(), c.needle)) << s.error_message();
  }
  // No RDMA device here: asking for the rdma transport is a precondition, not a bad request.
  v1::RunProbeRequest req;
  req.set_peer("127.0.0.1");
  req.set_transport("rdma");
  v1::ProbeResult out;
  auto ctx = Ctx();
  grpc::Status s = stub_->RunProbe(ctx.get(), req, &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_FALSE(List().schedule_enabled());
}

// A throwaway network namespace, deleted with the test; its name stays empty when this machine
// cannot make one (not root, no `ip netns`).
class AgentNetnsTest : public AgentTest {
 protected:
  void TearDown() override {
    agent_.reset();
    if (!ns_.empty()) (void)testing::Run({"/usr/sbin/ip", "netns", "del", ns_});
    AgentTest::TearDown();
  }

  // Starts the agent inside a new namespace (StartAgent's checks fail the test); false (and a
  // reason in `skip_`) when no namespace can be made here.
  // `real_sysfs`: discover from the namespace's own /sys (ip netns exec mounts one showing the
  // namespace's netdevs) instead of the example tree.
  bool StartInNetns(const std::string& prefix, std::vector<std::string> extra,
                    bool real_sysfs = false) {
    if (geteuid() != 0) {
      skip_ = "needs root for a network namespace";
      return false;
    }
    const std::string ns = absl::StrCat(prefix, getpid());
    auto added = testing::Run({"/usr/sbin/ip", "netns", "add", ns});
    if (!added.ok() || added->status != 0) {
      skip_ = "ip netns add failed: " + (added.ok() ? added->err : std::string());
      return false;
    }
    ns_ = ns;
    std::vector<std::string> args;
    if (real_sysfs) {
      // The host's own sysfs, but the test's state directory: the machine's stays untouched.
      args = {kAgent, "--socket=" + socket_, "--sysfs=/sys", "--procfs=/proc",
              "--state-dir=" + dir_ + "/state"};
      args.insert(args.end(), extra.begin(), extra.end());
    } else {
      args = Args(std::move(extra));
    }
    args.insert(args.begin(), {"/usr/sbin/ip", "netns", "exec", ns_});
    StartCommand(args, {});
    return true;
  }

  RunResult InNetns(std::vector<std::string> cmd) {
    cmd.insert(cmd.begin(), {"/usr/sbin/ip", "-n", ns_});
    auto r = testing::Run(cmd, absl::Seconds(60));
    return r.ok() ? *r : RunResult{};
  }

  std::string ns_;
  std::string skip_;
};

// Real route netlink: the agent runs in a throwaway network namespace with a safety-net rescan
// an hour away, so only events can make it refresh. Each step makes real netlink changes (veths
// created, renamed, moved to another namespace and back, deleted; addresses added), some with
// the example tree changing beneath as the kernel would change sysfs. An unrelated veth costs a
// skipped refresh; a netdev named like a port's refreshes that device alone; and a final SIGHUP
// rescan in full finds nothing the targeted refreshes had missed.
TEST_F(AgentNetnsTest, RouteNetlinkEventsRefreshWhatTheyNameAndNothingElse) {
  if (!StartInNetns("fabric-dt-",
                    {"--rescan-interval=3600", "--log-level=debug", "--metrics=127.0.0.1:0"})) {
    GTEST_SKIP() << skip_;
  }
  ASSERT_FALSE(HasFatalFailure());
  std::optional<std::string> logged =
      testing::WaitForLogged(*agent_, "metrics on http://127.0.0.1:", absl::Seconds(10));
  ASSERT_TRUE(logged.has_value()) << agent_->Stderr();
  const int port = std::stoi(*logged);
  // The metrics listen inside the namespace (whose loopback starts down): scrape from there.
  ASSERT_EQ(InNetns({"link", "set", "lo", "up"}).status, 0);
  auto metric = [&](const std::string& series) {
    auto r = testing::Run({"/usr/sbin/ip", "netns", "exec", ns_, "/usr/bin/python3", "-c",
                           absl::StrCat("import urllib.request; print(urllib.request.urlopen("
                                        "'http://127.0.0.1:",
                                        port, "/metrics').read().decode())")});
    return r.ok() && r->status == 0 ? Sample(r->out, series) : -1;
  };
  auto ctx = Ctx(absl::Seconds(60));
  auto reader = stub_->WatchInventory(ctx.get(), {});
  v1::InventoryEvent ev;
  ASSERT_TRUE(reader->Read(&ev)) << agent_->Stderr();
  auto ip = [&](std::vector<std::string> cmd) {
    RunResult r = InNetns(std::move(cmd));
    EXPECT_EQ(r.status, 0) << r.err;
  };
  auto next_change = [&](v1::InventoryChange::Kind kind, const std::string& subject) {
    EXPECT_TRUE(reader->Read(&ev)) << agent_->Stderr();
    bool saw = false;
    for (const auto& c : ev.changes()) saw = saw || (c.kind() == kind && c.subject() == subject);
    EXPECT_TRUE(saw) << ev.ShortDebugString().substr(0, 2000);
  };

  const std::string kTargeted = R"(fabric_agent_refreshes_total{kind="targeted"})";
  const std::string kSkipped = R"(fabric_agent_refreshes_total{kind="skipped"})";
  const std::string kFull = R"(fabric_agent_refreshes_total{kind="full"})";
  // After each step: its events were handled (the refresh counters stop moving), then a full
  // rescan (SIGHUP) finds nothing the targeted refreshes had missed.
  auto settled = [&](const std::string& step, double before) {
    double now = -1, last = -2;
    EXPECT_TRUE(testing::WaitFor(
        [&] {
          last = now;
          now = metric(kTargeted) + metric(kSkipped);
          if (now > before && now == last) return true;
          absl::SleepFor(absl::Milliseconds(150));
          return false;
        },
        absl::Seconds(15)))
        << step << "\n"
        << agent_->Stderr();
    const double full = metric(kFull);
    agent_->Signal(SIGHUP);
    EXPECT_TRUE(testing::WaitFor([&] { return metric(kFull) > full; }, absl::Seconds(10)));
    EXPECT_EQ(metric("fabric_agent_refresh_drift_total"), 0) << step << "\n" << agent_->Stderr();
  };

  // A pod's veth with an address: nothing in the inventory depends on it.
  double before = metric(kTargeted) + metric(kSkipped);
  ip({"link", "add", "rbpod0", "type", "veth", "peer", "name", "rbpod1"});
  ip({"addr", "add", "10.99.0.1/24", "dev", "rbpod0"});
  ip({"link", "set", "rbpod0", "up"});
  settled("pod veth", before);
  EXPECT_GE(metric(kSkipped), 1);
  EXPECT_EQ(metric(kTargeted), 0) << agent_->Stderr();

  // mlx5_4's port goes down in the tree; a netdev named like its port's (eth4) appears.
  before = metric(kTargeted) + metric(kSkipped);
  WriteFile(Sys("class/infiniband/mlx5_4/ports/1/state"), "1: DOWN\n");
  ip({"link", "add", "eth4", "type", "veth", "peer", "name", "eth4p"});
  next_change(v1::InventoryChange::KIND_PORT_STATE, "mlx5_4:1");
  EXPECT_TRUE(absl::StrContains(agent_->Stderr(), "targeted refresh of ")) << agent_->Stderr();
  settled("port down", before);

  // An address on eth3, and the GID the kernel adds for it; then a route through eth3.
  before = metric(kTargeted) + metric(kSkipped);
  ip({"link", "add", "eth3", "type", "veth", "peer", "name", "eth3p"});
  ip({"link", "set", "eth3", "up"});
  const std::string gids = "class/infiniband/mlx5_3/ports/1/";
  WriteFile(Sys(gids + "gids/9"), testing::Ipv4MappedGid("10.9.0.3") + "\n");
  WriteFile(Sys(gids + "gid_attrs/types/9"), "RoCE v2\n");
  WriteFile(Sys(gids + "gid_attrs/ndevs/9"), "eth3\n");
  ip({"addr", "add", "10.9.0.3/24", "dev", "eth3"});
  next_change(v1::InventoryChange::KIND_GID_TABLE, "mlx5_3:1");
  settled("address and GID", before);
  before = metric(kTargeted) + metric(kSkipped);
  ip({"route", "add", "10.50.0.0/16", "dev", "eth3"});
  ip({"route", "del", "10.50.0.0/16", "dev", "eth3"});
  settled("route added and removed", before);

  // Renamed, moved to another namespace and back: events for a name the inventory holds, one
  // it does not, and a netdev that leaves and comes back.
  before = metric(kTargeted) + metric(kSkipped);
  const std::string other = ns_ + "-b";
  ASSERT_EQ(testing::Run({"/usr/sbin/ip", "netns", "add", other})->status, 0);
  ip({"link", "set", "eth3", "name", "eth3r"});
  ip({"link", "set", "eth3r", "netns", other});
  RunResult back = *testing::Run(
      {"/usr/sbin/ip", "-n", other, "link", "set", "eth3r", "netns", ns_, "name", "eth3"});
  EXPECT_EQ(back.status, 0) << back.err;
  (void)testing::Run({"/usr/sbin/ip", "netns", "del", other});
  settled("renamed, moved out and back", before);

  // An RDMA device leaves the tree with its netdev, and comes back.
  before = metric(kTargeted) + metric(kSkipped);
  ip({"link", "add", "eth7", "type", "veth", "peer", "name", "eth7p"});
  settled("eth7 created", before);
  before = metric(kTargeted) + metric(kSkipped);
  const std::string link = Sys("class/infiniband/mlx5_7");
  const std::string target = fs::read_symlink(link).string();
  const std::string real = fs::canonical(link).string();
  fs::rename(real, dir_ + "/mlx5_7.away");
  fs::remove(link);
  ip({"link", "del", "eth7"});
  next_change(v1::InventoryChange::KIND_DEVICE_REMOVED, "mlx5_7");
  settled("device removed", before);
  before = metric(kTargeted) + metric(kSkipped);
  fs::rename(dir_ + "/mlx5_7.away", real);
  fs::create_symlink(target, link);
  ip({"link", "add", "eth7", "type", "veth", "peer", "name", "eth7p"});
  next_change(v1::InventoryChange::KIND_DEVICE_ADDED, "mlx5_7");
  settled("device back", before);

  before = metric(kTargeted) + metric(kSkipped);
  ip({"link", "del", "eth3"});
  ip({"link", "del", "rbpod0"});
  settled("deleted", before);
  EXPECT_FALSE(absl::StrContains(agent_->Stderr(), "found what no event announced"))
      << agent_->Stderr();

  // A change no event announces is what the drift counts.
  WriteFile(Sys("class/infiniband/mlx5_6/ports/1/state"), "1: DOWN\n");
  agent_->Signal(SIGHUP);
  next_change(v1::InventoryChange::KIND_PORT_STATE, "mlx5_6:1");
  EXPECT_EQ(metric("fabric_agent_refresh_drift_total"), 1);
  ctx->TryCancel();
}

// A burst of link changes overruns a small netlink buffer: the agent resyncs in full and ends
// on the tree's final state.
TEST_F(AgentNetnsTest, NetlinkOverflowTriggersAFullResync) {
  if (!StartInNetns("fabric-ov-", {"--rescan-interval=3600", "--netlink-rcvbuf=4096"})) {
    GTEST_SKIP() << skip_;
  }
  ASSERT_FALSE(HasFatalFailure());
  WriteFile(Sys("class/infiniband/mlx5_6/ports/1/state"), "1: DOWN\n");
  // 150 veth pairs in one batch: about 300 RTM_NEWLINK messages at once.
  std::string batch;
  for (int i = 0; i < 150; ++i)
    absl::StrAppend(&batch, "link add ova", i, " type veth peer name ovb", i, "\n");
  WriteFile(dir_ + "/batch", batch);
  // The agent is stopped during the burst, so the overflow does not depend on who wins the CPU
  // (`ip netns exec` execs the agent: same pid).
  agent_->Signal(SIGSTOP);
  RunResult burst = InNetns({"-batch", dir_ + "/batch"});
  agent_->Signal(SIGCONT);
  ASSERT_EQ(burst.status, 0) << burst.err;
  EXPECT_TRUE(testing::WaitFor(
      [&] { return absl::StrContains(agent_->Stderr(), "overflowed (ENOBUFS): full resync"); },
      absl::Seconds(10)))
      << agent_->Stderr();
  // Converged: the port state written before the burst is served.
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        v1::Inventory inv;
        auto ctx = Ctx();
        if (!stub_->GetInventory(ctx.get(), {}, &inv).ok()) return false;
        for (const auto& d : inv.host().rdma_devices()) {
          if (d.name() == "mlx5_6") return d.ports(0).state() == v1::PORT_STATE_DOWN;
        }
        return false;
      },
      absl::Seconds(10)));
}

// A netlink storm: hundreds of veth pairs created, most deleted again, more created, each burst
// while the agent cannot read (its socket overflows). The agent discovers the namespace's real
// /sys and /proc; of these netdevs the host model keeps the front-end one (the default route's,
// with its connected subnet), so the default route moves with the storm and the inventory must
// end up exactly where the kernel is.
TEST_F(AgentNetnsTest, NetlinkStormConvergesToTheExactFinalState) {
  if (!StartInNetns("fabric-st-", {"--rescan-interval=3600", "--netlink-rcvbuf=8192"}, true)) {
    GTEST_SKIP() << skip_;
  }
  ASSERT_FALSE(HasFatalFailure());
  auto burst = [&](const std::string& name, const std::string& commands) {
    WriteFile(dir_ + "/" + name, commands);
    agent_->Signal(SIGSTOP);
    RunResult r = InNetns({"-batch", dir_ + "/" + name});
    agent_->Signal(SIGCONT);
    EXPECT_EQ(r.status, 0) << name << ": " << r.err;
  };
  // The agent's view: {default-route netdevs, "name subnet,subnet" of each netdev}.
  auto served = [&]() {
    v1::Inventory inv;
    auto ctx = Ctx();
    std::vector<std::string> out;
    if (!stub_->GetInventory(ctx.get(), {}, &inv).ok()) return out;
    for (const auto& n : inv.host().default_route_netdevs()) out.push_back("default " + n);
    for (const auto& n : inv.host().netdevs()) {
      out.push_back(absl::StrCat(n.name(), " ", absl::StrJoin(n.ipv4_subnets(), ",")));
    }
    return out;
  };
  auto converges_to = [&](const std::vector<std::string>& want) {
    std::vector<std::string> got;
    const bool ok = testing::WaitFor(
        [&] {
          got = served();
          return got == want;
        },
        absl::Seconds(30));
    EXPECT_TRUE(ok) << "served " << ::testing::PrintToString(got) << ", kernel "
                    << ::testing::PrintToString(want);
  };
  std::string add, del, more;
  for (int i = 0; i < 300; ++i) {
    absl::StrAppend(&add, "link add sta", i, " type veth peer name stb", i, "\n");
  }
  absl::StrAppend(&add, "addr add 10.200.0.1/24 dev sta5\nlink set sta5 up\n",
                  "route add default via 10.200.0.254 dev sta5\n");
  for (int i = 0; i < 300; ++i) {
    if (i % 3 != 0) absl::StrAppend(&del, "link del sta", i, "\n");  // takes stb<i> with it
  }
  for (int i = 0; i < 50; ++i) {
    absl::StrAppend(&more, "link add stc", i, " type veth peer name std", i, "\n");
  }
  absl::StrAppend(&more, "addr add 10.201.0.1/24 dev stc7\nlink set stc7 up\n",
                  "route add default via 10.201.0.254 dev stc7\n");

  burst("add", add);
  converges_to({"default sta5", "sta5 10.200.0.0/24"});
  burst("del", del);  // sta5 and its default route go
  burst("more", more);
  RunResult route = InNetns({"route", "show", "default"});
  ASSERT_EQ(route.status, 0) << route.err;
  ASSERT_TRUE(absl::StrContains(route.out, "dev stc7")) << route.out;
  RunResult links = InNetns({"-o", "link", "show"});
  ASSERT_EQ(std::count(links.out.begin(), links.out.end(), '\n'), 1 + 2 * 100 + 2 * 50)
      << links.out;
  converges_to({"default stc7", "stc7 10.201.0.0/24"});
  EXPECT_TRUE(absl::StrContains(agent_->Stderr(), "overflowed (ENOBUFS): full resync"))
      << "no burst overflowed the socket: the test did not exercise the resync";
}

// The systemd notification protocol, received on a datagram socket as systemd would.
TEST_F(AgentTest, NotifiesReadyWatchdogReloadingAndStopping) {
  const std::string notify = dir_ + "/notify.sock";
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, notify.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  std::vector<std::string> got;
  auto drain = [&] {
    char buf[4096];
    for (;;) {
      ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
      if (n <= 0) break;
      got.emplace_back(buf, static_cast<size_t>(n));
    }
  };
  auto seen = [&](const std::string& prefix) {
    drain();
    for (const auto& g : got) {
      if (absl::StartsWith(g, prefix)) return true;
    }
    return false;
  };
  StartAgent({}, {"NOTIFY_SOCKET=" + notify, "WATCHDOG_USEC=200000"});
  EXPECT_TRUE(testing::WaitFor([&] { return seen("READY=1"); }, absl::Seconds(5)));
  // Watchdog pings at half of WATCHDOG_USEC: several within half a second.
  got.clear();
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  drain();
  int pings = 0;
  for (const auto& g : got) pings += g == "WATCHDOG=1";
  EXPECT_GE(pings, 3);
  agent_->Signal(SIGHUP);
  EXPECT_TRUE(testing::WaitFor([&] { return seen("RELOADING=1"); }, absl::Seconds(5)));
  agent_->Signal(SIGTERM);
  ASSERT_TRUE(agent_->Wait(absl::Seconds(5)).has_value());
  EXPECT_TRUE(seen("STOPPING=1"));
  close(fd);
}

}  // namespace
}  // namespace fabric
