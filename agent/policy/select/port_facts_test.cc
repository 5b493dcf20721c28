#include "agent/policy/select/port_facts.h"

#include <string>

#include "agent/policy/select/select.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/hosts/model_builder.h"

namespace fabric {
namespace {

using ::testing::HasSubstr;
using testing::ModelBuilder;

v1::Accelerator Gpu(v1::AcceleratorVendor vendor, const std::string& name) {
  v1::Accelerator a;
  a.set_pci_address("0000:17:00.0");
  a.set_vendor(vendor);
  a.set_vendor_name(name);
  return a;
}

v1::Host WithPaths(std::initializer_list<std::pair<const char*, const char*>> paths,
                   const std::string& reason = "") {
  v1::Host h;
  v1::GpuDirect* gd = h.mutable_gpudirect();
  for (const auto& [mechanism, detail] : paths) {
    v1::GpuDirectPath* p = gd->add_paths();
    p->set_mechanism(mechanism);
    p->set_detail(detail);
  }
  gd->set_reason(reason);
  gd->set_available(paths.size() > 0);
  return h;
}

TEST(GpuDirectTest, DecidedFromTheHostsPathsTheGpusVendorAndThePciePath) {
  const v1::Accelerator nvidia = Gpu(v1::ACCELERATOR_VENDOR_NVIDIA, "NVIDIA");
  const v1::Accelerator amd = Gpu(v1::ACCELERATOR_VENDOR_AMD, "AMD");
  const v1::Host peermem = WithPaths({{"nvidia_peermem", "module nvidia_peermem loaded"}});
  const v1::Host both = WithPaths({{"nvidia_peermem", "module nvidia_peermem loaded"},
                                   {"dma_buf",
                                    "kernel 6.1.0 imports dma-buf; NVIDIA open kernel "
                                    "module 550 exports it"}});
  const v1::Host amdgpu =
      WithPaths({{"dma_buf", "kernel 6.8.0 imports dma-buf; amdgpu exports it"}});
  const v1::Host none = WithPaths({}, "no nvidia_peermem or nv_peer_mem module loaded");
  struct Case {
    const v1::Host* host;
    const v1::Accelerator* gpu;
    v1::DistanceClass distance;
    const char* want;
    const char* reason;
  } cases[] = {
      {&peermem, &nvidia, v1::DISTANCE_CLASS_PIX, "nvidia_peermem", "the NIC is PIX"},
      {&both, &nvidia, v1::DISTANCE_CLASS_PXB, "dma_buf", "NVIDIA open kernel module"},
      {&peermem, &nvidia, v1::DISTANCE_CLASS_PHB, "none", "only up to PXB"},
      {&both, &nvidia, v1::DISTANCE_CLASS_SYS, "none", "the NIC is SYS"},
      {&peermem, &nvidia, v1::DISTANCE_CLASS_UNSPECIFIED, "nvidia_peermem", "path is unknown"},
      {&peermem, &amd, v1::DISTANCE_CLASS_PIX, "none", "serves AMD GPUs"},
      {&amdgpu, &amd, v1::DISTANCE_CLASS_PIX, "dma_buf", "amdgpu exports it"},
      {&amdgpu, &nvidia, v1::DISTANCE_CLASS_PIX, "none", "serves NVIDIA GPUs"},
      {&none, &nvidia, v1::DISTANCE_CLASS_PIX, "none", "no nvidia_peermem"},
  };
  for (const Case& c : cases) {
    GpuDirectWay got = DecideGpuDirect(*c.host, *c.gpu, c.distance);
    EXPECT_EQ(got.way, c.want) << c.gpu->vendor_name() << " " << c.distance;
    EXPECT_THAT(got.reason, HasSubstr(c.reason)) << c.gpu->vendor_name() << " " << c.distance;
  }
  EXPECT_EQ(DecideGpuDirect(v1::Host(), nvidia, v1::DISTANCE_CLASS_PIX).way, "");
}

TEST(PortRailTest, HeardRailFirstThenTheRailThatNamesThePort) {
  ModelBuilder b;
  v1::RdmaDevice* d0 = b.Device("mlx5_0", "0000:19:00.0");
  b.RocePort(d0, 1, "eth0", "10.0.0.1");
  v1::RdmaDevice* d1 = b.Device("mlx5_1", "0000:29:00.0");
  b.RocePort(d1, 1, "eth1", "10.0.1.1");
  v1::RdmaDevice* d2 = b.Device("mlx5_2", "0000:39:00.0");
  b.RocePort(d2, 1, "eth2", "10.0.2.1");
  v1::SelectionPolicy policy;
  for (const char* name : {"rail-a", "rail-b"}) {
    v1::Rail* r = policy.add_rails();
    r->set_name(name);
    r->set_switch_pattern(std::string(name) + "-*");
  }
  policy.mutable_rails(0)->add_ports("mlx5_0:1");
  policy.mutable_rails(1)->add_ports("eth1");
  // mlx5_0 is listed on rail-a but heard on rail-b: the cable decides.
  b.Netdev("eth0")->mutable_neighbor()->set_rail("rail-b");
  const v1::Host& h = b.Build();
  EXPECT_EQ(PortRailIndex(h, policy, h.rdma_devices(0), h.rdma_devices(0).ports(0)), 1);
  EXPECT_EQ(PortRailIndex(h, policy, h.rdma_devices(1), h.rdma_devices(1).ports(0)), 1);
  EXPECT_EQ(PortRailIndex(h, policy, h.rdma_devices(2), h.rdma_devices(2).ports(0)), std::nullopt);
  EXPECT_TRUE(RailNamesPort(policy.rails(0), h.rdma_devices(0), h.rdma_devices(0).ports(0)));
  EXPECT_FALSE(RailNamesPort(policy.rails(0), h.rdma_devices(1), h.rdma_devices(1).ports(0)));
}

TEST(PortFactsTest, SelectNicsFillsProfileRailAndGpuDirect) {
  ModelBuilder b;
  b.Gpu("0000:17:00.0");
  v1::RdmaDevice* d = b.Device("mlx5_0", "0000:19:00.0");
  d->mutable_pci()->set_driver("mlx5_core");
  b.RocePort(d, 1, "eth0", "10.0.0.1", "10.0.0.0/24");
  v1::Host h = b.Build();
  *h.mutable_gpudirect() = WithPaths({{"nv_peer_mem", "module nv_peer_mem loaded"}}).gpudirect();
  v1::SelectionPolicy policy;
  v1::Rail* r = policy.add_rails();
  r->set_name("r0");
  r->set_switch_pattern("leaf-0-*");
  r->add_ports("mlx5_0");
  absl::StatusOr<v1::Selection> sel = SelectNics(h, {"0000:17:00.0"}, policy);
  ASSERT_TRUE(sel.ok()) << sel.status();
  const v1::GpuAssignment& a = sel->assignments(0);
  EXPECT_EQ(a.nic_profile(), "mlx5");
  EXPECT_EQ(a.rail(), "r0");
  // No topology known: ranked as SYS, so no GPUDirect by NCCL's default level.
  EXPECT_EQ(a.gpudirect(), "none");
  EXPECT_THAT(a.gpudirect_reason(), HasSubstr("the NIC is SYS"));

  v1::TopologyPair* t = h.add_topology();
  t->set_accelerator("0000:17:00.0");
  t->set_rdma_device("mlx5_0");
  t->set_distance(v1::DISTANCE_CLASS_PIX);
  sel = SelectNics(h, {"0000:17:00.0"}, policy);
  ASSERT_TRUE(sel.ok()) << sel.status();
  EXPECT_EQ(sel->assignments(0).gpudirect(), "nv_peer_mem");
  EXPECT_THAT(sel->assignments(0).gpudirect_reason(), HasSubstr("module nv_peer_mem loaded"));
}

}  // namespace
}  // namespace fabric
