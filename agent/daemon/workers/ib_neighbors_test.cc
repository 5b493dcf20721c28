#include "agent/daemon/workers/ib_neighbors.h"

#include <gtest/gtest.h>
#include <poll.h>

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace fabric {
namespace {

using v1::Neighbor;

// mlx5_0:1 InfiniBand ACTIVE on ib0, mlx5_1:1 Ethernet on eth1 (an LLDP neighbour), mlx5_2:1
// InfiniBand DOWN on ib2.
v1::Host ThreePorts(v1::PortState mlx5_0_state = v1::PORT_STATE_ACTIVE) {
  v1::Host h;
  auto add = [&](const std::string& dev, v1::LinkLayer layer, v1::PortState state,
                 const std::string& netdev) {
    v1::RdmaDevice* d = h.add_rdma_devices();
    d->set_name(dev);
    v1::Port* p = d->add_ports();
    p->set_number(1);
    p->set_link_layer(layer);
    p->set_state(state);
    p->set_netdev(netdev);
    v1::Netdev* n = h.add_netdevs();
    n->set_name(netdev);
    n->set_rdma_device(dev);
    n->set_rdma_port(1);
  };
  add("mlx5_0", v1::LINK_LAYER_INFINIBAND, mlx5_0_state, "ib0");
  add("mlx5_1", v1::LINK_LAYER_ETHERNET, v1::PORT_STATE_ACTIVE, "eth1");
  add("mlx5_2", v1::LINK_LAYER_INFINIBAND, v1::PORT_STATE_DOWN, "ib2");
  Neighbor* lldp = h.mutable_netdevs(1)->mutable_neighbor();
  lldp->set_source(Neighbor::SOURCE_LLDP);
  lldp->set_system_name("leaf-eth-01");
  return h;
}

neighbors::IbNeighbor Leaf(const std::string& description) {
  neighbors::IbNeighbor n;
  n.node_guid = 0x98039b03009fa041u;
  n.node_type = neighbors::kNodeTypeSwitch;
  n.description = description;
  n.remote_port = 17;
  return n;
}

// Records what is asked; answers with `answer` (settable between calls).
struct FakeQuery {
  std::mutex mu;
  std::vector<std::string> asked;
  absl::StatusOr<neighbors::IbNeighbor> answer = Leaf("leaf-r0-07");

  IbNeighbors::Query Fn() {
    return [this](const std::string& ca, int port) -> absl::StatusOr<neighbors::IbNeighbor> {
      std::lock_guard<std::mutex> lock(mu);
      asked.push_back(ca + ":" + std::to_string(port));
      return answer;
    };
  }
  size_t count() {
    std::lock_guard<std::mutex> lock(mu);
    return asked.size();
  }
};

// Waits (bounded) for the worker's answer, then collects it.
bool WaitAndCollect(IbNeighbors& ib) {
  pollfd p{ib.fd(), POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 5000), 1) << "no answer from the worker within 5 s";
  return ib.Collect();
}

TEST(IbNeighbors, AsksActiveInfinibandPortsOnlyAndLaysTheAnswer) {
  FakeQuery q;
  IbNeighbors ib(q.Fn());
  v1::Host h = ThreePorts();
  EXPECT_FALSE(ib.Sync(h, absl::Now()));
  EXPECT_TRUE(WaitAndCollect(ib));
  EXPECT_EQ(q.asked, std::vector<std::string>{"mlx5_0:1"});  // Not Ethernet, not DOWN.
  EXPECT_FALSE(ib.Shows(h));
  ib.Lay(&h);
  EXPECT_TRUE(ib.Shows(h));
  ASSERT_TRUE(h.netdevs(0).has_neighbor());
  const Neighbor& n = h.netdevs(0).neighbor();
  EXPECT_EQ(n.source(), Neighbor::SOURCE_IB_SMP);
  EXPECT_EQ(n.system_name(), "leaf-r0-07");
  EXPECT_EQ(n.switch_label(), "leaf-r0-07");
  EXPECT_EQ(n.chassis_id(), "0x98039b03009fa041");
  EXPECT_EQ(n.port_id(), "17");
  EXPECT_EQ(n.port_description(), "switch");  // Its node type.
  EXPECT_GT(n.first_seen_unix_ms(), 0);
  EXPECT_EQ(h.netdevs(1).neighbor().system_name(), "leaf-eth-01");  // LLDP's, untouched.
  EXPECT_FALSE(h.netdevs(2).has_neighbor());
  EXPECT_TRUE(ib.errors().empty());
}

TEST(IbNeighbors, AskedAgainWhenDueKeepingTheFirstSeenTime) {
  FakeQuery q;
  IbNeighbors ib(q.Fn(), absl::Hours(1));
  v1::Host h = ThreePorts();
  const absl::Time t0 = absl::Now();
  ib.Sync(h, t0);
  WaitAndCollect(ib);
  ib.Lay(&h);
  const int64_t first = h.netdevs(0).neighbor().first_seen_unix_ms();
  EXPECT_GE(ib.NextQuery(), t0 + absl::Hours(1));
  ib.Sync(h, t0 + absl::Minutes(1));  // Not due: nothing asked.
  EXPECT_EQ(q.count(), 1u);
  ib.Sync(h, ib.NextQuery());  // Due: asked again; the same node answers.
  EXPECT_FALSE(WaitAndCollect(ib));
  EXPECT_EQ(q.count(), 2u);
  EXPECT_TRUE(ib.Shows(h));
  EXPECT_EQ(h.netdevs(0).neighbor().first_seen_unix_ms(), first);
  // Recabled to another switch: a change.
  q.answer = Leaf("leaf-r0-08");
  ib.Sync(h, ib.NextQuery());
  EXPECT_TRUE(WaitAndCollect(ib));
  ib.Lay(&h);
  EXPECT_EQ(h.netdevs(0).neighbor().system_name(), "leaf-r0-08");
}

TEST(IbNeighbors, APortThatGoesDownLosesItsNeighbour) {
  FakeQuery q;
  IbNeighbors ib(q.Fn());
  v1::Host h = ThreePorts();
  ib.Sync(h, absl::Now());
  WaitAndCollect(ib);
  ib.Lay(&h);
  ASSERT_TRUE(h.netdevs(0).has_neighbor());
  v1::Host down = ThreePorts(v1::PORT_STATE_DOWN);
  *down.mutable_netdevs(0)->mutable_neighbor() = h.netdevs(0).neighbor();
  EXPECT_TRUE(ib.Sync(down, absl::Now()));
  EXPECT_FALSE(ib.Shows(down));
  ib.Lay(&down);
  EXPECT_FALSE(down.netdevs(0).has_neighbor());
  EXPECT_TRUE(down.netdevs(1).has_neighbor());  // LLDP's stays.
  EXPECT_EQ(ib.NextQuery(), absl::InfiniteFuture());
}

TEST(IbNeighbors, ErrorsAreFindingsButNoUmadDeviceIsNone) {
  FakeQuery q;
  q.answer = absl::DeadlineExceededError("no response within 500 ms");
  IbNeighbors ib(q.Fn());
  v1::Host h = ThreePorts();
  ib.Sync(h, absl::Now());
  EXPECT_FALSE(WaitAndCollect(ib));
  ASSERT_EQ(ib.errors().count("mlx5_0:1"), 1u);
  std::vector<v1::Finding> findings;
  IbNeighborFindings(ib, &findings);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].severity(), v1::SEVERITY_WARNING);
  EXPECT_EQ(findings[0].subject(), "mlx5_0:1");
  EXPECT_NE(findings[0].message().find("no response within 500 ms"), std::string::npos);

  // Without access to the umad devices (as systemd's unit and the DaemonSet run it): one note.
  FakeQuery denied;
  denied.answer = absl::PermissionDeniedError("open /dev/infiniband/umad0: Permission denied");
  IbNeighbors quiet(denied.Fn());
  quiet.Sync(h, absl::Now());
  EXPECT_FALSE(WaitAndCollect(quiet));
  findings.clear();
  IbNeighborFindings(quiet, &findings);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].severity(), v1::SEVERITY_OK);
  EXPECT_EQ(findings[0].subject(), "mlx5_0:1");

  FakeQuery none;
  none.answer = absl::NotFoundError("no umad device for mlx5_0 port 1");
  IbNeighbors absent(none.Fn());
  absent.Sync(h, absl::Now());
  EXPECT_FALSE(WaitAndCollect(absent));
  EXPECT_TRUE(absent.errors().empty());
}

TEST(IbNeighbors, ADescriptionThatIsNoLabelValueGetsTheGuid) {
  const Neighbor n = IbNeighborProto(Leaf("MF0;leaf-07:MQM9700/U1"), absl::Now());
  EXPECT_EQ(n.system_name(), "MF0;leaf-07:MQM9700/U1");
  EXPECT_EQ(n.switch_label(), "n-98039b03009fa041");
}

}  // namespace
}  // namespace fabric
