// The DRA kubelet plugin's answer applied by a real runtime: the agent runs with --dra on the
// roce-9port example host against the tests' API server, publishes its slices, and this test as
// the kubelet prepares a claim allocated two of its devices; then Debian's podman (runc) runs a
// container with exactly the CDI device IDs NodePrepareResources returned. Inside are exactly
// those NICs' verbs nodes and rdma_cm, and the job environment for exactly those NICs from the
// claim's own spec. Unpreparing removes that spec. Needs root, podman and runc (test-rigs, rig
// 7: podman 4.3 reads specs from /var/run/cdi only, so the agent's are copied there under names
// of the test's own); skips with the reason otherwise.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "k8s/dra/v1/api.grpc.pb.h"
#include "tests/dra/fake_apiserver.h"
#include "tests/e2e/podman_rig.h"
#include "tests/hosts/hosts.h"
#include "tests/testing/binaries.h"
#include "tests/testing/subprocess.h"

namespace fabric {
namespace {

namespace fs = std::filesystem;
namespace drav1 = ::k8s::io::kubelet::pkg::apis::dra::v1;
using ::testing::Contains;
using ::testing::Not;

constexpr char kRunCdi[] = "/var/run/cdi";

std::string Slurp(const std::string& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(PodmanDra, TheContainerGetsExactlyWhatPrepareReturned) {
  if (std::string why = testing::PodmanRig::Missing(); !why.empty()) GTEST_SKIP() << why;
  if (fs::exists(absl::StrCat(kRunCdi, "/fabric.io-rdma.json"))) {
    GTEST_SKIP() << "a fabric-agent's spec is in " << kRunCdi << ": the test's would clash";
  }
  const std::string tag = absl::StrCat(getpid());
  testing::PodmanRig rig(absl::StrCat("/var/tmp/fabric-dra-", tag), {"sh", "env", "ls"});
  ASSERT_TRUE(rig.imported());
  const std::string dir = rig.dir();
  fs::create_directories(dir + "/cdi");
  ASSERT_TRUE(testing::WriteExampleHost("roce-9port", dir + "/host").ok());
  auto server = testing::FakeApiServer::Start();
  ASSERT_TRUE(server.ok()) << server.status();
  auto agent = testing::Subprocess::Start(
      {testing::kAgentBinary, "--socket=" + dir + "/agent.sock", "--sysfs=" + dir + "/host/sys",
       "--procfs=" + dir + "/host/proc", "--cdi-dir=" + dir + "/cdi",
       "--dev-root=" + dir + "/devroot", "--lldp=false", "--ib-neighbors=false",
       "--announce-socket=", "--dra", "--kubeconfig=" + (*server)->WriteKubeconfig(),
       "--node-name=node-a", "--dra-kubelet-dir=" + dir + "/kubelet"});
  ASSERT_TRUE(agent.ok());
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        auto st = (*server)->State();
        return st.ok() && (*st)["slices"].size() == 1;
      },
      absl::Seconds(30)))
      << (*agent)->Stderr();

  // The scheduler's part: a claim allocated two devices of this node's pool.
  nlohmann::json results = nlohmann::json::array();
  for (const char* device : {"mlx5-3", "mlx5-4"}) {
    results.push_back(
        {{"request", "nic"}, {"driver", "rdma.fabric.io"}, {"pool", "node-a"}, {"device", device}});
  }
  const std::string uid = absl::StrCat("e2e-", tag);
  ASSERT_TRUE((*server)
                  ->Objects({{{"apiVersion", "resource.k8s.io/v1"},
                              {"kind", "ResourceClaim"},
                              {"metadata", {{"name", "pair"}, {"namespace", "jobs"}, {"uid", uid}}},
                              {"status", {{"allocation", {{"devices", {{"results", results}}}}}}}}})
                  .ok());
  auto stub = drav1::DRAPlugin::NewStub(
      grpc::CreateChannel("unix:" + dir + "/kubelet/plugins/rdma.fabric.io/dra.sock",
                          grpc::InsecureChannelCredentials()));
  drav1::NodePrepareResourcesRequest req;
  drav1::Claim* c = req.add_claims();
  c->set_namespace_("jobs");
  c->set_name("pair");
  c->set_uid(uid);
  drav1::NodePrepareResourcesResponse resp;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub->NodePrepareResources(&ctx, req, &resp).ok());
  const auto& prepared = resp.claims().at(uid);
  ASSERT_EQ(prepared.error(), "");
  std::vector<std::string> ids;
  for (const auto& d : prepared.devices())
    ids.insert(ids.end(), d.cdi_device_ids().begin(), d.cdi_device_ids().end());
  ASSERT_EQ(ids.size(), 3u);

  // The runtime's part: the agent's specs where podman reads them, the nodes they name.
  const std::string claim_spec = absl::StrCat("fabric.io-rdma-claim-", uid, ".json");
  const std::string main_copy = absl::StrCat(kRunCdi, "/fabric.io-rdma-e2e-dra-", tag, ".json");
  const bool created_run_cdi = !fs::exists(kRunCdi);
  fs::create_directories(kRunCdi);
  fs::copy_file(dir + "/cdi/fabric.io-rdma.json", main_copy);
  fs::copy_file(dir + "/cdi/" + claim_spec, absl::StrCat(kRunCdi, "/", claim_spec));
  const nlohmann::json spec = nlohmann::json::parse(Slurp(dir + "/cdi/fabric.io-rdma.json"));
  std::set<std::string> want_nodes;
  for (const auto& d : spec["devices"]) {
    const std::string name = d["name"];
    const bool ours = name == "mlx5_3" || name == "mlx5_4";
    for (const auto& n : d["containerEdits"]["deviceNodes"]) {
      const std::string host = n["hostPath"];
      if (!fs::exists(host)) {
        ASSERT_NO_FATAL_FAILURE(testing::MakeRdmaNode(
            host, fs::path(n["path"].get<std::string>()).filename().string()));
      }
      if (ours) want_nodes.insert(fs::path(n["path"].get<std::string>()).filename().string());
    }
  }
  std::vector<std::string> args = {"run", "--rm", "--network=none"};
  for (const std::string& id : ids) {
    args.push_back("--device");
    args.push_back(id);
  }
  for (const char* a :
       {testing::PodmanRig::kImage, "sh", "-c", "env; echo --; ls /dev/infiniband"}) {
    args.push_back(a);
  }
  auto r = rig.Podman(args);
  fs::remove(main_copy);
  fs::remove(absl::StrCat(kRunCdi, "/", claim_spec));
  if (created_run_cdi) fs::remove(kRunCdi);
  ASSERT_TRUE(r.ok() && r->status == 0) << (r.ok() ? r->err : std::string(r.status().message()));
  std::set<std::string> env, nodes;
  bool in_nodes = false;
  for (absl::string_view line : absl::StrSplit(r->out, '\n', absl::SkipEmpty())) {
    if (line == "--") {
      in_nodes = true;
    } else {
      (in_nodes ? nodes : env).insert(std::string(line));
    }
  }
  EXPECT_EQ(nodes, want_nodes);
  EXPECT_THAT(nodes, Contains("rdma_cm"));
  EXPECT_THAT(env, Contains("NCCL_IB_HCA==mlx5_3:1,mlx5_4:1"));
  EXPECT_THAT(env, Not(Contains(::testing::HasSubstr("mlx5_5"))));

  // Unprepared: the claim's spec is gone from the agent's CDI directory.
  drav1::NodeUnprepareResourcesRequest ureq;
  *ureq.add_claims() = *c;
  drav1::NodeUnprepareResourcesResponse uresp;
  grpc::ClientContext uctx;
  ASSERT_TRUE(stub->NodeUnprepareResources(&uctx, ureq, &uresp).ok());
  EXPECT_EQ(uresp.claims().at(uid).error(), "");
  EXPECT_FALSE(fs::exists(dir + "/cdi/" + claim_spec));
}

}  // namespace
}  // namespace fabric
