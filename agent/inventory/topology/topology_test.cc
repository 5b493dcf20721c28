#include "agent/inventory/topology/topology.h"

#include <gtest/gtest.h>

#include <initializer_list>

namespace fabric {
namespace {

v1::PciFunction Fn(std::initializer_list<const char*> path, int numa = -1) {
  v1::PciFunction f;
  for (const char* p : path) f.add_path(p);
  if (numa >= 0) f.set_numa_node(numa);
  return f;
}

struct Case {
  const char* name;
  v1::PciFunction a, b;
  bool single_numa;
  v1::DistanceClass want;
};

TEST(ClassifyDistance, Table) {
  const char* rc = "pci0000:15";
  const char* rp = "0000:15:01.0";
  const Case cases[] = {
      // One switch, different downstream ports: the "same switch is PIX".
      {"same switch", Fn({rc, rp, "0000:16:00.0", "0000:17:00.0"}),
       Fn({rc, rp, "0000:16:00.0", "0000:17:01.0"}), false, v1::DISTANCE_CLASS_PIX},
      // Same second-level switch under a first-level one.
      {"same leaf switch",
       Fn({rc, rp, "0000:16:00.0", "0000:17:00.0", "0000:18:00.0", "0000:19:00.0"}),
       Fn({rc, rp, "0000:16:00.0", "0000:17:00.0", "0000:18:00.0", "0000:19:01.0"}), false,
       v1::DISTANCE_CLASS_PIX},
      // Different leaf switches under one top switch: three switches crossed.
      {"sibling leaf switches",
       Fn({rc, rp, "0000:16:00.0", "0000:17:00.0", "0000:18:00.0", "0000:19:00.0"}),
       Fn({rc, rp, "0000:16:00.0", "0000:17:01.0", "0000:1b:00.0", "0000:1c:00.0"}), false,
       v1::DISTANCE_CLASS_PXB},
      // Leaf switch against a device on the top switch: two switches.
      {"leaf vs top", Fn({rc, rp, "0000:16:00.0", "0000:17:00.0", "0000:18:00.0", "0000:19:00.0"}),
       Fn({rc, rp, "0000:16:00.0", "0000:17:01.0"}), false, v1::DISTANCE_CLASS_PXB},
      // Functions of one device under a root port.
      {"same root port", Fn({rc, rp}), Fn({rc, rp}), false, v1::DISTANCE_CLASS_PIX},
      {"different root ports", Fn({rc, rp, "0000:16:00.0", "0000:17:00.0"}),
       Fn({rc, "0000:15:02.0"}), false, v1::DISTANCE_CLASS_PHB},
      {"on the root bus", Fn({rc}), Fn({rc}), false, v1::DISTANCE_CLASS_PHB},
      {"host bridges, same NUMA", Fn({rc, rp}, 0), Fn({"pci0000:37", "0000:37:01.0"}, 0), false,
       v1::DISTANCE_CLASS_NODE},
      {"host bridges, other NUMA", Fn({rc, rp}, 0), Fn({"pci0000:97", "0000:97:01.0"}, 1), false,
       v1::DISTANCE_CLASS_SYS},
      {"NUMA unknown, two nodes", Fn({rc, rp}), Fn({"pci0000:97", "0000:97:01.0"}), false,
       v1::DISTANCE_CLASS_SYS},
      {"NUMA unknown, one node", Fn({rc, rp}), Fn({"pci0000:97", "0000:97:01.0"}), true,
       v1::DISTANCE_CLASS_NODE},
      {"no path", Fn({}), Fn({rc, rp}), true, v1::DISTANCE_CLASS_SYS},
  };
  for (const Case& c : cases) {
    Distance d = ClassifyDistance(c.a, c.b, c.single_numa);
    EXPECT_EQ(DistanceName(d.distance), DistanceName(c.want)) << c.name << ": " << d.reason;
    EXPECT_FALSE(d.reason.empty()) << c.name;
    // Distance is symmetric.
    EXPECT_EQ(ClassifyDistance(c.b, c.a, c.single_numa).distance, d.distance) << c.name;
  }
}

TEST(BuildTopology, SkipsManagementDisplayAndSoftwareDevices) {
  v1::Host host;
  host.add_numa_nodes(0);
  auto* gpu = host.add_accelerators();
  gpu->set_pci_address("0000:18:00.0");
  *gpu->mutable_pci() = Fn({"pci0000:15", "0000:15:01.0", "0000:16:00.0", "0000:17:00.0"}, 0);
  auto* vga = host.add_accelerators();
  vga->set_pci_address("0000:03:00.0");
  vga->set_management_display(true);
  auto* nic = host.add_rdma_devices();
  nic->set_name("mlx5_1");
  *nic->mutable_pci() = Fn({"pci0000:15", "0000:15:01.0", "0000:16:00.0", "0000:17:01.0"}, 0);
  nic->mutable_pci()->set_address("0000:19:00.0");
  host.add_rdma_devices()->set_name("rxe0");  // software: no PCI function
  BuildTopology(&host);
  ASSERT_EQ(host.topology_size(), 1);
  EXPECT_EQ(host.topology(0).accelerator(), "0000:18:00.0");
  EXPECT_EQ(host.topology(0).rdma_device(), "mlx5_1");
  EXPECT_EQ(host.topology(0).distance(), v1::DISTANCE_CLASS_PIX);
}

}  // namespace
}  // namespace fabric

namespace fabric {
namespace {

// A VM's passed-through devices sit on root buses; real PCIe puts them below a root port; a
// path not read is no evidence either way.
TEST(VirtualPciTreeTest, OnlyEveryDeviceOnARootBusIsVirtual) {
  v1::Host h;
  v1::Accelerator* gpu = h.add_accelerators();
  gpu->mutable_pci()->add_path("pci0001:00");
  v1::RdmaDevice* nic = h.add_rdma_devices();
  nic->set_name("mlx5_0");
  nic->mutable_pci()->add_path("pci0101:00");
  EXPECT_NE(VirtualPciTree(h), "");
  v1::RdmaDevice* rxe = h.add_rdma_devices();  // A software device has no place in the tree.
  rxe->set_name("rxe0");
  EXPECT_NE(VirtualPciTree(h), "");
  v1::Host below = h;
  below.mutable_rdma_devices(0)->mutable_pci()->add_path("0000:15:01.0");
  EXPECT_EQ(VirtualPciTree(below), "");
  v1::Host unknown = h;
  unknown.mutable_accelerators(0)->mutable_pci()->clear_path();
  EXPECT_EQ(VirtualPciTree(unknown), "");
  v1::Host bmc = h;  // A management display does not count; no GPU then: nothing to pair.
  bmc.mutable_accelerators(0)->set_management_display(true);
  EXPECT_EQ(VirtualPciTree(bmc), "");
}

}  // namespace
}  // namespace fabric
