// Issue 34 end to end with a real runtime. The agent serves its device plugin (this test plays
// the kubelet: Registration on <dir>/dp/kubelet.sock, then ListAndWatch and Allocate with the
// generated v1beta1 API), and podman runs a container with exactly what Allocate answered: its
// device nodes, its mounts (the published host directory, the static fabric-env helper) and its
// envs. The container's network is a macvlan whose conflist ends in the real fabric-cni with
// envDir = the agent's published host directory, and its command starts through the mounted
// helper, `fabric-env exec -- CMD`, as the pod example does. Inside, the command must see the
// allocated NIC alone in NCCL_IB_HCA and the GID index of the pod's own address, not the one of
// a neighbour pod's address in the same subnet; after the container, CNI DEL leaves no record.
//
// What stands in for hardware this machine lacks: the NIC is the roce-9port example host's
// mlx5_1. Its device nodes are made under --dev-root with their real numbers. Its sysfs marks it
// as the software RDMA device of the test's veth (`parent`, as rxe shows it), so fabric-cni finds
// it behind the macvlan's lower device, and its GID table lists the two pods' addresses as the
// kernel lists a macvlan's in shared mode. (The VM test vm.pod_env does the same on a real rxe
// GID table, without podman.)
//
// Needs root, podman, runc and containernetworking-plugins; skips with the reason otherwise.
// Registered only where fabric-env is static (not the ASan build): the container has no libc.
#include <grpcpp/grpcpp.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "k8s/deviceplugin/v1beta1/api.grpc.pb.h"
#include "tests/e2e/podman_rig.h"
#include "tests/hosts/hosts.h"
#include "tests/testing/binaries.h"
#include "tests/testing/fake_kubelet.h"
#include "tests/testing/subprocess.h"

namespace fabric {
namespace {

namespace fs = std::filesystem;
using ::testing::Contains;
using ::testing::UnorderedElementsAre;

constexpr char kIp[] = "/usr/sbin/ip";
constexpr char kNic[] = "mlx5_1";
constexpr char kPodIp[] = "10.79.0.5";
constexpr char kConfig[] = R"({"devicePlugin": {"resources": [
    {"name": "rdma/roce", "mode": "EXCLUSIVE", "selectors": {"rdmaDevices": ["mlx5_1", "mlx5_2"]}}]}})";

class PodmanDevicePluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string why = testing::PodmanRig::Missing(); !why.empty()) GTEST_SKIP() << why;
    ASSERT_EQ(access((std::string(testing::kCniPluginDir) + "/fabric-cni").c_str(), X_OK), 0);
    ASSERT_EQ(access(testing::kFabricEnvBinary, X_OK), 0) << "fabric-env not built";
    tag_ = absl::StrCat(getpid() % 100000);
    rig_ = std::make_unique<testing::PodmanRig>(absl::StrCat("/var/tmp/fabric-dp-", tag_),
                                                std::vector<std::string>{"sh", "env", "ls"});
    ASSERT_TRUE(rig_->imported());
    dir_ = rig_->dir();
    for (const char* d : {"/dp", "/env", "/state"}) fs::create_directories(dir_ + d);
    ASSERT_TRUE(testing::WriteExampleHost("roce-9port", dir_ + "/host").ok());
    master_ = "fdpa" + tag_;
    Sh({kIp, "link", "add", master_, "type", "veth", "peer", "name", "fdpb" + tag_});
    Sh({kIp, "link", "set", master_, "up"});
    Sh({kIp, "link", "set", "fdpb" + tag_, "up"});
  }

  void TearDown() override {
    if (!rig_) return;
    (void)rig_->Podman({"rm", "-a", "-f", "-t", "0"});  // Before the macvlans' master goes.
    agent_.reset();
    if (!master_.empty()) (void)testing::Run({kIp, "link", "del", master_});
    rig_.reset();
  }

  void Sh(const std::vector<std::string>& cmd) {
    auto r = testing::Run(cmd, absl::Seconds(30));
    ASSERT_TRUE(r.ok() && r->status == 0)
        << cmd[1] << " " << cmd[2] << ": " << (r.ok() ? r->err : "");
  }

  // kNic as the software RDMA device of the macvlans' master, with both pods' addresses in its
  // GID table (RoCE v1 and v2 each, as the kernel adds them): the neighbour's at 4/5, ours at 6/7.
  void MarkNicBehindMaster() {
    const std::string port = dir_ + "/host/sys/class/infiniband/" + kNic + "/ports/1";
    std::ofstream(dir_ + "/host/sys/class/infiniband/" + kNic + "/parent") << master_ << "\n";
    auto gid = [&](int index, const std::string& hex, const char* type) {
      std::ofstream(absl::StrCat(port, "/gids/", index)) << hex << "\n";
      std::ofstream(absl::StrCat(port, "/gid_attrs/types/", index)) << type << "\n";
      std::ofstream(absl::StrCat(port, "/gid_attrs/ndevs/", index)) << "eth0\n";
    };
    // 10.79.0.6 (a neighbour pod) and 10.79.0.5 (kPodIp, ours).
    for (auto [index, hex] : {std::pair{4, "0a4f:0006"}, std::pair{6, "0a4f:0005"}}) {
      const std::string full = absl::StrCat("0000:0000:0000:0000:0000:ffff:", hex);
      gid(index, full, "IB/RoCE v1");
      gid(index + 1, full, "RoCE v2");
    }
  }

  void StartAgent() {
    std::ofstream(dir_ + "/config.json") << kConfig;
    auto agent = testing::Subprocess::Start(
        {testing::kAgentBinary, "--socket=" + dir_ + "/agent.sock", "--sysfs=" + dir_ + "/host/sys",
         "--procfs=" + dir_ + "/host/proc", "--config=" + dir_ + "/config.json",
         "--device-plugin-dir=" + dir_ + "/dp", "--host-file-dir=" + dir_ + "/env",
         "--dev-root=" + dir_ + "/devroot",
         std::string("--pod-helper=") + testing::kFabricEnvBinary, "--lldp=false",
         "--ib-neighbors=false", "--announce-socket="});
    ASSERT_TRUE(agent.ok()) << agent.status();
    agent_ = *std::move(agent);
    ASSERT_TRUE(
        testing::WaitFor([&] { return fs::exists(dir_ + "/env/host.pb"); }, absl::Seconds(20)))
        << agent_->Stderr();
  }

  void WriteNetwork() {
    std::ofstream(rig_->NetDir() + "/fabdp" + tag_ + ".conflist") << absl::StrCat(
        R"({"cniVersion":"1.0.0","name":"fabdp)", tag_, R"(","plugins":[)",
        R"({"type":"macvlan","master":")", master_, R"(","mode":"bridge",)",
        R"("ipam":{"type":"static","addresses":[{"address":")", kPodIp, R"(/24"}]}},)",
        R"({"type":"fabric-cni","announce":{"count":0,"tailMs":[]},"podRouting":{"mode":"off"},)",
        R"("agentSocket":"/nonexistent/announce.sock","stateDir":")", dir_, R"(/state",)",
        R"("envDir":")", dir_, R"(/env","sysfsRoot":")", dir_, R"(/host/sys"}]})");
  }

  std::vector<std::string> Records() const {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir_ + "/env/pods", ec)) {
      out.push_back(e.path().filename().string());
    }
    return out;
  }

  std::unique_ptr<testing::PodmanRig> rig_;
  std::string tag_, dir_, master_;
  std::unique_ptr<testing::Subprocess> agent_;
};

// The NICs named by an NCCL_IB_HCA value ("=mlx5_1:1,...", "^...", "mlx5_1").
std::set<std::string> HcaDevices(std::string value) {
  std::set<std::string> out;
  if (!value.empty() && (value[0] == '=' || value[0] == '^')) value.erase(0, 1);
  for (absl::string_view part : absl::StrSplit(value, ',', absl::SkipEmpty())) {
    out.insert(std::string(part.substr(0, part.find(':'))));
  }
  return out;
}

TEST_F(PodmanDevicePluginTest, ContainerFromAllocateGetsItsPodsNicAndGid) {
  MarkNicBehindMaster();
  testing::FakeKubelet kubelet(dir_ + "/dp/kubelet.sock");
  StartAgent();
  const auto reqs = kubelet.WaitFor(1);
  ASSERT_EQ(reqs.size(), 1u);
  auto stub = v1beta1::DevicePlugin::NewStub(grpc::CreateChannel(
      "unix:" + dir_ + "/dp/" + reqs[0].endpoint(), grpc::InsecureChannelCredentials()));
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    auto stream = stub->ListAndWatch(&ctx, {});
    v1beta1::ListAndWatchResponse list;
    ASSERT_TRUE(stream->Read(&list));
    std::vector<std::string> ids;
    for (const auto& d : list.devices()) ids.push_back(d.id() + ":" + d.health());
    EXPECT_THAT(ids, UnorderedElementsAre("mlx5_1:Healthy", "mlx5_2:Healthy"));
    ctx.TryCancel();
  }
  v1beta1::AllocateRequest req;
  req.add_container_requests()->add_devices_ids(kNic);
  v1beta1::AllocateResponse resp;
  grpc::ClientContext actx;
  actx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  ASSERT_TRUE(stub->Allocate(&actx, req, &resp).ok());
  ASSERT_EQ(resp.container_responses_size(), 1);
  const v1beta1::ContainerAllocateResponse& c = resp.container_responses(0);

  // The runtime's part: exactly the answer's devices, mounts and envs.
  std::vector<std::string> args = {"run", "--rm", "--network", "fabdp" + tag_};
  std::set<std::string> want_nodes;
  for (const v1beta1::DeviceSpec& d : c.devices()) {
    const std::string name = fs::path(d.container_path()).filename().string();
    ASSERT_NO_FATAL_FAILURE(testing::MakeRdmaNode(d.host_path(), name));
    want_nodes.insert(name);
    args.insert(args.end(), {"--device", absl::StrCat(d.host_path(), ":", d.container_path(), ":",
                                                      d.permissions())});
  }
  for (const v1beta1::Mount& m : c.mounts()) {
    args.insert(args.end(), {"-v", absl::StrCat(m.host_path(), ":", m.container_path(),
                                                m.read_only() ? ":ro" : "")});
  }
  for (const auto& [k, v] : c.envs()) args.insert(args.end(), {"--env", k + "=" + v});
  // A variable the pod's own spec sets: the helper leaves it as the user set it.
  args.insert(args.end(), {"--env", "NVSHMEM_IB_GID_INDEX=1"});
  WriteNetwork();
  args.insert(args.end(), {testing::PodmanRig::kImage, "/usr/local/bin/fabric-env", "exec", "--",
                           "sh", "-c", "env; echo --; ls /dev/infiniband"});
  auto r = rig_->Podman(args);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->status, 0) << r->err << "\nagent:\n" << agent_->Stderr();

  std::set<std::string> env, nodes;
  bool after = false;
  for (absl::string_view line : absl::StrSplit(r->out, '\n', absl::SkipEmpty())) {
    if (line == "--") {
      after = true;
    } else {
      (after ? nodes : env).insert(std::string(line));
    }
  }
  EXPECT_EQ(nodes, want_nodes);
  EXPECT_THAT(want_nodes, Contains("rdma_cm"));
  EXPECT_THAT(env, Contains(absl::StrCat("FABRIC_RDMA_DEVICES=", kNic)));
  EXPECT_THAT(env, Contains("FABRIC_RDMA_RESOURCE=rdma/roce"));
  std::string hca;
  for (const std::string& e : env) {
    if (absl::StartsWith(e, "NCCL_IB_HCA=")) hca = e.substr(strlen("NCCL_IB_HCA="));
  }
  EXPECT_EQ(HcaDevices(hca), std::set<std::string>{kNic}) << "NCCL_IB_HCA=" << hca;
  // The pod's own address's RoCE v2 GID; the neighbour's (5) would be GID index drift.
  EXPECT_THAT(env, Contains("NCCL_IB_GID_INDEX=7")) << r->err;
  EXPECT_THAT(env, Contains("UCX_IB_GID_INDEX=7")) << r->err;
  EXPECT_THAT(env, Contains("NVSHMEM_IB_GID_INDEX=1")) << "the user's own value wins";
  EXPECT_THAT(env, Contains("NCCL_SOCKET_IFNAME==eth0")) << "the pod's interface";

  // The container is gone (--rm): CNI DEL took its record away.
  EXPECT_TRUE(Records().empty()) << Records().front();
}

}  // namespace
}  // namespace fabric
