// fabric-agent's DRA driver with the real binary on the 512-VF example host against the tests'
// API server (resource.k8s.io/v1's schema enforced): the slices written at start, the kubelet
// plugin registered and preparing a claim, an API server that refuses every call (the agent
// serves on and health says so), and the configurations it refuses at start (exit 2).
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "k8s/dra/v1/api.grpc.pb.h"
#include "k8s/pluginregistration/v1/api.grpc.pb.h"
#include "tests/dra/fake_apiserver.h"
#include "tests/hosts/hosts.h"
#include "tests/testing/binaries.h"
#include "tests/testing/subprocess.h"

namespace fabric {
namespace {

namespace fs = std::filesystem;
namespace drav1 = ::k8s::io::kubelet::pkg::apis::dra::v1;
using testing::FakeApiServer;
using ::testing::HasSubstr;

class DraAgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("dra-agent");
    ASSERT_TRUE(testing::WriteExampleHost("sriov-512vf", dir_ + "/host").ok());
    fs::create_directories(dir_ + "/cdi");
    auto s = FakeApiServer::Start();
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
  }
  void TearDown() override {
    agent_.reset();
    fs::remove_all(dir_);
  }

  std::vector<std::string> Argv(std::vector<std::string> extra) {
    std::vector<std::string> argv = {testing::kAgentBinary,
                                     "--socket=" + dir_ + "/agent.sock",
                                     "--sysfs=" + dir_ + "/host/sys",
                                     "--procfs=" + dir_ + "/host/proc",
                                     "--lldp=false",
                                     "--ib-neighbors=false",
                                     "--announce-socket=",
                                     "--cdi-dir=" + dir_ + "/cdi",
                                     "--dra",
                                     "--dra-kubelet-dir=" + dir_ + "/kubelet"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
  }

  size_t SliceCount() {
    auto st = server_->State();
    return st.ok() ? (*st)["slices"].size() : 0;
  }

  std::string dir_;
  std::unique_ptr<FakeApiServer> server_;
  std::unique_ptr<testing::Subprocess> agent_;
};

TEST_F(DraAgentTest, PublishesTheNodeAndPreparesAClaim) {
  const absl::Time start = absl::Now();
  auto agent = testing::Subprocess::Start(
      Argv({"--kubeconfig=" + server_->WriteKubeconfig(), "--node-name=node-a"}));
  ASSERT_TRUE(agent.ok());
  agent_ = *std::move(agent);
  ASSERT_TRUE(testing::WaitFor([&] { return SliceCount() == 9; }, absl::Seconds(60)))
      << agent_->Stderr();
  std::cout << "slices of sriov-512vf (520 devices) on the API server "
            << absl::FormatDuration(absl::Now() - start) << " after exec\n";
  auto st = server_->State();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ((*st)["nodes"]["node-a"]["status"]["conditions"][0]["type"], "FabricHealthy");

  // The kubelet's side: registration, then a claim allocated to one VF of this node.
  const std::string reg = dir_ + "/kubelet/plugins_registry/rdma.fabric.io-reg.sock";
  ASSERT_TRUE(testing::WaitFor([&] { return fs::exists(reg); }, absl::Seconds(10)));
  auto channel = grpc::CreateChannel("unix:" + reg, grpc::InsecureChannelCredentials());
  pluginregistration::PluginInfo info;
  grpc::ClientContext ctx;
  ASSERT_TRUE(pluginregistration::Registration::NewStub(channel)->GetInfo(&ctx, {}, &info).ok());
  EXPECT_EQ(info.endpoint(), dir_ + "/kubelet/plugins/rdma.fabric.io/dra.sock");
  nlohmann::json slices = (*st)["slices"];
  const std::string device = slices["node-a-rdma.fabric.io-1"]["spec"]["devices"][0]["name"];
  ASSERT_TRUE(
      server_
          ->Objects(
              {{{"apiVersion", "resource.k8s.io/v1"},
                {"kind", "ResourceClaim"},
                {"metadata", {{"name", "train"}, {"namespace", "jobs"}, {"uid", "0c3e9a52-claim"}}},
                {"status",
                 {{"allocation",
                   {{"devices",
                     {{"results",
                       {{{"request", "nic"},
                         {"driver", "rdma.fabric.io"},
                         {"pool", "node-a"},
                         {"device", device}}}}}}}}}}}})
          .ok());
  auto dra = drav1::DRAPlugin::NewStub(
      grpc::CreateChannel("unix:" + info.endpoint(), grpc::InsecureChannelCredentials()));
  drav1::NodePrepareResourcesRequest req;
  drav1::Claim* c = req.add_claims();
  c->set_namespace_("jobs");
  c->set_name("train");
  c->set_uid("0c3e9a52-claim");
  drav1::NodePrepareResourcesResponse resp;
  grpc::ClientContext pctx;
  ASSERT_TRUE(dra->NodePrepareResources(&pctx, req, &resp).ok());
  const auto& one = resp.claims().at("0c3e9a52-claim");
  ASSERT_EQ(one.error(), "");
  ASSERT_EQ(one.devices_size(), 1);
  EXPECT_EQ(one.devices(0).device_name(), device);
  EXPECT_TRUE(fs::exists(dir_ + "/cdi/fabric.io-rdma-claim-0c3e9a52-claim.json"));
}

TEST_F(DraAgentTest, AnApiServerThatRefusesEverythingStopsNothingElse) {
  ASSERT_TRUE(
      server_->Faults({{{"method", ""}, {"path", "/api"}, {"mode", "500"}, {"count", 100000}}})
          .ok());
  auto agent = testing::Subprocess::Start(Argv(
      {"--kubeconfig=" + server_->WriteKubeconfig(), "--node-name=node-a", "--rescan-interval=1"}));
  ASSERT_TRUE(agent.ok());
  agent_ = *std::move(agent);
  ASSERT_TRUE(testing::WaitForSocket(*agent_, dir_ + "/agent.sock")) << agent_->Stderr();
  std::string out;
  ASSERT_TRUE(testing::WaitFor(
      [&]() -> bool {
        auto r =
            testing::Run({testing::kFabricctlBinary, "--target", dir_ + "/agent.sock", "health"});
        out = r.ok() ? r->out : "";
        return absl::StrContains(out, "dra.api_unreachable");
      },
      absl::Seconds(30)))
      << out << agent_->Stderr();
  EXPECT_EQ(SliceCount(), 0u);
}

TEST_F(DraAgentTest, RefusesWhatItCannotUseAtStart) {
  std::ofstream(dir_ + "/bad-kubeconfig") << "current-context: nowhere\n";
  for (const std::vector<std::string>& extra : std::vector<std::vector<std::string>>{
           {"--kubeconfig=" + dir_ + "/bad-kubeconfig", "--node-name=node-a"},
           {"--kubeconfig=" + dir_ + "/missing", "--node-name=node-a"},
           {"--kubeconfig=" + server_->WriteKubeconfig(), "--node-name=Node_A"},
           {"--kubeconfig=" + server_->WriteKubeconfig(), "--node-name=node-a", "--no-cdi"}}) {
    auto agent = testing::Subprocess::Start(Argv(extra));
    ASSERT_TRUE(agent.ok());
    const std::optional<int> code = (*agent)->Wait(absl::Seconds(60));
    ASSERT_TRUE(code.has_value());
    EXPECT_NE(*code, 0) << extra[0];
    EXPECT_THAT((*agent)->Stderr(),
                ::testing::AnyOf(HasSubstr("kubeconfig"), HasSubstr("node name"), HasSubstr("CDI")))
        << (*agent)->Stderr();
  }
}

}  // namespace
}  // namespace fabric
