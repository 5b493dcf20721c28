// fabric-agent's device plugins with the real binary on the dgx-h100-ib tree, this test as the
// kubelet (the same generated API on <tmp>/kubelet.sock): it registers its resource, lists the
// InfiniBand NICs with their NUMA nodes, follows a port taken down and up on the tree (a sysfs
// state file and SIGHUP), allocates, and says which resources contest a NIC. Without an explicit
// --device-plugin-dir an example tree serves none. Issue 51's hostile cases, one per class, on the
// real binary: bounded requests, SIGTERM with a kubelet that never answers, unread streams, a
// negative size, a socket path too long, the kubelet's socket created again, bytes not UTF-8,
// the sockets' mode.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "k8s/deviceplugin/v1beta1/api.grpc.pb.h"
#include "tests/hosts/hosts.h"
#include "tests/testing/binaries.h"
#include "tests/testing/fake_kubelet.h"
#include "tests/testing/subprocess.h"

namespace fabric {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

using testing::FakeKubelet;

class DevicePluginAgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("dp-agent");
    ASSERT_TRUE(testing::WriteExampleHost("dgx-h100-ib", dir_ + "/host").ok());
    fs::create_directories(dir_ + "/dp");
  }
  void TearDown() override {
    agent_.reset();
    fs::remove_all(dir_);
  }

  // The agent on the example host with `config` and `flags`, in agent_ (null if it did not start).
  void Launch(const std::string& config, std::vector<std::string> flags) {
    std::ofstream(dir_ + "/config.json") << config;
    std::vector<std::string> argv = {testing::kAgentBinary,
                                     "--socket=" + dir_ + "/agent.sock",
                                     "--sysfs=" + dir_ + "/host/sys",
                                     "--procfs=" + dir_ + "/host/proc",
                                     "--config=" + dir_ + "/config.json",
                                     "--lldp=false",
                                     "--ib-neighbors=false",
                                     "--announce-socket="};
    argv.insert(argv.end(), flags.begin(), flags.end());
    auto agent = testing::Subprocess::Start(argv);
    ASSERT_TRUE(agent.ok()) << agent.status();
    agent_ = *std::move(agent);
  }

  void StartAgent(const std::string& config, std::vector<std::string> flags) {
    Launch(config, std::move(flags));
    ASSERT_NE(agent_, nullptr);
    ASSERT_TRUE(testing::WaitForSocket(*agent_, dir_ + "/agent.sock")) << agent_->Stderr();
  }

  // An agent that must refuse to start: exit 2 naming the socket's bound, never "serving".
  void StartAgentExpectingExit(const std::string& config, std::vector<std::string> flags) {
    Launch(config, std::move(flags));
    ASSERT_NE(agent_, nullptr);
    EXPECT_EQ(agent_->Wait(absl::Seconds(60)), 2) << agent_->Stderr();
    EXPECT_THAT(agent_->Stderr(), HasSubstr("a Unix socket path takes"));
    EXPECT_THAT(agent_->Stderr(), ::testing::Not(HasSubstr("serving")));
  }

  std::unique_ptr<v1beta1::DevicePlugin::Stub> Plugin(const std::string& socket) {
    return v1beta1::DevicePlugin::NewStub(
        grpc::CreateChannel("unix:" + dir_ + "/dp/" + socket, grpc::InsecureChannelCredentials()));
  }

  void SetState(const std::string& dev, const std::string& state) {
    std::ofstream(dir_ + "/host/sys/class/infiniband/" + dev + "/ports/1/state") << state;
    agent_->Signal(SIGHUP);  // A tree in a temp dir sends no events: a rescan.
  }

  std::string dir_;
  std::unique_ptr<testing::Subprocess> agent_;
};

constexpr char kConfig[] = R"({"devicePlugin": {"resources": [
    {"name": "rdma/ib", "mode": "EXCLUSIVE", "selectors": {"linkTypes": ["infiniband"]}}]}})";

std::string Health(const v1beta1::ListAndWatchResponse& r, const std::string& id) {
  for (const auto& d : r.devices()) {
    if (d.id() == id) return d.health();
  }
  return "absent";
}

TEST_F(DevicePluginAgentTest, RegistersListsFollowsPortsAndAllocates) {
  FakeKubelet kubelet(dir_ + "/dp/kubelet.sock");
  StartAgent(kConfig, {"--device-plugin-dir=" + dir_ + "/dp"});
  auto reqs = kubelet.WaitFor(1);
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].version(), "v1beta1");
  EXPECT_EQ(reqs[0].endpoint(), "fabric-rdma-ib.sock");
  EXPECT_EQ(reqs[0].resource_name(), "rdma/ib");
  EXPECT_TRUE(reqs[0].options().get_preferred_allocation_available());
  EXPECT_THAT(agent_->Stderr(), HasSubstr("serving 1 device plugin resources in"));

  auto stub = Plugin(reqs[0].endpoint());
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
  auto stream = stub->ListAndWatch(&ctx, {});
  v1beta1::ListAndWatchResponse r;
  ASSERT_TRUE(stream->Read(&r));
  std::vector<std::string> ids;
  for (const auto& d : r.devices()) {
    ids.push_back(d.id() + "@" + std::to_string(d.topology().nodes(0).id()) + ":" + d.health());
  }
  EXPECT_THAT(ids,
              ::testing::ElementsAre("mlx5_0@0:Healthy", "mlx5_3@0:Healthy", "mlx5_4@0:Healthy",
                                     "mlx5_5@0:Healthy", "mlx5_6@1:Healthy", "mlx5_9@1:Healthy",
                                     "mlx5_10@1:Healthy", "mlx5_11@1:Healthy"));
  SetState("mlx5_9", "1: DOWN\n");
  ASSERT_TRUE(stream->Read(&r));
  EXPECT_EQ(Health(r, "mlx5_9"), "Unhealthy");
  EXPECT_EQ(Health(r, "mlx5_6"), "Healthy");
  SetState("mlx5_9", "4: ACTIVE\n");
  ASSERT_TRUE(stream->Read(&r));
  EXPECT_EQ(Health(r, "mlx5_9"), "Healthy");

  v1beta1::AllocateRequest req;
  req.add_container_requests()->add_devices_ids("mlx5_3");
  v1beta1::AllocateResponse resp;
  grpc::ClientContext actx;
  ASSERT_TRUE(stub->Allocate(&actx, req, &resp).ok());
  const auto& c = resp.container_responses(0);
  ASSERT_EQ(c.devices_size(), 2);
  EXPECT_EQ(c.devices(0).container_path(), "/dev/infiniband/uverbs3");
  EXPECT_EQ(c.devices(1).container_path(), "/dev/infiniband/rdma_cm");
  EXPECT_EQ(c.envs().at("FABRIC_RDMA_DEVICES"), "mlx5_3");
  // The example tree publishes no host file unless asked: only the helper is mounted.
  ASSERT_EQ(c.mounts_size(), 1);
  EXPECT_EQ(c.mounts(0).host_path(), "/usr/bin/fabric-env");

  agent_->Signal(SIGTERM);
  EXPECT_EQ(agent_->Wait(absl::Seconds(20)), 0) << agent_->Stderr();
  EXPECT_FALSE(fs::exists(dir_ + "/dp/fabric-rdma-ib.sock")) << "teardown removes the socket";
}

TEST_F(DevicePluginAgentTest, TwoResourcesOnOneNicAreNamed) {
  StartAgent(R"({"devicePlugin": {"resources": [
      {"name": "rdma/ib", "mode": "EXCLUSIVE", "selectors": {"linkTypes": ["infiniband"]}},
      {"name": "fabric.io/gpu0", "mode": "SHARED", "selectors": {"rdmaDevices": ["mlx5_0"]}}]}})",
             {"--device-plugin-dir=" + dir_ + "/dp"});
  EXPECT_THAT(agent_->Stderr(),
              HasSubstr("resources rdma/ib and fabric.io/gpu0 both select mlx5_0"));
}

TEST_F(DevicePluginAgentTest, AnExampleTreeServesNoneUnlessAsked) {
  StartAgent(kConfig, {});
  EXPECT_THAT(agent_->Stderr(), ::testing::Not(HasSubstr("device plugin resources")));
}

// Bounded work: the largest Allocate accepted is answered; one container more, or a negative
// allocationSize, is INVALID_ARGUMENT naming the bound, before any work.
TEST_F(DevicePluginAgentTest, RequestsOverTheBoundsAreRefusedNamingThem) {
  FakeKubelet kubelet(dir_ + "/dp/kubelet.sock");
  StartAgent(kConfig, {"--device-plugin-dir=" + dir_ + "/dp"});
  ASSERT_EQ(kubelet.WaitFor(1).size(), 1u);
  auto stub = Plugin("fabric-rdma-ib.sock");
  v1beta1::AllocateRequest req;
  for (int i = 0; i < 256; ++i) req.add_container_requests()->add_devices_ids("mlx5_3");
  v1beta1::AllocateResponse resp;
  {
    grpc::ClientContext ctx;
    grpc::Status s = stub->Allocate(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(resp.container_responses_size(), 256);
  }
  req.add_container_requests();
  {
    grpc::ClientContext ctx;
    grpc::Status s = stub->Allocate(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(s.error_message(), HasSubstr("257 container requests, more than 256"));
  }
  v1beta1::PreferredAllocationRequest pr;
  pr.add_container_requests()->set_allocation_size(-1);
  v1beta1::PreferredAllocationResponse pa;
  grpc::ClientContext ctx;
  grpc::Status s = stub->GetPreferredAllocation(&ctx, pr, &pa);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("allocation_size -1 is negative"));
  EXPECT_THAT(agent_->Stderr(), HasSubstr("Allocate refused: Allocate: 257 container requests"));
}

// Prompt shutdown: a kubelet.sock that accepts and never answers, 64 resources. SIGTERM took 9.7 s
// with two resources and did not end with 64.
TEST_F(DevicePluginAgentTest, SigtermIsPromptWithAKubeletThatNeverAnswers) {
  const std::string sock = dir_ + "/dp/kubelet.sock";
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path, sock.data(), sock.size());
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(listen(fd, 1024), 0);  // Connections complete in the backlog; nothing answers.
  std::string resources;
  for (int i = 0; i < 64; ++i) {
    resources += std::string(i ? "," : "") + R"({"name": "fabric.io/r)" + std::to_string(i) +
                 R"(", "mode": "SHARED", "selectors": {"rdmaDevices": ["none"]}})";
  }
  StartAgent(R"({"devicePlugin": {"resources": [)" + resources + "]}}",
             {"--device-plugin-dir=" + dir_ + "/dp"});
  pollfd p{fd, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 60000), 1) << "no Register under way";
  const absl::Time t0 = absl::Now();
  agent_->Signal(SIGTERM);
  const std::optional<int> rc = agent_->Wait(absl::Seconds(20));
  const absl::Duration took = absl::Now() - t0;
  close(fd);
  ASSERT_TRUE(rc.has_value()) << "still running 20 s after SIGTERM";
  EXPECT_EQ(*rc, 0) << agent_->Stderr();
  std::cout << "SIGTERM to exit, silent kubelet, 64 resources: " << took << "\n";
}

// Unread ListAndWatch streams (more than the limit) do not lock the kubelet out: its new stream
// evicts the oldest and is served.
TEST_F(DevicePluginAgentTest, UnreadStreamsDoNotLockTheKubeletOut) {
  StartAgent(kConfig, {"--device-plugin-dir=" + dir_ + "/dp"});
  auto stub = Plugin("fabric-rdma-ib.sock");
  std::vector<std::unique_ptr<grpc::ClientContext>> ctx;
  std::vector<std::unique_ptr<grpc::ClientReader<v1beta1::ListAndWatchResponse>>> streams;
  for (int i = 0; i < 12; ++i) {
    ctx.push_back(std::make_unique<grpc::ClientContext>());
    streams.push_back(stub->ListAndWatch(ctx.back().get(), {}));
  }
  grpc::ClientContext kctx;
  kctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
  auto kubelet = stub->ListAndWatch(&kctx, {});
  v1beta1::ListAndWatchResponse r;
  ASSERT_TRUE(kubelet->Read(&r)) << agent_->Stderr();
  EXPECT_EQ(r.devices_size(), 8);
  EXPECT_THAT(agent_->Stderr(), HasSubstr("a new ListAndWatch stream replaced the oldest of 8"));
  for (auto& c : ctx) c->TryCancel();
}

// A valid name whose socket path bind(2) cannot take: a config error, never "serving".
TEST_F(DevicePluginAgentTest, ASocketPathTooLongIsAConfigError) {
  const std::string dp = dir_ + "/dp/" + std::string(40, 'd');
  StartAgentExpectingExit(R"({"devicePlugin": {"resources": [{"name": "fabric.io/)" +
                              std::string(63, 'a') +
                              R"(", "mode": "SHARED", "selectors": {"vendors": ["15b3"]}}]}})",
                          {"--device-plugin-dir=" + dp});
}

// The kubelet's socket created again on the same inode (moved away and back) is a kubelet
// restart: registered again. Before, a same-inode socket was never registered on.
TEST_F(DevicePluginAgentTest, EveryKubeletSocketCreationRegistersAgain) {
  FakeKubelet kubelet(dir_ + "/dp/kubelet.sock");
  StartAgent(kConfig, {"--device-plugin-dir=" + dir_ + "/dp"});
  ASSERT_EQ(kubelet.WaitFor(1).size(), 1u);
  fs::rename(dir_ + "/dp/kubelet.sock", dir_ + "/kubelet-away.sock");
  fs::rename(dir_ + "/kubelet-away.sock", dir_ + "/dp/kubelet.sock");
  EXPECT_EQ(kubelet.WaitFor(2).size(), 2u) << agent_->Stderr();
}

// Bytes not UTF-8 in an ID: INVALID_ARGUMENT naming the field (escaped), no protobuf line per
// request, the refusals logged at most a few times.
TEST_F(DevicePluginAgentTest, ANonUtf8IdIsRefusedNamingTheField) {
  StartAgent(kConfig, {"--device-plugin-dir=" + dir_ + "/dp"});
  const std::string bytes = testing::AllocateBytes("mlx5_\xff\x1b");
  for (int i = 0; i < 50; ++i) {
    grpc::Status s = testing::RawAllocate(dir_ + "/dp/fabric-rdma-ib.sock", bytes);
    ASSERT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(s.error_message(),
                HasSubstr("AllocateRequest.container_requests[0].devices_ids[0] is not UTF-8: "
                          "\"mlx5_\\xff\\x1b\""));
  }
  const std::string err = agent_->Stderr();
  EXPECT_THAT(err, ::testing::Not(HasSubstr("UTF-8 data when parsing")));
  size_t lines = 0;
  for (size_t at = 0; (at = err.find("Allocate refused", at)) != std::string::npos; ++at) ++lines;
  EXPECT_GE(lines, 1u);
  EXPECT_LE(lines, 6u) << "one line per refusal";
}

// The sockets' mode is the design's (0600: the kubelet is root), not the umask's.
TEST_F(DevicePluginAgentTest, PluginSocketsAreMode0600UnderUmask0) {
  const mode_t old = umask(0);
  StartAgent(kConfig, {"--device-plugin-dir=" + dir_ + "/dp"});
  umask(old);
  struct stat st {};
  ASSERT_TRUE(
      testing::WaitFor([&] { return lstat((dir_ + "/dp/fabric-rdma-ib.sock").c_str(), &st) == 0; },
                       absl::Seconds(60)));
  EXPECT_EQ(st.st_mode & 07777, 0600u);
}

}  // namespace
}  // namespace fabric
