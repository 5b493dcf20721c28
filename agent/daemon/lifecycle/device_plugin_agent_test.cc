// fabric-agent's device plugins with the real binary on the dgx-h100-ib tree, this test as the
// kubelet (the same generated API on <tmp>/kubelet.sock): it registers its resource, lists the
// InfiniBand NICs with their NUMA nodes, follows a port taken down and up on the tree (a sysfs
// state file and SIGHUP), allocates, and says which resources contest a NIC. Without an explicit
// --device-plugin-dir an example tree serves none.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
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

  void StartAgent(const std::string& config, std::vector<std::string> flags) {
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
    ASSERT_TRUE(testing::WaitForSocket(*agent_, dir_ + "/agent.sock")) << agent_->Stderr();
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

}  // namespace
}  // namespace fabric
