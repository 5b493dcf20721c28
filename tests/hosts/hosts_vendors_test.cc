// amd-mi300x-pollara and mixed-h100-mi300x as discovery reads them: what the vendor profiles, the
// GPUDirect decision and the mixed-vendor route are decided from.
#include <set>
#include <string>

#include "agent/inventory/topology/topology.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/hosts/discovered.h"
#include "tests/hosts/hosts.h"

namespace fabric::testing {
namespace {

using ::testing::HasSubstr;

TEST(VendorHostsTest, PollaraIsIonicWithRoceV2GidsOnly) {
  const v1::Host h = DiscoveredExampleHost("amd-mi300x-pollara");
  ASSERT_EQ(h.rdma_devices_size(), 8);
  for (const v1::RdmaDevice& d : h.rdma_devices()) {
    EXPECT_EQ(d.pci().driver(), "ionic") << d.name();
    EXPECT_EQ(d.sys_image_guid(), d.node_guid()) << d.name();
    ASSERT_EQ(d.ports_size(), 1);
    ASSERT_EQ(d.ports(0).gids_size(), 2) << d.name();
    EXPECT_EQ(d.ports(0).gids(1).type(), v1::GID_TYPE_ROCE_V2);
    EXPECT_FALSE(d.ports(0).gids(1).ipv4().empty());
  }
  ASSERT_EQ(h.gpudirect().paths_size(), 1);
  EXPECT_THAT(h.gpudirect().paths(0).detail(), HasSubstr("amdgpu exports it"));
}

TEST(VendorHostsTest, MixedHostHasBothVendorsAndTwoDualPortAdapters) {
  const v1::Host h = DiscoveredExampleHost("mixed-h100-mi300x");
  std::set<v1::AcceleratorVendor> vendors;
  for (const v1::Accelerator& a : h.accelerators()) vendors.insert(a.vendor());
  EXPECT_EQ(vendors, (std::set<v1::AcceleratorVendor>{v1::ACCELERATOR_VENDOR_NVIDIA,
                                                      v1::ACCELERATOR_VENDOR_AMD}));
  ASSERT_EQ(h.rdma_devices_size(), 4);
  EXPECT_EQ(h.rdma_devices(0).sys_image_guid(), h.rdma_devices(1).sys_image_guid());
  EXPECT_EQ(h.rdma_devices(2).sys_image_guid(), h.rdma_devices(3).sys_image_guid());
  EXPECT_NE(h.rdma_devices(0).sys_image_guid(), h.rdma_devices(2).sys_image_guid());
  EXPECT_NE(h.rdma_devices(1).sys_image_guid(), h.rdma_devices(1).node_guid());
  // Both GPU drivers export dma-buf; the peer-memory module serves the NVIDIA GPUs too.
  std::set<std::string> mechanisms;
  for (const v1::GpuDirectPath& p : h.gpudirect().paths()) {
    mechanisms.insert(p.mechanism());
    if (p.mechanism() == "dma_buf") {
      EXPECT_THAT(p.detail(), HasSubstr("NVIDIA open kernel module 550 and amdgpu export it"));
    }
  }
  EXPECT_EQ(mechanisms, (std::set<std::string>{"dma_buf", "nvidia_peermem"}));
}

// The cloud VM: every GPU and NIC on a root bus of its own. Discovery still pairs (by NUMA and
// order); health and the selection say the tree is virtual, and no other example host is.
TEST(VendorHostsTest, CloudVmsFlatTreeIsSaidVirtual) {
  const v1::Host h = DiscoveredExampleHost("cloud-vm-flat");
  ASSERT_EQ(h.rdma_devices_size(), 8);
  for (const v1::RdmaDevice& d : h.rdma_devices()) EXPECT_EQ(d.pci().path_size(), 1) << d.name();
  EXPECT_THAT(VirtualPciTree(h), HasSubstr("all 8 GPUs and 8 RDMA devices sit directly on root"));
  for (const std::string& name : ExampleHostNames()) {
    if (name == "cloud-vm-flat") continue;
    EXPECT_EQ(VirtualPciTree(DiscoveredExampleHost(name)), "") << name;
  }
}

}  // namespace
}  // namespace fabric::testing
