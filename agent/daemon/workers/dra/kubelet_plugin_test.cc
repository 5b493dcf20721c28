// The DRA kubelet plugin with this test as the kubelet (a client generated from the kubelet's own
// .proto files) and the tests' API server holding the claims: registration, preparing claims
// (each on its own, again by UID, both API versions), the claim's CDI spec, unpreparing, a call
// of 1,000 claims, the claim's network data from fabric-cni's records, and the kubelet wiping its
// directories.
#include "agent/daemon/workers/dra/kubelet_plugin.h"

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "agent/publish/podrecord/pod_record.h"
#include "k8s/dra/v1/api.grpc.pb.h"
#include "k8s/dra/v1beta1/api.grpc.pb.h"
#include "k8s/pluginregistration/v1/api.grpc.pb.h"
#include "tests/dra/fake_apiserver.h"
#include "tests/hosts/discovered.h"
#include "tests/testing/subprocess.h"

namespace fabric {
namespace {

using ::testing::ElementsAre;
using testing::FakeApiServer;
using ::testing::HasSubstr;
namespace drav1beta1 = ::k8s::io::kubelet::pkg::apis::dra::v1beta1;

nlohmann::json Claim(const std::string& name, const std::string& uid, const std::string& pool,
                     const std::string& device, const std::string& driver = "rdma.fabric.io") {
  return {
      {"apiVersion", "resource.k8s.io/v1"},
      {"kind", "ResourceClaim"},
      {"metadata", {{"name", name}, {"namespace", "jobs"}, {"uid", uid}}},
      {"spec", {{"devices", {{"requests", nlohmann::json::array()}}}}},
      {"status",
       {{"allocation",
         {{"devices",
           {{"results",
             {{{"request", "nic"}, {"driver", driver}, {"pool", pool}, {"device", device}}}}}}}}}}};
}

class KubeletPluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = FakeApiServer::Start();
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
    dir_ = testing::MakeTempDir("dra-plugin");
    auto api = kubeapi::KubeApiImpl::Create(server_->Config());
    ASSERT_TRUE(api.ok());
    DraPluginOptions o;
    o.registry_dir = dir_ + "/plugins_registry";
    o.plugin_dir = dir_ + "/plugins/rdma.fabric.io";
    o.cdi_dir = dir_ + "/cdi";
    std::filesystem::create_directories(o.cdi_dir);
    o.node = "node-a";
    o.records_dir = dir_ + "/pods";
    o.recheck = absl::Milliseconds(50);
    auto p = DraPlugin::Start(*std::move(api), o);
    ASSERT_TRUE(p.ok()) << p.status();
    plugin_ = *std::move(p);
    Snapshot snapshot;
    snapshot.host = std::make_shared<const v1::Host>(testing::DiscoveredExampleHost("roce-9port"));
    Built b;
    plugin_->Publish(Publication{snapshot, nullptr, b, absl::Now()});
  }

  std::shared_ptr<grpc::Channel> Dial(const std::string& path) {
    return grpc::CreateChannel(absl::StrCat("unix:", path), grpc::InsecureChannelCredentials());
  }

  drav1::NodePrepareResourcesResponse Prepare(const std::vector<std::string>& names_uids) {
    auto stub = drav1::DRAPlugin::NewStub(Dial(plugin_->DraSocket()));
    drav1::NodePrepareResourcesRequest req;
    for (size_t i = 0; i + 1 < names_uids.size(); i += 2) {
      drav1::Claim* c = req.add_claims();
      c->set_namespace_("jobs");
      c->set_name(names_uids[i]);
      c->set_uid(names_uids[i + 1]);
    }
    drav1::NodePrepareResourcesResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    grpc::Status s = stub->NodePrepareResources(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp;
  }

  size_t ClaimReads() {
    auto st = server_->State();
    size_t n = 0;
    for (const auto& r : (*st)["requests"]) {
      if (r["path"].get<std::string>().find("/resourceclaims/") != std::string::npos) ++n;
    }
    return n;
  }

  std::unique_ptr<FakeApiServer> server_;
  std::string dir_;
  std::unique_ptr<DraPlugin> plugin_;
};

TEST_F(KubeletPluginTest, RegistersAsTheKubeletAsks) {
  auto stub = pluginregistration::Registration::NewStub(Dial(plugin_->RegistrationSocket()));
  EXPECT_EQ(plugin_->RegistrationSocket(), dir_ + "/plugins_registry/rdma.fabric.io-reg.sock");
  grpc::ClientContext ctx;
  pluginregistration::PluginInfo info;
  ASSERT_TRUE(stub->GetInfo(&ctx, {}, &info).ok());
  EXPECT_EQ(info.type(), "DRAPlugin");
  EXPECT_EQ(info.name(), "rdma.fabric.io");
  EXPECT_EQ(info.endpoint(), plugin_->DraSocket());
  EXPECT_THAT(info.supported_versions(), ElementsAre("v1.DRAPlugin", "v1beta1.DRAPlugin"));
  pluginregistration::RegistrationStatus status;
  status.set_plugin_registered(false);
  status.set_error("driver name taken");
  grpc::ClientContext ctx2;
  pluginregistration::RegistrationStatusResponse r;
  ASSERT_TRUE(stub->NotifyRegistrationStatus(&ctx2, status, &r).ok());
  std::vector<v1::Finding> findings;
  plugin_->Findings(absl::Now(), &findings);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].code(), "dra.not_registered");
  EXPECT_THAT(findings[0].message(), HasSubstr("driver name taken"));
}

TEST_F(KubeletPluginTest, EachClaimIsAnsweredOnItsOwnAndAgainAlike) {
  ASSERT_TRUE(server_
                  ->Objects({Claim("good", "uid-good", "node-a", "mlx5-3"),
                             Claim("elsewhere", "uid-else", "node-b", "mlx5-3"),
                             Claim("unknown", "uid-unknown", "node-a", "mlx5-99"),
                             Claim("gpu", "uid-gpu", "node-a", "gpu-0", "gpu.nvidia.com")})
                  .ok());
  auto resp = Prepare({"good", "uid-good", "elsewhere", "uid-else", "unknown", "uid-unknown", "gpu",
                       "uid-gpu", "missing", "uid-missing", "good", "uid-stale"});
  ASSERT_EQ(resp.claims().size(), 6u);
  const auto& good = resp.claims().at("uid-good");
  EXPECT_EQ(good.error(), "");
  ASSERT_EQ(good.devices_size(), 1);
  EXPECT_EQ(good.devices(0).pool_name(), "node-a");
  EXPECT_EQ(good.devices(0).device_name(), "mlx5-3");
  EXPECT_THAT(good.devices(0).request_names(), ElementsAre("nic"));
  EXPECT_THAT(good.devices(0).cdi_device_ids(),
              ElementsAre("fabric.io/rdma=mlx5_3", "fabric.io/rdma=claim-uid-good"));
  EXPECT_THAT(resp.claims().at("uid-else").error(), HasSubstr("another node's"));
  EXPECT_THAT(resp.claims().at("uid-unknown").error(), HasSubstr("not one this node published"));
  EXPECT_EQ(resp.claims().at("uid-gpu").error(), "");
  EXPECT_EQ(resp.claims().at("uid-gpu").devices_size(), 0);
  EXPECT_THAT(resp.claims().at("uid-missing").error(), HasSubstr("404"));
  EXPECT_THAT(resp.claims().at("uid-stale").error(), HasSubstr("not the kubelet's"));
  const std::string spec = dir_ + "/cdi/fabric.io-rdma-claim-uid-good.json";
  ASSERT_TRUE(std::filesystem::exists(spec));
  std::ifstream in(spec);
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_THAT(text, HasSubstr("NCCL_IB_HCA==mlx5_3:1"));

  // Again, through v1beta1: the same answer, without reading the claim again.
  const size_t reads = ClaimReads();
  auto stub = drav1beta1::DRAPlugin::NewStub(Dial(plugin_->DraSocket()));
  drav1beta1::NodePrepareResourcesRequest req;
  drav1beta1::Claim* c = req.add_claims();
  c->set_namespace_("jobs");
  c->set_name("good");
  c->set_uid("uid-good");
  drav1beta1::NodePrepareResourcesResponse again;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub->NodePrepareResources(&ctx, req, &again).ok());
  EXPECT_EQ(again.claims().at("uid-good").devices(0).cdi_device_ids_size(), 2);
  EXPECT_EQ(ClaimReads(), reads);

  // Unprepared (twice: the same answer): the claim's spec is gone.
  auto v1stub = drav1::DRAPlugin::NewStub(Dial(plugin_->DraSocket()));
  for (int i = 0; i < 2; ++i) {
    drav1::NodeUnprepareResourcesRequest ureq;
    drav1::Claim* uc = ureq.add_claims();
    uc->set_namespace_("jobs");
    uc->set_name("good");
    uc->set_uid("uid-good");
    drav1::NodeUnprepareResourcesResponse uresp;
    grpc::ClientContext uctx;
    ASSERT_TRUE(v1stub->NodeUnprepareResources(&uctx, ureq, &uresp).ok());
    ASSERT_EQ(uresp.claims().size(), 1u);
    EXPECT_EQ(uresp.claims().at("uid-good").error(), "");
  }
  EXPECT_FALSE(std::filesystem::exists(spec));
}

// fabric-cni's record of the claim's pod names its interface on the claimed NIC: the claim's
// status gets that interface's name, addresses and MAC (validated by the tests' API server against
// the API's schema and rules), written again only when the record changes.
TEST_F(KubeletPluginTest, ClaimStatusCarriesThePodsInterface) {
  nlohmann::json claim = Claim("net", "uid-net", "node-a", "mlx5-3");
  claim["status"]["reservedFor"] = {{{"resource", "pods"}, {"name", "job-0"}, {"uid", "pod-1"}}};
  claim["status"]["allocation"]["devices"]["results"].push_back(
      {{"request", "gpu"}, {"driver", "gpu.nvidia.com"}, {"pool", "node-a"}, {"device", "gpu-0"}});
  claim["status"]["devices"] = {{{"driver", "gpu.nvidia.com"},
                                 {"pool", "node-a"},
                                 {"device", "gpu-0"},
                                 {"data", {{"uuid", "GPU-1"}}}}};
  ASSERT_TRUE(server_->Objects(nlohmann::json::array({claim})).ok());
  ASSERT_EQ(Prepare({"net", "uid-net"}).claims().at("uid-net").error(), "");

  // The records as fabric-cni writes them: another pod's on the same NIC, then the claim's pod.
  std::filesystem::create_directories(dir_ + "/pods");
  auto write = [&](uint64_t inode, const std::string& pod, const std::string& address) {
    podrecord::PodRecord r;
    r.pod_uid = pod;
    r.container_id = "c" + pod;
    r.ifname = "net1";
    r.netns_inode = inode;
    r.interfaces.push_back({"net1", {address, "fd00::11/64"}, "0a:58:0a:32:00:0b"});
    jobenv::Pick p;
    p.device = "mlx5_3";
    p.port = 1;
    p.netdev = "net1";
    r.ports.push_back(p);
    const std::string name = podrecord::FileName(inode, r.container_id, "net1");
    std::ofstream(dir_ + "/pods/" + name + ".tmp") << podrecord::RecordJson(r);
    std::filesystem::rename(dir_ + "/pods/" + name + ".tmp", dir_ + "/pods/" + name);
  };
  write(100, "pod-other", "10.50.0.9/24");
  write(200, "pod-1", "10.50.0.11/24");
  auto ours = [&]() -> nlohmann::json {
    auto st = server_->State();
    if (!st.ok()) return nullptr;
    for (const auto& d : (*st)["claims"]["jobs/net"]["status"]["devices"]) {
      if (d["driver"] == "rdma.fabric.io") return d;
    }
    return nullptr;
  };
  ASSERT_TRUE(testing::WaitFor([&] { return !ours().is_null(); }, absl::Seconds(10)));
  EXPECT_EQ(ours(), nlohmann::json::parse(R"({"driver":"rdma.fabric.io","pool":"node-a",
      "device":"mlx5-3","networkData":{"interfaceName":"net1",
      "ips":["10.50.0.11/24","fd00::11/64"],"hardwareAddress":"0a:58:0a:32:00:0b"}})"));
  auto st = server_->State();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ((*st)["claims"]["jobs/net"]["status"]["devices"][0]["data"]["uuid"], "GPU-1");
  auto puts = [&] {
    size_t n = 0;
    const auto now = server_->State();  // Held: the loop below reads into it.
    if (!now.ok()) return n;
    for (const auto& r : (*now)["requests"]) n += r["method"] == "PUT" ? 1 : 0;
    return n;
  };
  const size_t written = puts();
  EXPECT_EQ(written, 1u);
  absl::SleepFor(absl::Milliseconds(300));  // Six passes: nothing new, nothing written.
  EXPECT_EQ(puts(), written);

  // The pod's sandbox again, with a new address: written again.
  write(200, "pod-1", "10.50.0.12/24");
  ASSERT_TRUE(testing::WaitFor([&] { return ours()["networkData"]["ips"][0] == "10.50.0.12/24"; },
                               absl::Seconds(10)));
  EXPECT_EQ(puts(), written + 1);
}

TEST_F(KubeletPluginTest, AThousandClaimsAtOnce) {
  nlohmann::json claims = nlohmann::json::array();
  std::vector<std::string> names_uids;
  for (int i = 0; i < 1000; ++i) {
    const std::string name = absl::StrCat("c", i), uid = absl::StrCat("uid-", i);
    claims.push_back(Claim(name, uid, "node-a", absl::StrCat("mlx5-", 1 + i % 8)));
    names_uids.push_back(name);
    names_uids.push_back(uid);
  }
  ASSERT_TRUE(server_->Objects(claims).ok());
  auto resp = Prepare(names_uids);
  ASSERT_EQ(resp.claims().size(), 1000u);
  for (const auto& [uid, one] : resp.claims()) EXPECT_EQ(one.error(), "") << uid;
  // A call whose deadline has passed answers the claims it did not prepare before with why.
  drav1::NodePrepareResourcesRequest late;
  drav1::Claim* first = late.add_claims();
  first->set_namespace_("jobs");
  first->set_name("c0");
  first->set_uid("uid-0");
  drav1::Claim* fresh = late.add_claims();
  fresh->set_namespace_("jobs");
  fresh->set_name("x");
  fresh->set_uid("uid-late");
  auto late_resp = plugin_->Prepare(late, absl::Now() - absl::Seconds(1));
  EXPECT_EQ(late_resp.claims().at("uid-0").error(), "");  // Prepared before: answered.
  EXPECT_THAT(late_resp.claims().at("uid-late").error(), HasSubstr("deadline passed"));
  // Over the bound: every claim refused with the reason, none prepared.
  std::vector<std::string> too_many;
  for (int i = 0; i < 2049; ++i) {
    too_many.push_back("x");
    too_many.push_back(absl::StrCat("over-", i));
  }
  auto refused = Prepare(too_many);
  ASSERT_EQ(refused.claims().size(), 2049u);
  EXPECT_THAT(refused.claims().at("over-0").error(), HasSubstr("more than 2048"));
}

TEST_F(KubeletPluginTest, ServesAgainWhenTheKubeletWipesItsDirectories) {
  const size_t before = plugin_->serves();
  std::filesystem::remove_all(dir_ + "/plugins_registry");
  std::filesystem::remove_all(dir_ + "/plugins");
  for (int i = 0; i < 200 && plugin_->serves() == before; ++i) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_GT(plugin_->serves(), before);
  auto stub = pluginregistration::Registration::NewStub(Dial(plugin_->RegistrationSocket()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  pluginregistration::PluginInfo info;
  ASSERT_TRUE(stub->GetInfo(&ctx, {}, &info).ok());
  EXPECT_EQ(info.name(), "rdma.fabric.io");
}

}  // namespace
}  // namespace fabric
