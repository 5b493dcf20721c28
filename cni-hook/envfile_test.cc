#include "cni-hook/envfile.h"

#include <filesystem>
#include <fstream>
#include <tuple>

#include "absl/strings/match.h"
#include "cni-hook/cni.h"
#include "gtest/gtest.h"
#include "tests/testing/subprocess.h"

namespace fabric::cni {
namespace {

namespace fs = std::filesystem;

constexpr char kZeroGid[] = "0000:0000:0000:0000:0000:0000:0000:0000";

// A tiny sysfs: PCI functions with RDMA devices, ports and GID tables, as the kernel lays them
// out under bus/pci/devices/<bdf>/infiniband/<dev>/ports/<n>/.
class EnvFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::MakeTempDir("envfile");
    ASSERT_FALSE(root_.empty());
  }
  void TearDown() override { fs::remove_all(root_); }

  void Write(const std::string& rel, const std::string& text) {
    const fs::path p = fs::path(root_) / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text << "\n";
  }
  // gids: index -> {gid text, type}
  void Port(const std::string& bdf, const std::string& dev, int port,
            const std::vector<std::pair<std::string, std::string>>& gids) {
    const std::string d =
        "bus/pci/devices/" + bdf + "/infiniband/" + dev + "/ports/" + std::to_string(port);
    for (size_t i = 0; i < gids.size(); ++i) {
      Write(d + "/gids/" + std::to_string(i), gids[i].first);
      Write(d + "/gid_attrs/types/" + std::to_string(i), gids[i].second);
    }
  }
  static EnvInterface Iface(const std::string& name, const std::string& bdf,
                            std::vector<std::string> cidrs) {
    EnvInterface e{name, bdf, "", {}, ""};
    for (const auto& c : cidrs) e.addresses.push_back(*ParseCidr(c));
    return e;
  }

  std::string root_;
};

TEST_F(EnvFileTest, RoceV2GidOfThePodIpv4) {
  // RoCE v1 and v2 GIDs of the same address: the v2 one (index 3) wins.
  Port("0000:3b:00.2", "mlx5_4", 1,
       {{"fe80:0000:0000:0000:5e8d:2bff:fe00:1122", "IB/RoCE v1"},
        {"fe80:0000:0000:0000:5e8d:2bff:fe00:1122", "RoCE v2"},
        {"0000:0000:0000:0000:0000:ffff:ac10:0509", "IB/RoCE v1"},
        {"0000:0000:0000:0000:0000:ffff:ac10:0509", "RoCE v2"},
        {kZeroGid, ""}});
  const std::vector<EnvInterface> ifaces = {
      Iface("net1", "0000:3b:00.2", {"172.16.5.9/24", "fd00::9/64"})};
  const auto rdma = FindRdma(root_, ifaces);
  ASSERT_EQ(rdma.size(), 1u);
  EXPECT_EQ(rdma[0].device, "mlx5_4");
  EXPECT_EQ(rdma[0].port, 1);
  EXPECT_EQ(rdma[0].gid_index, 3);
  EXPECT_EQ(RenderEnvFile(ifaces, rdma),
            // The agent's rules (jobenv): the pod's ports are the job scope, no rank.
            "# fabric-cni: the pod's fabric environment\n"
            "FABRIC_POD_IPS=172.16.5.9,fd00::9\n"
            "FABRIC_SGLANG_IB_DEVICE='{\"0\":\"mlx5_4\"}'\n"
            "MC_GID_INDEX=3\n"
            "MC_IB_PORT=1\n"
            "MC_TE_FILTERS=mlx5_4\n"
            "NCCL_IB_GID_INDEX=3\n"
            "NCCL_IB_HCA==mlx5_4:1\n"
            "NCCL_SOCKET_IFNAME==net1\n"
            "NVSHMEM_HCA_LIST=mlx5_4:1\n"
            "NVSHMEM_IB_GID_INDEX=3\n"
            "UCCL_IB_GID_INDEX=3\n"
            "UCCL_P2P_RDMA_GID_INDEX=3\n"
            "UCX_IB_GID_INDEX=3\n"
            "UCX_NET_DEVICES=mlx5_4:1\n");
}

TEST_F(EnvFileTest, RoceV2GidOfThePodIpv6) {
  // IPv6-only RoCE: link-local GIDs at 0/1, the port's own global GIDs at 2/3, the pod's
  // macvlan-style GIDs at 4/5; link-local and RoCE v1 never count.
  Port("0000:3b:00.2", "mlx5_4", 1,
       {{"fe80:0000:0000:0000:5e8d:2bff:fe00:1122", "IB/RoCE v1"},
        {"fe80:0000:0000:0000:5e8d:2bff:fe00:1122", "RoCE v2"},
        {"2001:0db8:0a00:0004:5e8d:2bff:fe00:1122", "IB/RoCE v1"},
        {"2001:0db8:0a00:0004:5e8d:2bff:fe00:1122", "RoCE v2"},
        {"2001:0db8:0a00:0004:0000:0000:0000:0009", "IB/RoCE v1"},
        {"2001:0db8:0a00:0004:0000:0000:0000:0009", "RoCE v2"},
        {kZeroGid, ""}});
  const std::vector<EnvInterface> ifaces = {
      Iface("net1", "0000:3b:00.2", {"2001:db8:a00:4::9/64", "fe80::5e8d:2bff:fe00:1122/64"})};
  const auto rdma = FindRdma(root_, ifaces);
  ASSERT_EQ(rdma.size(), 1u);
  EXPECT_EQ(rdma[0].device, "mlx5_4");
  EXPECT_EQ(rdma[0].gid_index, 5);
  EXPECT_EQ(RenderEnvFile(ifaces, rdma),
            "# fabric-cni: the pod's fabric environment\n"
            "FABRIC_POD_IPS=2001:db8:a00:4::9,fe80::5e8d:2bff:fe00:1122\n"
            "FABRIC_SGLANG_IB_DEVICE='{\"0\":\"mlx5_4\"}'\n"
            "MC_GID_INDEX=5\n"
            "MC_IB_PORT=1\n"
            "MC_TE_FILTERS=mlx5_4\n"
            "NCCL_IB_GID_INDEX=5\n"
            "NCCL_IB_HCA==mlx5_4:1\n"
            "NCCL_SOCKET_IFNAME==net1\n"
            "NVSHMEM_HCA_LIST=mlx5_4:1\n"
            "NVSHMEM_IB_GID_INDEX=5\n"
            "UCCL_IB_GID_INDEX=5\n"
            "UCCL_P2P_RDMA_GID_INDEX=5\n"
            "UCX_IB_GID_INDEX=5\n"
            "UCX_NET_DEVICES=mlx5_4:1\n");

  // Only the link-local address: no GID holds a routable address of the pod.
  const std::vector<EnvInterface> ll = {
      Iface("net1", "0000:3b:00.2", {"fe80::5e8d:2bff:fe00:1122/64"})};
  const auto none = FindRdma(root_, ll);
  ASSERT_EQ(none.size(), 1u);
  EXPECT_EQ(none[0].gid_index, -1);
}

// A macvlan on a software device's netdev (rxe on eth1): no PCI address, the device whose
// `parent` is the macvlan's lower netdev.
TEST_F(EnvFileTest, SoftwareDeviceOfAMacvlansLowerNetdev) {
  for (const auto& [dev, parent, gid] :
       {std::tuple{"rxe0", "eth0", "0000:0000:0000:0000:0000:ffff:0a00:0005"},
        std::tuple{"rxe1", "eth1", "0000:0000:0000:0000:0000:ffff:0a00:0005"}}) {
    const std::string d = std::string("class/infiniband/") + dev;
    Write(d + "/parent", parent);
    Write(d + "/ports/1/gids/0", "fe80:0000:0000:0000:0000:0000:0000:0001");
    Write(d + "/ports/1/gid_attrs/types/0", "RoCE v2");
    Write(d + "/ports/1/gids/1", "0000:0000:0000:0000:0000:ffff:0a00:0001");
    Write(d + "/ports/1/gid_attrs/types/1", "RoCE v2");
    Write(d + "/ports/1/gids/2", gid);
    Write(d + "/ports/1/gid_attrs/types/2", "RoCE v2");
  }
  EnvInterface net1 = Iface("net1", "", {"10.0.0.5/24"});
  net1.lower_netdev = "eth1";
  const auto rdma = FindRdma(root_, {net1});
  ASSERT_EQ(rdma.size(), 1u);
  EXPECT_EQ(rdma[0].device, "rxe1");
  EXPECT_EQ(rdma[0].gid_index, 2);
  ASSERT_EQ(rdma[0].other_ipv4_gids.size(), 1u);  // the host's 10.0.0.1
  EXPECT_EQ(rdma[0].other_ipv4_gids[0].ipv4, "10.0.0.1");
  // Without a lower netdev (a veth) there is none.
  EXPECT_TRUE(FindRdma(root_, {Iface("net1", "", {"10.0.0.5/24"})}).empty());
}

TEST_F(EnvFileTest, NoRdmaBehindVirtualInterfaces) {
  Port("0000:3b:00.2", "mlx5_4", 1, {{kZeroGid, ""}});
  const std::vector<EnvInterface> ifaces = {Iface("eth0", "", {"10.88.0.5/16"}),
                                            Iface("net1", "0000:99:00.0", {"10.9.0.5/16"})};
  const auto rdma = FindRdma(root_, ifaces);
  EXPECT_TRUE(rdma.empty());
  EXPECT_EQ(RenderEnvFile(ifaces, rdma),
            "# fabric-cni: the pod's fabric environment\n"
            "# no RDMA device found behind eth0, net1\n"
            "FABRIC_POD_IPS=10.88.0.5,10.9.0.5\n"
            "NCCL_SOCKET_IFNAME==eth0,net1\n");
}

TEST_F(EnvFileTest, DeviceWithoutTheGidAndTwoDevices) {
  // mlx5_0's second port holds the address; mlx5_1 has no GID for its pod address yet.
  Port("0000:17:00.0", "mlx5_0", 1, {{kZeroGid, ""}});
  Port("0000:17:00.0", "mlx5_0", 2,
       {{kZeroGid, ""}, {kZeroGid, ""}, {"0000:0000:0000:0000:0000:ffff:0a00:0001", "RoCE v2"}});
  Port("0000:18:00.0", "mlx5_1", 1, {{"0000:0000:0000:0000:0000:ffff:0a00:0099", "RoCE v2"}});
  const std::vector<EnvInterface> ifaces = {Iface("net1", "0000:17:00.0", {"10.0.0.1/24"}),
                                            Iface("net2", "0000:18:00.0", {"10.0.1.1/24"})};
  const auto rdma = FindRdma(root_, ifaces);
  ASSERT_EQ(rdma.size(), 2u);
  EXPECT_EQ(rdma[0].port, 2);
  EXPECT_EQ(rdma[0].gid_index, 2);
  EXPECT_EQ(rdma[1].device, "mlx5_1");
  EXPECT_EQ(rdma[1].gid_index, -1);
  const std::string text = RenderEnvFile(ifaces, rdma);
  EXPECT_TRUE(absl::StrContains(text, "NCCL_IB_HCA==mlx5_0:2,mlx5_1:1\n")) << text;
  // Any one index would be wrong for mlx5_1: left to NCCL and UCX, as the agent leaves it.
  EXPECT_FALSE(absl::StrContains(text, "GID_INDEX=")) << text;
  EXPECT_TRUE(absl::StrContains(text, "# GID index variables left unset: mlx5_1:1 has no routable"))
      << text;
  EXPECT_TRUE(absl::StrContains(text, "UCX_NET_DEVICES=mlx5_0:2,mlx5_1:1\n")) << text;
}

TEST_F(EnvFileTest, OddInterfaceNamesAreQuoted) {
  const std::vector<EnvInterface> ifaces = {Iface("it's$x", "", {"10.0.0.1/24"})};
  const std::string text = RenderEnvFile(ifaces, {});
  EXPECT_TRUE(absl::StrContains(text, "NCCL_SOCKET_IFNAME='=it'\\''s$x'\n")) << text;
}

TEST_F(EnvFileTest, BusInfoCannotEscapeTheTree) {
  Port("0000:3b:00.2", "mlx5_4", 1, {{"0000:0000:0000:0000:0000:ffff:0a00:0001", "RoCE v2"}});
  EXPECT_TRUE(FindRdma(root_, {Iface("eth0", "../devices/0000:3b:00.2", {"10.0.0.1/24"})}).empty());
}

}  // namespace
}  // namespace fabric::cni
