#include "agent/inventory/discovery/discovery.h"

#include <gmock/gmock.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <thread>

#include "agent/inventory/topology/topology.h"
#include "tests/hosts/builder.h"
#include "tests/hosts/hosts.h"
#include "tests/testing/subprocess.h"

namespace fabric {
namespace {

namespace fs = std::filesystem;
using namespace ::fabric::v1;  // NOLINT
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::HostSpec;
using ::testing::IsEmpty;

// A written host in a temporary directory, discovered.
class DiscoveryTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  Host Discovered(const HostSpec& spec) {
    std::string tmpl = testing::MakeTempDir("discovery");
    EXPECT_FALSE(tmpl.empty());
    dir_ = tmpl;
    fs::remove(dir_);
    absl::Status written = testing::WriteHost(spec, dir_);
    EXPECT_TRUE(written.ok()) << written;
    HostFsImpl sys((dir_ / "sys").string());
    HostFsImpl proc((dir_ / "proc").string());
    auto host = Discover(sys, proc);
    EXPECT_TRUE(host.ok()) << host.status();
    return host.ok() ? *host : Host();
  }

  Host Example(const std::string& name) {
    auto spec = testing::ExampleHost(name);
    EXPECT_TRUE(spec.ok()) << spec.status();
    spec_ = *spec;
    return Discovered(spec_);
  }

  static const RdmaDevice* Dev(const Host& h, const std::string& name) {
    for (const RdmaDevice& d : h.rdma_devices()) {
      if (d.name() == name) return &d;
    }
    return nullptr;
  }
  static const Netdev* Net(const Host& h, const std::string& name) {
    for (const Netdev& n : h.netdevs()) {
      if (n.name() == name) return &n;
    }
    return nullptr;
  }
  static const Gid* GidAt(const Port& p, uint32_t index) {
    for (const Gid& g : p.gids()) {
      if (g.index() == index) return &g;
    }
    return nullptr;
  }
  static DistanceClass Dist(const Host& h, const std::string& gpu, const std::string& dev) {
    for (const TopologyPair& t : h.topology()) {
      if (t.accelerator() == gpu && t.rdma_device() == dev) return t.distance();
    }
    return DISTANCE_CLASS_UNSPECIFIED;
  }
  // Compute GPUs of the spec, by PCI address.
  std::vector<std::string> SpecGpus(uint32_t class_code) const {
    std::vector<std::string> out;
    for (const auto& f : spec_.pci) {
      if (f.class_code == class_code) out.push_back(f.bdf);
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  // Every problem in the host, as "where: field @path: reason".
  static std::vector<std::string> AllProblems(const Host& h) {
    std::vector<std::string> out;
    ForEachProblem(h, [&](const std::string& where, const FieldProblem& p) {
      out.push_back(where + ": " + p.field() + " @" + p.path() + ": " + p.reason());
    });
    return out;
  }

  fs::path dir_;
  HostSpec spec_;
};

TEST_F(DiscoveryTest, Roce9PortHost) {
  Host h = Example("roce-9port");
  EXPECT_THAT(AllProblems(h), IsEmpty());
  EXPECT_EQ(h.hostname(), "roce-node-03");
  EXPECT_EQ(h.kernel_release(), "6.1.0-18-amd64");
  EXPECT_THAT(h.numa_nodes(), ElementsAre(0, 1));
  EXPECT_THAT(h.default_route_netdevs(), ElementsAre("eth0"));

  ASSERT_EQ(h.rdma_devices_size(), 9);
  for (int i = 0; i <= 8; ++i) {
    const RdmaDevice& d = h.rdma_devices(i);
    const std::string name = "mlx5_" + std::to_string(i);
    ASSERT_EQ(d.name(), name);
    const auto* spec = spec_.FindRdma(name);
    ASSERT_NE(spec, nullptr);
    EXPECT_EQ(d.pci().address(), spec->pci);
    EXPECT_EQ(d.node_guid(), spec->node_guid);
    EXPECT_EQ(d.fw_ver(), spec->fw_ver);
    EXPECT_EQ(d.hca_type(), spec->hca_type);
    EXPECT_EQ(d.node_type(), NODE_TYPE_CA);
    EXPECT_EQ(d.pci().driver(), "mlx5_core");
    EXPECT_EQ(d.uverbs_device(), "uverbs" + std::to_string(*spec->uverbs));
    EXPECT_EQ(d.pci().vendor_id(), "15b3");
    ASSERT_EQ(d.ports_size(), 1);
    const Port& p = d.ports(0);
    EXPECT_EQ(p.number(), 1u);
    EXPECT_EQ(p.umad_device(), "umad" + std::to_string(i));  // one per port, in write order
    EXPECT_EQ(p.state(), PORT_STATE_ACTIVE);
    EXPECT_EQ(p.phys_state(), PHYS_STATE_LINK_UP);
    EXPECT_EQ(p.link_layer(), LINK_LAYER_ETHERNET);
    EXPECT_EQ(p.netdev(), "eth" + std::to_string(i));
    // Entries 0..3: link-local and IPv4-mapped, each as RoCE v1 and v2.
    const Gid* v2 = GidAt(p, 3);
    ASSERT_NE(v2, nullptr) << name;
    EXPECT_EQ(v2->type(), GID_TYPE_ROCE_V2);
    EXPECT_EQ(v2->netdev(), p.netdev());
    EXPECT_FALSE(v2->ipv4().empty());
    ASSERT_NE(GidAt(p, 0), nullptr);
    EXPECT_EQ(GidAt(p, 0)->type(), GID_TYPE_ROCE_V1);
    EXPECT_THAT(GidAt(p, 0)->gid(), ::testing::StartsWith("fe80:"));
    EXPECT_EQ(GidAt(p, 0)->ipv4(), "");
    EXPECT_EQ(GidAt(p, 2)->type(), GID_TYPE_ROCE_V1);
    EXPECT_EQ(GidAt(p, 2)->ipv4(), v2->ipv4());
  }
  const Port& p0 = h.rdma_devices(0).ports(0);
  EXPECT_DOUBLE_EQ(p0.rate_gbps(), 100);
  EXPECT_EQ(p0.rate(), "100 Gb/sec (4X EDR)");
  EXPECT_EQ(GidAt(p0, 3)->ipv4(), "10.0.60.3");
  EXPECT_EQ(GidAt(h.rdma_devices(1).ports(0), 3)->ipv4(), "25.11.128.11");
  EXPECT_DOUBLE_EQ(h.rdma_devices(1).ports(0).rate_gbps(), 400);
  // The macvlan on eth3 adds entries 4 and 5 naming macvlan0.
  const Port& p3 = h.rdma_devices(3).ports(0);
  ASSERT_NE(GidAt(p3, 5), nullptr);
  EXPECT_EQ(GidAt(p3, 5)->netdev(), "macvlan0");
  EXPECT_EQ(GidAt(p3, 5)->ipv4(), "25.11.129.50");
  EXPECT_EQ(p3.gids_size(), 6);

  const Netdev* eth0 = Net(h, "eth0");
  ASSERT_NE(eth0, nullptr);
  EXPECT_TRUE(eth0->default_route());
  EXPECT_THAT(eth0->ipv4_subnets(), ElementsAre("10.0.60.0/24"));
  EXPECT_EQ(eth0->rdma_device(), "mlx5_0");
  const Netdev* eth1 = Net(h, "eth1");
  ASSERT_NE(eth1, nullptr);
  EXPECT_FALSE(eth1->default_route());
  EXPECT_FALSE(eth1->upper());
  EXPECT_EQ(eth1->mtu(), spec_.FindNetdev("eth1")->mtu);
  EXPECT_EQ(eth1->mac(), spec_.FindNetdev("eth1")->mac);
  EXPECT_EQ(eth1->speed_mbps(), 400000);
  EXPECT_EQ(eth1->operstate(), "up");
  EXPECT_EQ(eth1->rdma_port(), 1u);
  EXPECT_EQ(eth1->pci_address(), spec_.FindRdma("mlx5_1")->pci);
  EXPECT_THAT(eth1->ipv4_subnets(), ElementsAre("25.11.128.0/24"));
  const Netdev* mv = Net(h, "macvlan0");
  ASSERT_NE(mv, nullptr);
  EXPECT_TRUE(mv->upper());
  EXPECT_EQ(mv->rdma_device(), "mlx5_3");
  EXPECT_EQ(mv->pci_address(), "");

  // 8 H100s and the BMC's VGA, which is listed but is no compute device.
  std::vector<std::string> gpus = SpecGpus(0x030200);
  ASSERT_EQ(gpus.size(), 8u);
  int compute = 0;
  for (const Accelerator& a : h.accelerators()) {
    if (a.management_display()) {
      EXPECT_EQ(a.vendor_name(), "ASPEED");
      EXPECT_EQ(a.kind(), ACCELERATOR_KIND_VGA);
      continue;
    }
    ++compute;
    EXPECT_EQ(a.vendor(), ACCELERATOR_VENDOR_NVIDIA);
    EXPECT_EQ(a.kind(), ACCELERATOR_KIND_3D);
    EXPECT_EQ(a.pci().driver(), "nvidia");
    EXPECT_DOUBLE_EQ(a.pci().current_link().speed_gts(), 32.0);
    EXPECT_EQ(a.pci().current_link().width(), 16u);
    EXPECT_FALSE(a.pci().path().empty());
  }
  EXPECT_EQ(compute, 8);
  EXPECT_EQ(h.accelerators_size(), 9);

  // GPU i shares a leaf switch with mlx5_{i+1}; its sibling's NIC is two switches away.
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(Dist(h, gpus[i], "mlx5_" + std::to_string(i + 1)), DISTANCE_CLASS_PIX) << i;
    const int sibling = (i % 2 == 0) ? i + 2 : i;
    EXPECT_EQ(Dist(h, gpus[i], "mlx5_" + std::to_string(sibling)), DISTANCE_CLASS_PXB) << i;
  }
  EXPECT_EQ(Dist(h, gpus[0], "mlx5_3"), DISTANCE_CLASS_NODE);
  EXPECT_EQ(Dist(h, gpus[0], "mlx5_5"), DISTANCE_CLASS_SYS);
  EXPECT_EQ(Dist(h, gpus[7], "mlx5_0"), DISTANCE_CLASS_SYS);
  EXPECT_EQ(Dist(h, gpus[0], "mlx5_0"), DISTANCE_CLASS_NODE);
  EXPECT_EQ(h.topology_size(), 8 * 9);

  EXPECT_TRUE(h.gpudirect().available());
  ASSERT_EQ(h.gpudirect().paths_size(), 1);
  EXPECT_EQ(h.gpudirect().paths(0).mechanism(), "nvidia_peermem");
}

TEST_F(DiscoveryTest, DgxInfiniBandHostWithSriov) {
  Host h = Example("dgx-h100-ib");
  EXPECT_THAT(AllProblems(h), IsEmpty());
  // Natural order: mlx5_2 before mlx5_10.
  std::vector<std::string> names;
  for (const RdmaDevice& d : h.rdma_devices()) names.push_back(d.name());
  ASSERT_EQ(names.size(), 16u);
  EXPECT_EQ(names[0], "mlx5_0");
  EXPECT_EQ(names[2], "mlx5_2");
  EXPECT_EQ(names[10], "mlx5_10");
  EXPECT_EQ(names[15], "mlx5_15");

  const RdmaDevice* ib = Dev(h, "mlx5_0");
  ASSERT_NE(ib, nullptr);
  const Port& p = ib->ports(0);
  EXPECT_EQ(p.link_layer(), LINK_LAYER_INFINIBAND);
  EXPECT_EQ(p.lid(), spec_.FindRdma("mlx5_0")->ports[0].lid);
  EXPECT_EQ(p.sm_lid(), 1u);
  ASSERT_EQ(p.gids_size(), 1);
  EXPECT_EQ(p.gids(0).type(), GID_TYPE_IB);
  EXPECT_EQ(p.gids(0).netdev(), "");
  EXPECT_FALSE(p.netdev().empty());  // IPoIB

  const RdmaDevice* pf = Dev(h, "mlx5_1");
  ASSERT_NE(pf, nullptr);
  const Sriov& s = pf->pci().sriov();
  EXPECT_EQ(s.role(), SRIOV_ROLE_PF);
  EXPECT_EQ(s.total_vfs(), 8u);
  EXPECT_EQ(s.num_vfs(), 4u);
  ASSERT_EQ(s.vfs_size(), 4);
  for (int i = 0; i < 4; ++i) {
    const VirtualFunction& vf = s.vfs(i);
    EXPECT_EQ(vf.index(), static_cast<uint32_t>(i));
    ASSERT_EQ(vf.rdma_devices_size(), 1);
    EXPECT_EQ(vf.rdma_devices(0), "mlx5_" + std::to_string(12 + i));
    ASSERT_EQ(vf.netdevs_size(), 1);
    const RdmaDevice* vdev = Dev(h, vf.rdma_devices(0));
    ASSERT_NE(vdev, nullptr);
    EXPECT_EQ(vdev->pci().address(), vf.pci_address());
    EXPECT_EQ(vdev->pci().sriov().role(), SRIOV_ROLE_VF);
    EXPECT_EQ(vdev->pci().sriov().pf_pci_address(), pf->pci().address());
    EXPECT_EQ(vdev->pci().sriov().vf_index(), static_cast<uint32_t>(i));
    EXPECT_EQ(vdev->ports(0).netdev(), vf.netdevs(0));
  }

  // GPU i and its compute NIC share a switch.
  const char* compute[] = {"mlx5_0", "mlx5_3", "mlx5_4",  "mlx5_5",
                           "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"};
  std::vector<std::string> gpus = SpecGpus(0x030200);
  ASSERT_EQ(gpus.size(), 8u);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(Dist(h, gpus[i], compute[i]), DISTANCE_CLASS_PIX) << i;
  EXPECT_EQ(Dist(h, gpus[0], "mlx5_3"), DISTANCE_CLASS_NODE);
  EXPECT_EQ(Dist(h, gpus[0], "mlx5_9"), DISTANCE_CLASS_SYS);

  // The front end has no RDMA: still listed, as the default-route netdev.
  EXPECT_THAT(h.default_route_netdevs(), ElementsAre("eno1"));
  ASSERT_NE(Net(h, "eno1"), nullptr);
  EXPECT_TRUE(Net(h, "eno1")->default_route());
  EXPECT_EQ(Net(h, "eno1")->rdma_device(), "");

  // No peer-memory module, but the open kernel module and a 5.15 kernel give dma-buf.
  EXPECT_TRUE(h.gpudirect().available());
  ASSERT_EQ(h.gpudirect().paths_size(), 1);
  EXPECT_EQ(h.gpudirect().paths(0).mechanism(), "dma_buf");
  EXPECT_THAT(h.gpudirect().paths(0).detail(), HasSubstr("550"));
}

TEST_F(DiscoveryTest, AmdAcceleratorsAndBroadcomNics) {
  Host h = Example("amd-mi300x-bnxt");
  EXPECT_THAT(AllProblems(h), IsEmpty());
  int amd = 0, other = 0;
  for (const Accelerator& a : h.accelerators()) {
    EXPECT_EQ(a.kind(), ACCELERATOR_KIND_PROCESSING_ACCELERATOR) << a.pci_address();
    if (a.vendor() == ACCELERATOR_VENDOR_AMD) {
      ++amd;
      EXPECT_EQ(a.vendor_name(), "AMD");
      EXPECT_EQ(a.pci().driver(), "amdgpu");
    } else {
      ++other;
      EXPECT_EQ(a.vendor(), ACCELERATOR_VENDOR_OTHER);
      EXPECT_EQ(a.vendor_name(), "Tenstorrent");
    }
  }
  EXPECT_EQ(amd, 8);
  EXPECT_EQ(other, 1);
  const RdmaDevice* b0 = Dev(h, "bnxt_re0");
  const RdmaDevice* b4 = Dev(h, "bnxt_re4");
  ASSERT_NE(b0, nullptr);
  ASSERT_NE(b4, nullptr);
  EXPECT_EQ(b0->pci().driver(), "bnxt_en");
  EXPECT_EQ(b0->pci().vendor_id(), "14e4");
  ASSERT_NE(GidAt(b0->ports(0), 3), nullptr);
  EXPECT_EQ(GidAt(b0->ports(0), 3)->type(), GID_TYPE_ROCE_V2);
  // bnxt_re4..7 only have RoCE v2 entries: IPv4 at index 1.
  ASSERT_NE(GidAt(b4->ports(0), 1), nullptr);
  EXPECT_EQ(GidAt(b4->ports(0), 1)->type(), GID_TYPE_ROCE_V2);
  EXPECT_EQ(GidAt(b4->ports(0), 1)->ipv4(), "10.224.4.5");
  EXPECT_EQ(b4->ports(0).gids_size(), 2);
  EXPECT_EQ(h.gpudirect().paths_size(), 1);
  EXPECT_EQ(h.gpudirect().paths(0).mechanism(), "dma_buf");
  EXPECT_THAT(h.gpudirect().paths(0).detail(), HasSubstr("amdgpu"));
}

TEST_F(DiscoveryTest, ManyHcasWithADownPort) {
  Host h = Example("many-hcas");
  EXPECT_THAT(AllProblems(h), IsEmpty());
  ASSERT_EQ(h.rdma_devices_size(), 12);
  EXPECT_EQ(h.rdma_devices(11).name(), "mlx5_11");
  const RdmaDevice* down = Dev(h, "mlx5_2");
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->ports(0).state(), PORT_STATE_DOWN);
  EXPECT_EQ(down->ports(0).phys_state(), PHYS_STATE_DISABLED);
  const Netdev* nd = Net(h, down->ports(0).netdev());
  ASSERT_NE(nd, nullptr);
  EXPECT_EQ(nd->operstate(), "down");
  EXPECT_FALSE(nd->has_speed_mbps());  // no speed file: unknown, not a problem
  EXPECT_THAT(h.numa_nodes(), ElementsAre(0));
}

TEST_F(DiscoveryTest, Ipv6OnlyRoceHostFillsIpv6) {
  Host h = Example("ipv6-roce");
  EXPECT_THAT(AllProblems(h), IsEmpty());
  ASSERT_EQ(h.rdma_devices_size(), 2);
  for (const RdmaDevice& d : h.rdma_devices()) {
    ASSERT_EQ(d.ports_size(), 1) << d.name();
    const Port& p = d.ports(0);
    EXPECT_EQ(p.link_layer(), LINK_LAYER_ETHERNET) << d.name();
    ASSERT_EQ(p.gids_size(), 4) << d.name();
    for (const Gid& g : p.gids()) {
      EXPECT_EQ(g.ipv4(), "") << d.name() << " GID " << g.index();
      EXPECT_EQ(g.netdev(), p.netdev()) << d.name() << " GID " << g.index();
    }
    // Link-local GIDs carry no routable address.
    EXPECT_EQ(GidAt(p, 0)->ipv6(), "");
    EXPECT_EQ(GidAt(p, 1)->ipv6(), "");
  }
  const Port& p0 = Dev(h, "mlx5_0")->ports(0);
  EXPECT_EQ(p0.netdev(), "enp24s0np0");
  EXPECT_EQ(GidAt(p0, 2)->gid(), "2001:0db8:0a00:0001:0e42:a1ff:fe03:0000");
  EXPECT_EQ(GidAt(p0, 2)->ipv6(), "2001:db8:a00:1:e42:a1ff:fe03:0");
  EXPECT_EQ(GidAt(p0, 3)->ipv6(), "2001:db8:a00:1:e42:a1ff:fe03:0");
  EXPECT_EQ(GidAt(p0, 3)->type(), GID_TYPE_ROCE_V2);
  EXPECT_EQ(GidAt(Dev(h, "mlx5_1")->ports(0), 3)->ipv6(), "2001:db8:a00:2:e42:a1ff:fe03:1");
}

TEST_F(DiscoveryTest, InfiniBandPrefixOnlySlotsAreEmpty) {
  Host h = Example("ib-prefix-gids");
  EXPECT_THAT(AllProblems(h), IsEmpty());
  ASSERT_EQ(h.rdma_devices_size(), 2);
  // The spec has 128 listed slots per port; 127 of them are the subnet prefix alone.
  ASSERT_EQ(spec_.FindRdma("mlx5_0")->ports[0].gids.size(), 128u);
  for (const RdmaDevice& d : h.rdma_devices()) {
    const Port& p = d.ports(0);
    EXPECT_EQ(p.link_layer(), LINK_LAYER_INFINIBAND) << d.name();
    ASSERT_EQ(p.gids_size(), 1) << d.name();
    EXPECT_EQ(p.gids(0).index(), 0u);
    EXPECT_EQ(p.gids(0).gid(), testing::LinkLocalGidFromGuid(d.node_guid())) << d.name();
    EXPECT_EQ(p.gids(0).type(), GID_TYPE_IB);
    EXPECT_EQ(p.gids(0).ipv6(), "");
  }
}

TEST_F(DiscoveryTest, TrailingNulAfterTheNewlineParses) {
  // Some drivers' attributes end "\n\0": the same host reads the same with them.
  auto spec = testing::ExampleHost("ipv6-roce");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const Host clean = Discovered(*spec);
  fs::remove_all(dir_);
  spec->after_write = [](const fs::path& dir) {
    const fs::path port = dir / "sys/class/infiniband/mlx5_0/ports/1";
    for (const char* rel :
         {"gids/3", "gid_attrs/types/3", "gid_attrs/ndevs/3", "link_layer", "state", "rate"}) {
      std::string text;
      {
        std::ifstream in(port / rel);
        std::getline(in, text);
      }
      std::ofstream(port / rel, std::ios::trunc) << text << '\n' << '\0';
    }
    return absl::OkStatus();
  };
  const Host nul = Discovered(*spec);
  EXPECT_THAT(AllProblems(nul), IsEmpty());
  const Port& p = Dev(nul, "mlx5_0")->ports(0);
  EXPECT_EQ(p.link_layer(), LINK_LAYER_ETHERNET);
  EXPECT_EQ(p.state(), PORT_STATE_ACTIVE);
  EXPECT_EQ(p.rate_gbps(), 400);
  ASSERT_NE(GidAt(p, 3), nullptr);
  EXPECT_EQ(GidAt(p, 3)->gid(), "2001:0db8:0a00:0001:0e42:a1ff:fe03:0000");
  EXPECT_EQ(GidAt(p, 3)->type(), GID_TYPE_ROCE_V2);
  EXPECT_EQ(GidAt(p, 3)->netdev(), "enp24s0np0");
  EXPECT_EQ(Dev(nul, "mlx5_0")->DebugString(), Dev(clean, "mlx5_0")->DebugString());
}

// Each damage of the "broken" host leaves exactly its field unknown, with the reason.
TEST_F(DiscoveryTest, BrokenTreeLosesOnlyWhatIsBroken) {
  Host h = Example("broken");
  std::vector<std::string> problems = AllProblems(h);
  auto has = [&](const std::string& needle) {
    return std::any_of(problems.begin(), problems.end(),
                       [&](const std::string& p) { return p.find(needle) != std::string::npos; });
  };
  // a. fw_ver missing.
  EXPECT_TRUE(has("mlx5_1: fw_ver")) << ::testing::PrintToString(problems);
  EXPECT_EQ(Dev(h, "mlx5_1")->fw_ver(), "");
  EXPECT_FALSE(Dev(h, "mlx5_1")->node_guid().empty());
  // b. garbage rate and state.
  const Port& p2 = Dev(h, "mlx5_2")->ports(0);
  EXPECT_FALSE(p2.has_rate_gbps());
  EXPECT_EQ(p2.rate(), "fast");
  EXPECT_EQ(p2.state(), PORT_STATE_UNSPECIFIED);
  EXPECT_TRUE(has("mlx5_2:1: rate_gbps"));
  EXPECT_TRUE(has("mlx5_2:1: state"));
  EXPECT_TRUE(has("\"banana\\n\""));
  EXPECT_EQ(p2.link_layer(), LINK_LAYER_ETHERNET);
  // c. one garbage GID: the others stay.
  const Port& p3 = Dev(h, "mlx5_3")->ports(0);
  EXPECT_EQ(GidAt(p3, 3), nullptr);
  EXPECT_NE(GidAt(p3, 2), nullptr);
  EXPECT_TRUE(has("mlx5_3:1: gids"));
  // d. NUMA and link width of mlx5_4's function.
  const RdmaDevice* d4 = Dev(h, "mlx5_4");
  EXPECT_FALSE(d4->pci().has_numa_node());
  EXPECT_FALSE(d4->pci().current_link().has_width());
  EXPECT_TRUE(d4->pci().current_link().has_speed_gts());
  EXPECT_TRUE(has("mlx5_4 pci: numa_node"));
  EXPECT_TRUE(has("mlx5_4 pci: current_link.width"));
  // e. no gid_attrs (a container): GIDs without types, and no problem for it.
  const Port& p5 = Dev(h, "mlx5_5")->ports(0);
  ASSERT_NE(GidAt(p5, 3), nullptr);
  EXPECT_EQ(GidAt(p5, 3)->type(), GID_TYPE_UNSPECIFIED);
  EXPECT_EQ(GidAt(p5, 3)->ipv4(), "25.11.128.15");
  EXPECT_FALSE(has("mlx5_5:1"));
  // f. a dangling class link: the device is named, with the reason.
  ASSERT_NE(Dev(h, "mlx5_9"), nullptr);
  EXPECT_TRUE(has("mlx5_9: name"));
  EXPECT_EQ(Dev(h, "mlx5_9")->ports_size(), 0);
  // g. a dangling device link: no PCI function, but ports still read.
  const RdmaDevice* d6 = Dev(h, "mlx5_6");
  EXPECT_FALSE(d6->has_pci());
  EXPECT_TRUE(has("mlx5_6: pci"));
  EXPECT_EQ(d6->ports(0).state(), PORT_STATE_ACTIVE);
  // h. a GPU whose class is garbage is not classified, and says so.
  EXPECT_TRUE(has("host: accelerators"));
  EXPECT_TRUE(has("0xZZ"));
  int gpus = 0;
  for (const Accelerator& a : h.accelerators()) gpus += a.management_display() ? 0 : 1;
  EXPECT_EQ(gpus, 7);
  // i. an escaping class/net link does not stop eth7 being found through its PCI function.
  ASSERT_NE(Net(h, "eth7"), nullptr);
  EXPECT_EQ(Net(h, "eth7")->mtu(), spec_.FindNetdev("eth7")->mtu);
  // j. one garbage route line: the other routes stay.
  EXPECT_TRUE(has("garbage line"));
  EXPECT_THAT(h.default_route_netdevs(), ElementsAre("eth0"));
  // k. a symlink loop in bus/pci/devices.
  EXPECT_TRUE(has("0000:aa:00.0"));
  // l. an unknown GID type.
  const Port& p8 = Dev(h, "mlx5_8")->ports(0);
  ASSERT_NE(GidAt(p8, 3), nullptr);
  EXPECT_EQ(GidAt(p8, 3)->type(), GID_TYPE_UNSPECIFIED);
  EXPECT_TRUE(has("RoCE v9"));
  // Everything else is whole.
  EXPECT_EQ(h.rdma_devices_size(), 10);
  EXPECT_EQ(Dev(h, "mlx5_7")->ports(0).gids_size(), 4);
}

// A device that vanishes and comes back while discovery runs (driver reload, PCI reset): never a
// crash or an error, and nothing else on the host is lost.
TEST_F(DiscoveryTest, DeviceVanishingMidDiscovery) {
  Host before = Example("roce-9port");
  auto rel = testing::PciFunctionPath(spec_, spec_.FindRdma("mlx5_4")->pci);
  ASSERT_TRUE(rel.ok()) << rel.status();
  const fs::path dev = dir_ / "sys" / *rel;
  const fs::path gone = fs::path(dev.string() + ".gone");
  std::atomic<bool> stop{false};
  std::atomic<int> flips{0};
  std::thread churn([&] {
    // Bounded: stops when discovery is done, or after 20 s whatever happens.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    std::error_code ec;
    while (!stop && std::chrono::steady_clock::now() < deadline) {
      fs::rename(dev, gone, ec);
      fs::rename(gone, dev, ec);
      ++flips;
    }
  });
  HostFsImpl sys((dir_ / "sys").string());
  HostFsImpl proc((dir_ / "proc").string());
  int complete = 0;
  for (int i = 0; i < 40; ++i) {
    auto h = Discover(sys, proc);
    ASSERT_TRUE(h.ok()) << h.status();
    ASSERT_EQ(h->rdma_devices_size(), 9);
    for (const RdmaDevice& d : h->rdma_devices()) {
      if (d.name() == "mlx5_4") {
        complete += d.problems().empty() && d.ports_size() == 1 && d.ports(0).problems().empty() &&
                    d.ports(0).gids_size() == 4;
        continue;
      }
      // Every other device is whole on every pass.
      const RdmaDevice* was = Dev(before, d.name());
      ASSERT_NE(was, nullptr);
      EXPECT_EQ(d.SerializeAsString(), was->SerializeAsString()) << d.name() << " pass " << i;
    }
  }
  stop = true;
  churn.join();
  EXPECT_GT(flips.load(), 0);
  std::error_code ec;
  if (!fs::exists(dev)) fs::rename(gone, dev, ec);
  // Once it is back for good, it is discovered whole again.
  auto after = Discover(sys, proc);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(Dev(*after, "mlx5_4")->SerializeAsString(), Dev(before, "mlx5_4")->SerializeAsString());
  ::testing::Test::RecordProperty("complete_passes", complete);
}

// Files an unprivileged reader may not open (a DaemonSet without CAP_DAC_READ_SEARCH sees some
// mode-0400 attributes this way) and files cut short: each costs only its own field, with the
// reason, and discovery itself succeeds. Runs discovery in a child that dropped to nobody (root
// reads through any mode), so it needs root to set up.
TEST_F(DiscoveryTest, PermissionDeniedAndTruncatedFilesLoseOnlyTheirField) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to drop to an unprivileged reader";
  Host before = Example("roce-9port");
  const fs::path ib = dir_ / "sys/class/infiniband";
  fs::permissions(ib / "mlx5_1/fw_ver", fs::perms::owner_read);  // 0400, owner root
  fs::permissions(ib / "mlx5_2/ports/1/gids/3", fs::perms::none);
  fs::permissions(ib / "mlx5_3/ports/1/rate", fs::perms::none);
  {
    std::ofstream(ib / "mlx5_4/ports/1/gids/1", std::ios::trunc) << "fe80:0000:0000";  // cut short
    std::ofstream(ib / "mlx5_5/ports/1/state", std::ios::trunc) << "";                 // empty
  }
  // Every directory must stay traversable for the child: the tree is under a 0700 temp dir.
  for (fs::path p = dir_; p != p.root_path(); p = p.parent_path()) {
    fs::permissions(p, fs::perms::others_exec, fs::perm_options::add);
  }
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(out[0]);
    if (setgroups(0, nullptr) != 0 || setresgid(65534, 65534, 65534) != 0 ||
        setresuid(65534, 65534, 65534) != 0) {
      _exit(3);
    }
    HostFsImpl sys((dir_ / "sys").string());
    HostFsImpl proc((dir_ / "proc").string());
    auto h = Discover(sys, proc);
    if (!h.ok()) _exit(2);
    const std::string bytes = h->SerializeAsString();
    size_t done = 0;
    while (done < bytes.size()) {
      ssize_t n = write(out[1], bytes.data() + done, bytes.size() - done);
      if (n <= 0) _exit(4);
      done += static_cast<size_t>(n);
    }
    _exit(0);
  }
  close(out[1]);
  std::string bytes;
  char buf[65536];
  ssize_t n;
  while ((n = read(out[0], buf, sizeof buf)) > 0) bytes.append(buf, static_cast<size_t>(n));
  close(out[0]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  Host h;
  ASSERT_TRUE(h.ParseFromString(bytes));
  std::vector<std::string> problems = AllProblems(h);
  auto has = [&](const std::string& a, const std::string& b) {
    return std::any_of(problems.begin(), problems.end(), [&](const std::string& p) {
      return p.find(a) != std::string::npos && p.find(b) != std::string::npos;
    });
  };
  EXPECT_TRUE(has("mlx5_1: fw_ver", "Permission denied")) << ::testing::PrintToString(problems);
  EXPECT_EQ(Dev(h, "mlx5_1")->fw_ver(), "");
  EXPECT_EQ(Dev(h, "mlx5_1")->node_guid(), Dev(before, "mlx5_1")->node_guid());
  EXPECT_TRUE(has("mlx5_2:1: gids", "Permission denied")) << ::testing::PrintToString(problems);
  EXPECT_EQ(GidAt(Dev(h, "mlx5_2")->ports(0), 3), nullptr);
  EXPECT_NE(GidAt(Dev(h, "mlx5_2")->ports(0), 2), nullptr);
  EXPECT_TRUE(has("mlx5_3:1: rate", "Permission denied")) << ::testing::PrintToString(problems);
  EXPECT_FALSE(Dev(h, "mlx5_3")->ports(0).has_rate_gbps());
  EXPECT_EQ(Dev(h, "mlx5_3")->ports(0).state(), PORT_STATE_ACTIVE);
  EXPECT_TRUE(has("mlx5_4:1: gids", "fe80:0000:0000")) << ::testing::PrintToString(problems);
  EXPECT_NE(GidAt(Dev(h, "mlx5_4")->ports(0), 3), nullptr);
  EXPECT_TRUE(has("mlx5_5:1: state", "")) << ::testing::PrintToString(problems);
  EXPECT_EQ(Dev(h, "mlx5_5")->ports(0).state(), PORT_STATE_UNSPECIFIED);
  // Permission denied may not last (a rescan must not take it for a fact); a file cut short is
  // what the file says.
  for (const FieldProblem& p : Dev(h, "mlx5_1")->problems()) {
    EXPECT_EQ(p.transient(), p.field() == "fw_ver") << p.ShortDebugString();
  }
  for (const FieldProblem& p : Dev(h, "mlx5_4")->ports(0).problems()) {
    EXPECT_FALSE(p.transient()) << p.ShortDebugString();
  }
  // The devices nobody touched are exactly as before.
  for (const char* name : {"mlx5_0", "mlx5_6", "mlx5_7", "mlx5_8"}) {
    EXPECT_EQ(Dev(h, name)->SerializeAsString(), Dev(before, name)->SerializeAsString()) << name;
  }
}

TEST_F(DiscoveryTest, DiscoveryIsDeterministic) {
  Host a = Example("roce-9port");
  HostFsImpl sys((dir_ / "sys").string());
  HostFsImpl proc((dir_ / "proc").string());
  auto b = Discover(sys, proc);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a.SerializeAsString(), b->SerializeAsString());
}

TEST_F(DiscoveryTest, MissingProcfsIsAProblemNotAFailure) {
  auto spec = testing::ExampleHost("roce-9port");
  ASSERT_TRUE(spec.ok());
  Host with = Discovered(*spec);
  HostFsImpl sys((dir_ / "sys").string());
  HostFsImpl proc((dir_ / "no-proc").string());
  auto h = Discover(sys, proc);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->rdma_devices_size(), 9);
  EXPECT_EQ(h->hostname(), "");
  EXPECT_THAT(h->default_route_netdevs(), IsEmpty());
  bool route_problem = false;
  for (const FieldProblem& p : h->problems()) route_problem |= p.field() == "routes";
  EXPECT_TRUE(route_problem);
}

TEST(Discover, RootErrors) {
  HostFsImpl proc("/nonexistent-proc");
  HostFsImpl missing("/nonexistent-sysfs-root");
  auto h = Discover(missing, proc);
  ASSERT_FALSE(h.ok());
  EXPECT_TRUE(absl::IsNotFound(h.status()));
  EXPECT_THAT(std::string(h.status().message()), HasSubstr("/nonexistent-sysfs-root"));

  std::string tmpl = testing::MakeTempDir("notsysfs");
  ASSERT_FALSE(tmpl.empty());
  HostFsImpl empty(tmpl);
  auto e = Discover(empty, proc);
  ASSERT_FALSE(e.ok());
  EXPECT_THAT(std::string(e.status().message()), HasSubstr("not a sysfs root"));
  fs::remove_all(tmpl);
}

TEST_F(DiscoveryTest, HostWithoutRdma) {
  auto spec = testing::ExampleHost("roce-9port");
  ASSERT_TRUE(spec.ok());
  std::vector<std::string> names;
  for (const auto& d : spec->rdma) names.push_back(d.name);
  for (const auto& n : names) ASSERT_TRUE(spec->RemoveRdma(n));
  Host h = Discovered(*spec);
  EXPECT_EQ(h.rdma_devices_size(), 0);
  EXPECT_EQ(h.topology_size(), 0);
  EXPECT_FALSE(h.gpudirect().available());
  EXPECT_EQ(h.gpudirect().reason(), "no RDMA device");
  EXPECT_EQ(h.accelerators_size(), 9);
}

// Soft-RoCE on virtio-net, as in a VM: the netdev sits on the virtio bus device below the PCI
// function (<bdf>/virtio2/net/ens4), and still belongs to that function (the agent listens for
// LLDP on netdevs of a PCI function).
TEST_F(DiscoveryTest, RxeOnVirtioNetBelongsToItsPciFunction) {
  auto spec = testing::ExampleHost("roce-9port");
  ASSERT_TRUE(spec.ok());
  testing::PciFunctionSpec fn;
  fn.bdf = "0000:00:04.0";
  fn.parent = spec->root_complexes.front().name;
  fn.vendor = 0x1af4;
  fn.device = 0x1041;
  fn.class_code = 0x020000;
  fn.driver = "virtio-pci";
  spec->pci.push_back(fn);
  testing::NetdevSpec nd;
  nd.name = "ens4";
  nd.pci = fn.bdf;
  nd.virtio = "virtio2";
  nd.mac = "52:54:00:4e:78:01";
  spec->netdevs.push_back(nd);
  testing::RdmaDeviceSpec rxe;
  rxe.name = "rxe0";
  rxe.parent = "ens4";
  rxe.node_guid = "5054:00ff:fe4e:7801";
  rxe.ports.emplace_back();
  spec->rdma.push_back(rxe);
  Host h = Discovered(*spec);
  const Netdev* ens4 = Net(h, "ens4");
  ASSERT_NE(ens4, nullptr);
  EXPECT_EQ(ens4->pci_address(), "0000:00:04.0");
  EXPECT_EQ(ens4->rdma_device(), "rxe0");
  EXPECT_EQ(ens4->rdma_port(), 1u);
  EXPECT_FALSE(ens4->upper());
}

// HostFsImpl that fails chosen paths with a chosen errno, as HostFsImpl itself would report it
// (ErrnoStatus): a path fails when it is a rule's path or ends with "/" and it, for every call
// that names it, directly or relative to an open directory.
class FailingHostFs final : public HostFs {
 public:
  FailingHostFs(std::string root, std::map<std::string, int> rules)
      : real_(std::move(root)), rules_(std::move(rules)) {}

  std::optional<absl::Status> Fail(std::string_view path, const char* what) const {
    for (const auto& [suffix, err] : rules_) {
      if (path == suffix ||
          (path.size() > suffix.size() && path.substr(path.size() - suffix.size()) == suffix &&
           path[path.size() - suffix.size() - 1] == '/')) {
        ++failed;
        return ErrnoStatus(err, what, path);
      }
    }
    return std::nullopt;
  }

  const std::string& root() const override { return real_.root(); }
  absl::StatusOr<std::string> ReadFile(std::string_view path) const override {
    if (auto f = Fail(path, "open")) return *f;
    return real_.ReadFile(path);
  }
  absl::StatusOr<std::vector<std::string>> ListDir(std::string_view path) const override {
    if (auto f = Fail(path, "opendir")) return *f;
    return real_.ListDir(path);
  }
  absl::StatusOr<std::string> ReadLink(std::string_view path) const override {
    if (auto f = Fail(path, "readlink")) return *f;
    return real_.ReadLink(path);
  }
  absl::StatusOr<std::string> RealPath(std::string_view path) const override {
    if (auto f = Fail(path, "lstat")) return *f;
    return real_.RealPath(path);
  }
  bool Exists(std::string_view path) const override { return real_.Exists(path); }
  absl::StatusOr<std::unique_ptr<HostDir>> OpenDir(std::string_view path) const override {
    if (auto f = Fail(path, "opendir")) return *f;
    auto d = real_.OpenDir(path);
    if (!d.ok()) return d.status();
    return std::unique_ptr<HostDir>(new Dir(this, *std::move(d)));
  }

  mutable std::atomic<int> failed{0};

 private:
  class Dir final : public HostDir {
   public:
    Dir(const FailingHostFs* fs, std::unique_ptr<HostDir> real) : fs_(fs), real_(std::move(real)) {}
    const std::string& path() const override { return real_->path(); }
    absl::StatusOr<std::string> ReadFile(std::string_view name) const override {
      if (auto f = fs_->Fail(JoinPath(path(), name), "open")) return *f;
      return real_->ReadFile(name);
    }
    absl::StatusOr<size_t> ReadSmall(std::string_view name, char* buf, size_t size) const override {
      if (auto f = fs_->Fail(JoinPath(path(), name), "open")) return *f;
      return real_->ReadSmall(name, buf, size);
    }
    absl::StatusOr<std::vector<std::string>> ListDir(std::string_view name) const override {
      if (auto f = fs_->Fail(JoinPath(path(), name), "opendir")) return *f;
      return real_->ListDir(name);
    }
    bool Exists(std::string_view name) const override { return real_->Exists(name); }
    absl::StatusOr<std::unique_ptr<HostDir>> OpenDir(std::string_view name) const override {
      if (auto f = fs_->Fail(JoinPath(path(), name), "opendir")) return *f;
      auto d = real_->OpenDir(name);
      if (!d.ok()) return d.status();
      return std::unique_ptr<HostDir>(new Dir(fs_, *std::move(d)));
    }

   private:
    const FailingHostFs* fs_;
    std::unique_ptr<HostDir> real_;
  };

  HostFsImpl real_;
  std::map<std::string, int> rules_;
};

class TransientTest : public DiscoveryTest {
 protected:
  // Discovers the example host written by Example(), with `rules` failing reads.
  Host Failing(std::map<std::string, int> rules, int* failed = nullptr) {
    FailingHostFs sys((dir_ / "sys").string(), std::move(rules));
    HostFsImpl proc((dir_ / "proc").string());
    auto h = Discover(sys, proc);
    EXPECT_TRUE(h.ok()) << h.status();
    if (failed != nullptr) *failed = sys.failed.load();
    return h.ok() ? *h : Host();
  }
  // Every problem as "where: field @path", split by whether it is transient.
  static std::vector<std::string> Problems(const Host& h, bool transient) {
    std::vector<std::string> out;
    ForEachProblem(h, [&](const std::string& where, const FieldProblem& p) {
      if (p.transient() == transient) out.push_back(where + ": " + p.field() + " @" + p.path());
    });
    return out;
  }
};

// EMFILE while listing class/infiniband (the incident): no device is found, and the host says
// that this is no fact, so the daemon does not publish it.
TEST_F(TransientTest, DeviceListUnreadableIsTransient) {
  Host before = Example("roce-9port");
  EXPECT_THAT(Problems(before, true), IsEmpty());
  for (int err : {EMFILE, ENFILE, ENOMEM, EIO, EACCES, EAGAIN}) {
    int failed = 0;
    Host h = Failing({{"class/infiniband", err}}, &failed);
    EXPECT_GT(failed, 0);
    EXPECT_EQ(h.rdma_devices_size(), 0) << err;
    EXPECT_THAT(Problems(h, true), ElementsAre("host: rdma_devices @class/infiniband")) << err;
  }
  // No ib_core at all (ENOENT) is a host without RDMA, as before: no problem.
  Host gone = Failing({{"class/infiniband", ENOENT}});
  EXPECT_EQ(gone.rdma_devices_size(), 0);
  EXPECT_THAT(Problems(gone, true), IsEmpty());
}

// Each level of the model: the failed read is a transient problem where the field sits; what is
// gone (ENOENT, ENOTDIR, ENODEV, ENXIO) and EINVAL are ordinary problems (or none), as before.
TEST_F(TransientTest, EachLevelMarksTransientReads) {
  Host before = Example("roce-9port");
  Host h = Failing({{"mlx5_2/ports/1/gids/3", EIO},
                    {"mlx5_3/ports/1/rate", EACCES},
                    {"mlx5_1/fw_ver", EMFILE},
                    {"mlx5_4/ports/1/gid_attrs/types/1", EINVAL},
                    {"mlx5_5/ports/1/state", ENODEV},
                    {"mlx5_6/ports/1/phys_state", ENOENT},
                    {"mlx5_7/ports/1/lid", ENXIO},
                    {"class/infiniband_verbs", EMFILE}});
  EXPECT_EQ(h.rdma_devices_size(), 9);
  EXPECT_THAT(Problems(h, true),
              ::testing::UnorderedElementsAre(
                  "host: uverbs_device @class/infiniband_verbs", HasSubstr("mlx5_1: fw_ver @"),
                  HasSubstr("mlx5_2:1: gids @"), HasSubstr("mlx5_3:1: rate @")));
  EXPECT_THAT(Problems(h, false),
              ::testing::UnorderedElementsAre(HasSubstr("mlx5_5:1: state @"),
                                              HasSubstr("mlx5_6:1: phys_state @"),
                                              HasSubstr("mlx5_7:1: lid @")));
  // The EINVAL of an unused GID attribute is no problem at all, as before.
  EXPECT_EQ(GidAt(Dev(h, "mlx5_4")->ports(0), 1)->type(), GID_TYPE_UNSPECIFIED);
}

// Reads whose failure used to be silent (a module not loaded, no SR-IOV, no netdev) now record
// a transient failure: otherwise a netdev or a uverbs node would vanish without a trace.
TEST_F(TransientTest, FormerlySilentReadsRecordTransientFailures) {
  Host before = Example("roce-9port");
  const auto rel = testing::PciFunctionPath(spec_, spec_.FindRdma("mlx5_1")->pci);
  ASSERT_TRUE(rel.ok()) << rel.status();
  ASSERT_NE(Net(before, "eth1"), nullptr) << ::testing::PrintToString(AllProblems(before));
  Host h = Failing({{*rel + "/net", EMFILE}});
  EXPECT_THAT(Problems(h, true), ElementsAre("mlx5_1: netdevs @" + *rel + "/net"));
  // ENOENT (the device has no net/ directory) is silent, as before.
  Host none = Failing({{*rel + "/net", ENOENT}});
  EXPECT_THAT(Problems(none, true), IsEmpty());
  EXPECT_EQ(Problems(none, false), Problems(before, false));
}

// A device that is really gone (its class/infiniband link removed) is removed, with no transient
// problem: evidence, so the daemon publishes it.
TEST_F(TransientTest, ADeviceThatIsGoneIsRemovedWithoutTransientProblems) {
  Host before = Example("roce-9port");
  fs::remove(dir_ / "sys/class/infiniband/mlx5_3");
  Host h = Failing({});
  EXPECT_EQ(h.rdma_devices_size(), 8);
  EXPECT_EQ(Dev(h, "mlx5_3"), nullptr);
  EXPECT_THAT(Problems(h, true), IsEmpty());
}

// GPU names: NVIDIA UUIDs from procfs, AMD's unique_id, indices in nvidia-smi / rocm-smi order.
TEST_F(DiscoveryTest, GpuUuidsAndIndices) {
  Host dgx = Example("dgx-h100-ib");
  std::map<std::string, std::string> want;  // BDF -> UUID from the spec's information files
  for (const auto& [bdf, text] : spec_.nvidia_gpu_information) {
    const size_t at = text.find("GPU-");
    want[bdf] = text.substr(at, 40);
  }
  ASSERT_EQ(want.size(), 8u);
  uint32_t next = 0;
  for (const Accelerator& a : dgx.accelerators()) {
    ASSERT_TRUE(want.count(a.pci_address())) << a.pci_address();
    EXPECT_EQ(a.uuid(), want[a.pci_address()]);
    EXPECT_THAT(a.uuid(), ::testing::MatchesRegex("GPU-[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}"));
    ASSERT_TRUE(a.has_index()) << a.pci_address();
    EXPECT_EQ(a.index(), next++);
  }
  EXPECT_EQ(dgx.accelerators(0).uuid(), "GPU-c15521b1-b3dc-a50a-9daa-37e51b591d75");

  Host amd = Example("amd-mi300x-bnxt");
  next = 0;
  for (const Accelerator& a : amd.accelerators()) {
    if (a.vendor() != ACCELERATOR_VENDOR_AMD) {
      EXPECT_FALSE(a.has_index()) << a.pci_address();  // Tenstorrent: no vendor order
      EXPECT_EQ(a.uuid(), "");
      continue;
    }
    EXPECT_THAT(a.uuid(), ::testing::MatchesRegex("GPU-[0-9a-f]{16}"));
    ASSERT_TRUE(a.has_index());
    EXPECT_EQ(a.index(), next++);
  }
  EXPECT_EQ(next, 8u);
  EXPECT_EQ(amd.accelerators(0).uuid(), "GPU-5c54e05b42a9ba21");

  // NVIDIA GPUs without procfs information (driver not loaded) still have their index; the BMC
  // display has none.
  Host roce = Example("roce-9port");
  EXPECT_THAT(AllProblems(roce), IsEmpty());
  next = 0;
  for (const Accelerator& a : roce.accelerators()) {
    EXPECT_EQ(a.uuid(), "");
    if (a.management_display()) {
      EXPECT_FALSE(a.has_index());
    } else {
      EXPECT_EQ(a.index(), next++);
    }
  }
  EXPECT_EQ(next, 8u);
}

TEST_F(DiscoveryTest, MalformedGpuInformationIsAProblemAndCoProcessorsCount) {
  auto spec = testing::ExampleHost("dgx-h100-ib");
  ASSERT_TRUE(spec.ok());
  spec->nvidia_gpu_information[1].second = "Model: NVIDIA H100\nGPU UUID: GPU-not-a-uuid\n";
  // A co-processor (class 0x0b40) of another vendor counts as an accelerator.
  spec->FindPci(spec->nvidia_gpu_information[2].first)->class_code = 0x0b4000;
  Host h = Discovered(*spec);
  ASSERT_EQ(h.accelerators_size(), 8);
  const std::string bad = spec->nvidia_gpu_information[1].first;
  bool found = false;
  for (const FieldProblem& p : h.problems()) {
    if (p.field() == "accelerators.uuid" && p.path().find(bad) != std::string::npos) found = true;
  }
  EXPECT_TRUE(found) << ::testing::PrintToString(AllProblems(h));
  EXPECT_EQ(h.accelerators(1).uuid(), "");
  EXPECT_EQ(h.accelerators(1).index(), 1u);
  EXPECT_EQ(h.accelerators(2).kind(), ACCELERATOR_KIND_PROCESSING_ACCELERATOR);
  EXPECT_FALSE(h.accelerators(2).uuid().empty());
}

}  // namespace
}  // namespace fabric
