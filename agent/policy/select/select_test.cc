#include "agent/policy/select/select.h"

#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/inventory/discovery/parse.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/hosts/model_builder.h"

namespace fabric {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::ModelBuilder;
using ::testing::Not;
using v1::DistanceClass;

constexpr char kGpu[] = "0000:18:00.0";

std::string Chosen(const v1::GpuAssignment& a) {
  return absl::StrCat(a.rdma_device(), ":", a.port());
}

std::vector<std::string> ChosenPorts(const v1::Selection& s) {
  std::vector<std::string> out;
  for (const v1::GpuAssignment& a : s.assignments()) out.push_back(Chosen(a));
  return out;
}

// The rejection reason for `port`, or "<not rejected>".
std::string RejectionOf(const v1::GpuAssignment& a, const std::string& port) {
  for (const v1::Rejection& r : a.rejected()) {
    if (r.port() == port) return r.reason();
  }
  return "<not rejected>";
}

std::string Msg(const absl::Status& s) { return std::string(s.message()); }

// One GPU on NUMA 0 and two NICs that are equal in everything but what a test changes.
struct TwoNics {
  ModelBuilder b;
  v1::RdmaDevice* n1;
  v1::RdmaDevice* n2;
  TwoNics(DistanceClass d1, DistanceClass d2) {
    b.Gpu(kGpu, 0);
    n1 = b.Nic("mlx5_1", "0000:19:00.0", 0, "eth1", "25.11.128.11", "25.11.128.0/24");
    n2 = b.Nic("mlx5_2", "0000:29:00.0", 0, "eth2", "25.11.128.12", "25.11.128.0/24");
    b.Distance(kGpu, "mlx5_1", d1).Distance(kGpu, "mlx5_2", d2);
  }
  absl::StatusOr<v1::Selection> Select(const v1::SelectionPolicy& p = {}) {
    return SelectNics(b.Build(), {kGpu}, p);
  }
};

TEST(SelectTest, CloserDistanceClassWins) {
  const DistanceClass order[] = {v1::DISTANCE_CLASS_PIX, v1::DISTANCE_CLASS_PXB,
                                 v1::DISTANCE_CLASS_PHB, v1::DISTANCE_CLASS_NODE,
                                 v1::DISTANCE_CLASS_SYS};
  const char* names[] = {"PIX", "PXB", "PHB", "NODE", "SYS"};
  for (int near = 0; near < 5; ++near) {
    for (int far = near + 1; far < 5; ++far) {
      SCOPED_TRACE(absl::StrCat(names[near], " vs ", names[far]));
      // The closer NIC is mlx5_2 first, so name order alone would pick the wrong one, then
      // mlx5_1, so a ranking that prefers the farther class fails too.
      TwoNics a(order[far], order[near]);
      absl::StatusOr<v1::Selection> s = a.Select();
      ASSERT_TRUE(s.ok()) << s.status();
      EXPECT_EQ(Chosen(s->assignments(0)), "mlx5_2:1");
      EXPECT_EQ(s->assignments(0).distance(), order[near]);
      EXPECT_EQ(RejectionOf(s->assignments(0), "mlx5_1:1"),
                absl::StrCat(names[far], " (lost on distance: mlx5_2:1 is ", names[near], ")"));
      EXPECT_EQ(s->assignments(0).reasons(1),
                absl::StrCat("beat mlx5_1:1 on distance: ", names[near], " vs ", names[far]));

      TwoNics b(order[near], order[far]);
      s = b.Select();
      ASSERT_TRUE(s.ok()) << s.status();
      EXPECT_EQ(Chosen(s->assignments(0)), "mlx5_1:1");
    }
  }
}

TEST(SelectTest, SameNumaBreaksADistanceTie) {
  TwoNics t(v1::DISTANCE_CLASS_NODE, v1::DISTANCE_CLASS_NODE);
  t.n1->mutable_pci()->set_numa_node(1);
  absl::StatusOr<v1::Selection> s = t.Select();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(Chosen(s->assignments(0)), "mlx5_2:1");
  EXPECT_THAT(RejectionOf(s->assignments(0), "mlx5_1:1"),
              AllOf(HasSubstr("NUMA 1, GPU on NUMA 0"), HasSubstr("lost on NUMA")));
  EXPECT_EQ(s->assignments(0).numa_node(), 0);
}

TEST(SelectTest, UnknownNumaCountsAsNotTheSame) {
  TwoNics t(v1::DISTANCE_CLASS_PHB, v1::DISTANCE_CLASS_PHB);
  t.n1->mutable_pci()->clear_numa_node();
  absl::StatusOr<v1::Selection> s = t.Select();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(Chosen(s->assignments(0)), "mlx5_2:1");

  // A GPU of unknown NUMA is on nobody's node: NUMA decides nothing, the pairing does (PCI
  // order: mlx5_1 at 19:00.0 first).
  TwoNics u(v1::DISTANCE_CLASS_PHB, v1::DISTANCE_CLASS_PHB);
  u.b.host().mutable_accelerators(0)->mutable_pci()->clear_numa_node();
  u.n1->mutable_pci()->set_numa_node(1);
  s = u.Select();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(Chosen(s->assignments(0)), "mlx5_1:1");
}

TEST(SelectTest, NumaNeverBeatsDistance) {
  TwoNics t(v1::DISTANCE_CLASS_PIX, v1::DISTANCE_CLASS_PXB);
  t.n1->mutable_pci()->set_numa_node(1);
  absl::StatusOr<v1::Selection> s = t.Select();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(Chosen(s->assignments(0)), "mlx5_1:1");
}

TEST(SelectTest, HigherRateBreaksATie) {
  TwoNics t(v1::DISTANCE_CLASS_PXB, v1::DISTANCE_CLASS_PXB);
  t.n1->mutable_ports(0)->set_rate_gbps(200);
  absl::StatusOr<v1::Selection> s = t.Select();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(Chosen(s->assignments(0)), "mlx5_2:1");
  EXPECT_EQ(s->assignments(0).rate_gbps(), 400);
  EXPECT_THAT(RejectionOf(s->assignments(0), "mlx5_1:1"),
              AllOf(HasSubstr("200 Gb/s"), HasSubstr("lost on rate")));

  // An unknown rate loses to a known one.
  TwoNics u(v1::DISTANCE_CLASS_PXB, v1::DISTANCE_CLASS_PXB);
  u.n1->mutable_ports(0)->clear_rate_gbps();
  s = u.Select();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(Chosen(s->assignments(0)), "mlx5_2:1");

  // Rate never beats NUMA.
  TwoNics v(v1::DISTANCE_CLASS_PXB, v1::DISTANCE_CLASS_PXB);
  v.n1->mutable_ports(0)->set_rate_gbps(200);
  v.n2->mutable_pci()->set_numa_node(1);
  s = v.Select();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(Chosen(s->assignments(0)), "mlx5_1:1");
}

TEST(SelectTest, EqualNicsAreSpreadOverTheRequestsGpus) {
  ModelBuilder b;
  std::vector<std::string> gpus = {"0000:18:00.0", "0000:28:00.0", "0000:38:00.0", "0000:48:00.0"};
  for (const std::string& g : gpus) b.Gpu(g, 0);
  b.Nic("mlx5_1", "0000:1a:00.0", 0, "eth1", "10.0.1.1");
  b.Nic("mlx5_2", "0000:2a:00.0", 0, "eth2", "10.0.2.1");
  for (const std::string& g : gpus) {
    b.Distance(g, "mlx5_1", v1::DISTANCE_CLASS_NODE).Distance(g, "mlx5_2", v1::DISTANCE_CLASS_NODE);
  }
  // The host-wide pairing spreads them (PCI order, wrapping), whatever the request holds.
  absl::StatusOr<v1::Selection> s = SelectNics(b.Build(), gpus, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_THAT(ChosenPorts(*s), ElementsAre("mlx5_1:1", "mlx5_2:1", "mlx5_1:1", "mlx5_2:1"));
  EXPECT_THAT(s->assignments(1).reasons(1), HasSubstr("on host-wide pairing"));
  s = SelectNics(b.Build(), {gpus[3]}, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_THAT(ChosenPorts(*s), ElementsAre("mlx5_2:1"));

  // Without a pairing for them (a snapshot's pairing names other GPUs), the request spreads.
  b.host().mutable_pairing();
  s = SelectNics(b.Build(), gpus, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_THAT(ChosenPorts(*s), ElementsAre("mlx5_1:1", "mlx5_2:1", "mlx5_1:1", "mlx5_2:1"));
  EXPECT_THAT(s->assignments(1).reasons(1), HasSubstr("on spreading"));
  EXPECT_THAT(RejectionOf(s->assignments(1), "mlx5_1:1"),
              AllOf(HasSubstr("already serves 1 GPU"), HasSubstr("lost on spreading")));

  // Three GPUs: the third goes back to the first NIC (both now serve one).
  s = SelectNics(b.Build(), {gpus[0], gpus[1], gpus[2]}, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_THAT(ChosenPorts(*s), ElementsAre("mlx5_1:1", "mlx5_2:1", "mlx5_1:1"));
}

TEST(SelectTest, SpreadingNeverBeatsDistance) {
  ModelBuilder b;
  b.Gpu("0000:18:00.0", 0).Gpu("0000:19:00.0", 0);
  b.Nic("mlx5_1", "0000:1a:00.0", 0, "eth1", "10.0.1.1");
  b.Nic("mlx5_2", "0000:2a:00.0", 0, "eth2", "10.0.2.1");
  for (const char* g : {"0000:18:00.0", "0000:19:00.0"}) {
    b.Distance(g, "mlx5_1", v1::DISTANCE_CLASS_PIX).Distance(g, "mlx5_2", v1::DISTANCE_CLASS_PXB);
  }
  absl::StatusOr<v1::Selection> s = SelectNics(b.Build(), {"18:00.0", "19:00.0"}, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_THAT(ChosenPorts(*s), ElementsAre("mlx5_1:1", "mlx5_1:1"));
}

TEST(SelectTest, NamesCompareNaturally) {
  ModelBuilder b;
  b.Gpu(kGpu, 0);
  // mlx5_10 first in the host and in plain string order; natural order puts mlx5_2 first.
  b.Nic("mlx5_10", "0000:a0:00.0", 0, "eth10", "10.0.10.1");
  b.Nic("mlx5_2", "0000:20:00.0", 0, "eth2", "10.0.2.1");
  b.Distance(kGpu, "mlx5_10", v1::DISTANCE_CLASS_SYS)
      .Distance(kGpu, "mlx5_2", v1::DISTANCE_CLASS_SYS);
  b.host().mutable_pairing();  // No pairing: name order is the last word.
  absl::StatusOr<v1::Selection> s = SelectNics(b.Build(), {kGpu}, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(Chosen(s->assignments(0)), "mlx5_2:1");
  EXPECT_THAT(RejectionOf(s->assignments(0), "mlx5_10:1"), HasSubstr("lost on name order"));
  EXPECT_EQ(s->assignments(0).reasons(1), "beat mlx5_10:1 on name order (otherwise equal)");
}

TEST(SelectTest, LowerPortNumberComesLast) {
  ModelBuilder b;
  b.Gpu(kGpu, 0);
  v1::RdmaDevice* d = b.Device("mlx5_1", "0000:1a:00.0", 0);
  b.RocePort(d, 2, "eth2", "10.0.2.1");
  b.RocePort(d, 1, "eth1", "10.0.1.1");
  b.Distance(kGpu, "mlx5_1", v1::DISTANCE_CLASS_PIX);
  // The pairing takes the lower port too (PCI order, then port number).
  absl::StatusOr<v1::Selection> s = SelectNics(b.Build(), {kGpu}, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(Chosen(s->assignments(0)), "mlx5_1:1");
  b.host().mutable_pairing();  // No pairing: port order is the last word.
  s = SelectNics(b.Build(), {kGpu}, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(Chosen(s->assignments(0)), "mlx5_1:1");
  EXPECT_THAT(RejectionOf(s->assignments(0), "mlx5_1:2"), HasSubstr("lost on port order"));
}

TEST(SelectTest, PortThatIsNotActiveIsNeverChosen) {
  for (v1::PortState state : {v1::PORT_STATE_DOWN, v1::PORT_STATE_INIT, v1::PORT_STATE_ARMED,
                              v1::PORT_STATE_ACTIVE_DEFER, v1::PORT_STATE_UNSPECIFIED}) {
    TwoNics t(v1::DISTANCE_CLASS_PIX, v1::DISTANCE_CLASS_SYS);
    t.n1->mutable_ports(0)->set_state(state);
    absl::StatusOr<v1::Selection> s = t.Select();
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(Chosen(s->assignments(0)), "mlx5_2:1") << PortStateWord(state);
    EXPECT_EQ(RejectionOf(s->assignments(0), "mlx5_1:1"),
              absl::StrCat("port ", std::string(PortStateWord(state))));
  }
}

TEST(SelectTest, NoActivePortIsAnErrorListingStates) {
  TwoNics t(v1::DISTANCE_CLASS_PIX, v1::DISTANCE_CLASS_SYS);
  t.n1->mutable_ports(0)->set_state(v1::PORT_STATE_DOWN);
  t.n2->mutable_ports(0)->set_state(v1::PORT_STATE_INIT);
  absl::StatusOr<v1::Selection> s = t.Select();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(Msg(s.status()), AllOf(HasSubstr("no active"), HasSubstr("mlx5_1:1 DOWN"),
                                     HasSubstr("mlx5_2:1 INIT")));
}

TEST(SelectTest, HostWithoutRdmaDevice) {
  ModelBuilder b;
  b.Gpu(kGpu, 0);
  absl::StatusOr<v1::Selection> s = SelectNics(b.Build(), {kGpu}, {});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(Msg(s.status()), HasSubstr("no RDMA device"));
}

// mlx5_0 on eth0 carries the default route and is the closest to the GPU.
struct FrontEndHost {
  ModelBuilder b;
  v1::RdmaDevice* fe;
  v1::RdmaDevice* be;
  FrontEndHost() {
    b.Gpu(kGpu, 0);
    fe = b.Nic("mlx5_0", "0000:19:00.0", 0, "eth0", "10.0.60.3", "10.0.60.0/24", 100);
    be = b.Nic("mlx5_1", "0000:a9:00.0", 1, "eth1", "25.11.128.11", "25.11.128.0/24");
    b.DefaultRoute("eth0");
    b.Distance(kGpu, "mlx5_0", v1::DISTANCE_CLASS_PIX)
        .Distance(kGpu, "mlx5_1", v1::DISTANCE_CLASS_SYS);
  }
};

TEST(SelectTest, FrontEndPortIsNotUsedWhileAnotherIsActive) {
  FrontEndHost h;
  absl::StatusOr<v1::Selection> s = SelectNics(h.b.Build(), {kGpu}, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(Chosen(s->assignments(0)), "mlx5_1:1");
  EXPECT_EQ(RejectionOf(s->assignments(0), "mlx5_0:1"),
            "front-end: carries the default route on eth0");
  EXPECT_THAT(s->notes(), Not(Contains(HasSubstr("front-end"))));
}

TEST(SelectTest, FrontEndPortIsUsedWhenItIsTheOnlyActiveOne) {
  FrontEndHost h;
  h.be->mutable_ports(0)->set_state(v1::PORT_STATE_DOWN);
  absl::StatusOr<v1::Selection> s = SelectNics(h.b.Build(), {kGpu}, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(Chosen(s->assignments(0)), "mlx5_0:1");
  EXPECT_THAT(s->notes(), Contains(AllOf(HasSubstr("front-end"), HasSubstr("mlx5_0:1"))));
  EXPECT_EQ(RejectionOf(s->assignments(0), "mlx5_1:1"), "port DOWN");
}

TEST(SelectTest, DenyListByDeviceByNetdevAndByPort) {
  struct Case {
    const char* deny;
    const char* reason;
  };
  for (const Case& c :
       {Case{"mlx5_1", "denied by config (mlx5_1)"}, Case{"eth1", "denied by config (netdev eth1)"},
        Case{"mlx5_1:1", "denied by config (mlx5_1:1)"}}) {
    TwoNics t(v1::DISTANCE_CLASS_PIX, v1::DISTANCE_CLASS_SYS);
    v1::SelectionPolicy p;
    p.add_deny(c.deny);
    absl::StatusOr<v1::Selection> s = t.Select(p);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(Chosen(s->assignments(0)), "mlx5_2:1") << c.deny;
    EXPECT_EQ(RejectionOf(s->assignments(0), "mlx5_1:1"), c.reason);
  }
  // Denying a name that is not there changes nothing.
  TwoNics t(v1::DISTANCE_CLASS_PIX, v1::DISTANCE_CLASS_SYS);
  v1::SelectionPolicy p;
  p.add_deny("mlx5_11");
  absl::StatusOr<v1::Selection> s = t.Select(p);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(Chosen(s->assignments(0)), "mlx5_1:1");
}

TEST(SelectTest, DeniedPortIsTheLastResort) {
  TwoNics t(v1::DISTANCE_CLASS_PIX, v1::DISTANCE_CLASS_SYS);
  t.n2->mutable_ports(0)->set_state(v1::PORT_STATE_DOWN);
  v1::SelectionPolicy p;
  p.add_deny("mlx5_1");
  absl::StatusOr<v1::Selection> s = t.Select(p);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(Chosen(s->assignments(0)), "mlx5_1:1");
  EXPECT_THAT(s->notes(), Contains(HasSubstr("denied by config (mlx5_1)")));
}

// mlx5_1 is a PF across the socket link, mlx5_2 a VF under the GPU's switch.
struct PfVf : TwoNics {
  PfVf() : TwoNics(v1::DISTANCE_CLASS_SYS, v1::DISTANCE_CLASS_PIX) {
    ModelBuilder::MakeVf(n2, "0000:29:00.0");
  }
};

TEST(SelectTest, PfBeatsACloserVfByDefault) {
  PfVf t;
  absl::StatusOr<v1::Selection> s = t.Select();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(Chosen(s->assignments(0)), "mlx5_1:1");
  EXPECT_EQ(s->assignments(0).distance(), v1::DISTANCE_CLASS_SYS);
  EXPECT_THAT(RejectionOf(s->assignments(0), "mlx5_2:1"), HasSubstr("VF (PFs preferred"));
  EXPECT_THAT(s->assignments(0).reasons(1),
              AllOf(HasSubstr("function type: PF vs VF"), HasSubstr("ahead of distance"),
                    HasSubstr("mlx5_2:1 is PIX")));
  EXPECT_THAT(s->assignments(0).reasons(),
              Contains("passed over closer VF mlx5_2:1 (PIX): PFs preferred, ahead of distance"));
}

TEST(SelectTest, PreferVfsPutsVfsFirst) {
  PfVf t;
  v1::SelectionPolicy p;
  p.set_prefer_vfs(true);
  absl::StatusOr<v1::Selection> s = t.Select(p);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(Chosen(s->assignments(0)), "mlx5_2:1");
  EXPECT_THAT(RejectionOf(s->assignments(0), "mlx5_1:1"), HasSubstr("PF (VFs preferred"));
  EXPECT_THAT(s->assignments(0).reasons(0), HasSubstr("VF of 0000:29:00.0"));

  // ...even when the VF is farther.
  TwoNics u(v1::DISTANCE_CLASS_PIX, v1::DISTANCE_CLASS_SYS);
  ModelBuilder::MakeVf(u.n2, "0000:29:00.0");
  s = u.Select(p);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(Chosen(s->assignments(0)), "mlx5_2:1");
}

// A port with only link-local GIDs; tests add the rest.
struct GidHost {
  ModelBuilder b;
  v1::Port* port;
  GidHost() {
    b.Gpu(kGpu, 0);
    v1::RdmaDevice* d = b.Device("mlx5_1", "0000:19:00.0", 0);
    port = b.RocePort(d, 1, "eth1", "", "10.1.0.0/16");
    b.Netdev("macvlan0")->set_upper(true);
    b.Distance(kGpu, "mlx5_1", v1::DISTANCE_CLASS_PIX);
  }
  absl::StatusOr<v1::Selection> Select() { return SelectNics(b.Build(), {kGpu}, {}); }
};

TEST(SelectGidTest, OwnNetdevBeatsAMacvlansLowerIndex) {
  GidHost h;
  ModelBuilder::AddGid(h.port, 2, v1::GID_TYPE_ROCE_V2, "macvlan0", "10.1.0.50");
  ModelBuilder::AddGid(h.port, 4, v1::GID_TYPE_ROCE_V1, "eth1", "10.1.0.7");
  ModelBuilder::AddGid(h.port, 5, v1::GID_TYPE_ROCE_V2, "eth1", "10.1.0.7");
  absl::StatusOr<v1::Selection> s = h.Select();
  ASSERT_TRUE(s.ok()) << s.status();
  const v1::GpuAssignment& a = s->assignments(0);
  ASSERT_TRUE(a.has_gid_index());
  EXPECT_EQ(a.gid_index(), 5u);
  EXPECT_EQ(a.ipv4(), "10.1.0.7");
  EXPECT_EQ(a.ipv4_subnet(), "10.1.0.0/16");
  EXPECT_THAT(a.reasons(0), HasSubstr("GID 5 = 10.1.0.7 (RoCE v2 on eth1)"));
}

TEST(SelectGidTest, LowestOfSeveralOwnGids) {
  GidHost h;
  ModelBuilder::AddGid(h.port, 7, v1::GID_TYPE_ROCE_V2, "eth1", "10.1.0.9");
  ModelBuilder::AddGid(h.port, 3, v1::GID_TYPE_ROCE_V2, "eth1", "10.1.0.7");
  ModelBuilder::AddGid(h.port, 5, v1::GID_TYPE_ROCE_V2, "eth1", "10.1.0.8");
  absl::StatusOr<v1::Selection> s = h.Select();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->assignments(0).gid_index(), 3u);
  EXPECT_EQ(s->assignments(0).ipv4(), "10.1.0.7");
}

constexpr char kGlobalGid[] = "2001:0db8:0a00:0001:0000:0000:0000:0007";
constexpr char kGlobalGid2[] = "2001:0db8:0a00:0001:0000:0000:0000:0009";

TEST(SelectGidTest, Ipv6OnlyPortUsesItsGlobalRoceV2Gid) {
  GidHost h;  // 0/1: link-local only.
  ModelBuilder::AddIpv6Gid(h.port, 2, v1::GID_TYPE_ROCE_V1, "eth1", kGlobalGid,
                           "2001:db8:a00:1::7");
  ModelBuilder::AddIpv6Gid(h.port, 3, v1::GID_TYPE_ROCE_V2, "macvlan0", kGlobalGid2,
                           "2001:db8:a00:1::9");
  ModelBuilder::AddIpv6Gid(h.port, 5, v1::GID_TYPE_ROCE_V2, "eth1", kGlobalGid,
                           "2001:db8:a00:1::7");
  absl::StatusOr<v1::Selection> s = h.Select();
  ASSERT_TRUE(s.ok()) << s.status();
  const v1::GpuAssignment& a = s->assignments(0);
  ASSERT_TRUE(a.has_gid_index());
  EXPECT_EQ(a.gid_index(), 5u);
  EXPECT_EQ(a.ipv6(), "2001:db8:a00:1::7");
  EXPECT_EQ(a.ipv4(), "");
  EXPECT_EQ(a.ipv4_subnet(), "");
  EXPECT_THAT(a.reasons(0), HasSubstr("GID 5 = 2001:db8:a00:1::7 (RoCE v2 on eth1)"));
}

TEST(SelectGidTest, Ipv4PreferredOverALowerIndexIpv6Gid) {
  GidHost h;
  ModelBuilder::AddIpv6Gid(h.port, 2, v1::GID_TYPE_ROCE_V2, "eth1", kGlobalGid,
                           "2001:db8:a00:1::7");
  ModelBuilder::AddGid(h.port, 4, v1::GID_TYPE_ROCE_V2, "eth1", "10.1.0.7");
  absl::StatusOr<v1::Selection> s = h.Select();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->assignments(0).gid_index(), 4u);
  EXPECT_EQ(s->assignments(0).ipv4(), "10.1.0.7");
  EXPECT_EQ(s->assignments(0).ipv6(), "");
}

TEST(SelectGidTest, RoceV1IsNeverChosen) {
  GidHost h;
  ModelBuilder::AddGid(h.port, 2, v1::GID_TYPE_ROCE_V1, "eth1", "10.1.0.7");
  absl::StatusOr<v1::Selection> s = h.Select();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE(s->assignments(0).has_gid_index());
  EXPECT_EQ(s->assignments(0).ipv4(), "");
  EXPECT_THAT(s->notes(), Contains("mlx5_1:1 has no routable RoCE v2 GID (IPv4-mapped or global "
                                   "IPv6) on its own netdev eth1"));
  EXPECT_EQ(s->assignments(0).link_layer(), v1::LINK_LAYER_ETHERNET);
}

TEST(SelectGidTest, PortWithoutUsableGidRanksBelowAnyPortWithOne) {
  ModelBuilder b;
  b.Gpu(kGpu, 0);
  b.Nic("mlx5_1", "0000:19:00.0", 0, "eth1", "");  // Link-local GIDs only.
  b.Nic("mlx5_2", "0000:a9:00.0", 1, "eth2", "25.11.128.12");
  ModelBuilder::MakeVf(b.host().mutable_rdma_devices(1), "0000:a8:00.0");
  b.Distance(kGpu, "mlx5_1", v1::DISTANCE_CLASS_PIX)
      .Distance(kGpu, "mlx5_2", v1::DISTANCE_CLASS_SYS);
  // mlx5_2 is farther, on the other NUMA node and a VF: only the GID tier can make it win.
  absl::StatusOr<v1::Selection> s = SelectNics(b.Build(), {kGpu}, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(Chosen(s->assignments(0)), "mlx5_2:1");
  EXPECT_EQ(s->assignments(0).gid_index(), 3u);
  EXPECT_THAT(
      RejectionOf(s->assignments(0), "mlx5_1:1"),
      AllOf(
          HasSubstr("no routable RoCE v2 GID (IPv4-mapped or global IPv6) on its own netdev eth1"),
          HasSubstr("lost on GID")));
  EXPECT_THAT(s->notes(), Contains("mlx5_1:1 has no routable RoCE v2 GID (IPv4-mapped or global "
                                   "IPv6) on its own netdev eth1"));
  EXPECT_THAT(s->assignments(0).reasons(),
              Contains("passed over closer mlx5_1:1 (PIX): it has no routable RoCE v2 GID "
                       "(IPv4-mapped or global IPv6) on its own "
                       "netdev eth1"));
}

TEST(SelectGidTest, PortWithoutGidIsStillUsableAlone) {
  GidHost h;
  absl::StatusOr<v1::Selection> s = h.Select();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(Chosen(s->assignments(0)), "mlx5_1:1");
  EXPECT_FALSE(s->assignments(0).has_gid_index());
}

TEST(SelectGidTest, InfinibandHasNoGidIndex) {
  ModelBuilder b;
  b.Gpu(kGpu, 0);
  b.IbPort(b.Device("mlx5_1", "0000:19:00.0", 0), 1);
  b.Distance(kGpu, "mlx5_1", v1::DISTANCE_CLASS_PIX);
  absl::StatusOr<v1::Selection> s = SelectNics(b.Build(), {kGpu}, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE(s->assignments(0).has_gid_index());
  EXPECT_EQ(s->assignments(0).link_layer(), v1::LINK_LAYER_INFINIBAND);
  EXPECT_EQ(s->assignments(0).ipv4(), "");
  EXPECT_THAT(s->notes(), Not(Contains(HasSubstr("GID"))));
}

TEST(SelectGidTest, SubnetIsTheMostSpecificOneHoldingTheAddress) {
  ModelBuilder b;
  b.Gpu(kGpu, 0);
  b.Nic("mlx5_1", "0000:19:00.0", 0, "eth1", "25.11.128.13");
  for (const char* net : {"10.9.0.0/16", "25.0.0.0/8", "25.11.128.0/24", "25.11.129.0/24"}) {
    b.Netdev("eth1")->add_ipv4_subnets(net);
  }
  b.Distance(kGpu, "mlx5_1", v1::DISTANCE_CLASS_PIX);
  absl::StatusOr<v1::Selection> s = SelectNics(b.Build(), {kGpu}, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->assignments(0).ipv4(), "25.11.128.13");
  EXPECT_EQ(s->assignments(0).ipv4_subnet(), "25.11.128.0/24");
}

TEST(SelectGpuTest, AcceptsLongNvidiaSmiAndShortForms) {
  for (const char* given : {"0000:1a:00.0", "00000000:1A:00.0", "1a:00.0", "1A:00.0"}) {
    ModelBuilder b;
    b.Gpu("0000:1a:00.0", 0);
    b.Nic("mlx5_1", "0000:19:00.0", 0, "eth1", "10.0.0.1");
    b.Distance("0000:1a:00.0", "mlx5_1", v1::DISTANCE_CLASS_PIX);
    absl::StatusOr<v1::Selection> s = SelectNics(b.Build(), {given}, {});
    ASSERT_TRUE(s.ok()) << given << ": " << s.status();
    EXPECT_EQ(s->assignments(0).gpu(), "0000:1a:00.0");
    EXPECT_EQ(s->assignments(0).distance(), v1::DISTANCE_CLASS_PIX) << given;
  }
}

struct BadGpus {
  absl::StatusCode code;
  const char* name;
  std::vector<std::string> gpus;
  const char* message;
};

TEST(SelectGpuTest, RejectsBadGpuLists) {
  ModelBuilder b;
  b.Gpu("0000:1a:00.0", 0).Gpu("0000:2a:00.0", 0).Display("0000:03:00.0");
  b.Nic("mlx5_1", "0000:19:00.0", 0, "eth1", "10.0.0.1");
  for (const BadGpus& c : {
           BadGpus{absl::StatusCode::kInvalidArgument, "empty", {}, "no GPU"},
           BadGpus{absl::StatusCode::kNotFound,
                   "unknown",
                   {"0000:1a:00.0", "0000:99:00.0"},
                   "0000:99:00.0"},
           BadGpus{absl::StatusCode::kInvalidArgument,
                   "duplicate",
                   {"1a:00.0", "0000:2a:00.0", "00000000:1a:00.0"},
                   "twice"},
           BadGpus{absl::StatusCode::kInvalidArgument, "malformed", {"banana"}, "banana"},
           BadGpus{
               absl::StatusCode::kInvalidArgument, "display", {"03:00.0"}, "management display"},
       }) {
    absl::StatusOr<v1::Selection> s = SelectNics(b.Build(), c.gpus, {});
    ASSERT_FALSE(s.ok()) << c.name;
    EXPECT_EQ(s.status().code(), c.code) << c.name;
    EXPECT_THAT(Msg(s.status()), HasSubstr(c.message)) << c.name;
  }
}

// Names are exact: the whitespace ParsePciAddress forgives in sysfs values is an error here.
TEST(ParseGpuNameTest, Exact) {
  struct Case {
    std::string given;
    std::string want;  // canonical, or a substring of the error
    bool ok;
  };
  const Case cases[] = {
      {"0000:13:00.0", "0000:13:00.0", true},
      {"00000000:13:00.0", "0000:13:00.0", true},
      {"13:00.0", "0000:13:00.0", true},
      {"0000:1A:00.0", "0000:1a:00.0", true},
      {" 0000:13:00.0", "GPU \" 0000:13:00.0\" is not a PCI address: unexpected \" \"", false},
      {"0000:13:00.0\n", "unexpected \"\\n\"", false},
      {"0000:13:00.0 ", "unexpected", false},
      {"0000:13:00.0\t", "unexpected", false},
      {"", "empty", false},
      {"000000000:13:00.0", "17 characters, at most 16", false},
      {"0000:13:00", "is not a PCI address", false},
      {std::string("13:00.0\0", 8), "unexpected \"\\x00\"", false},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::string> got = ParseGpuName(c.given);
    if (c.ok) {
      ASSERT_TRUE(got.ok()) << c.given << ": " << got.status();
      EXPECT_EQ(*got, c.want);
    } else {
      ASSERT_FALSE(got.ok()) << c.given;
      EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(Msg(got.status()), HasSubstr(c.want));
    }
  }
  // A huge name is quoted as an excerpt.
  absl::StatusOr<std::string> huge = ParseGpuName(std::string(4 << 20, '0'));
  ASSERT_FALSE(huge.ok());
  EXPECT_LT(huge.status().message().size(), 200u);
}

TEST(SelectGpuTest, BoundsTheRequest) {
  ModelBuilder b;
  b.Gpu("0000:1a:00.0", 0);
  b.Nic("mlx5_1", "0000:19:00.0", 0, "eth1", "10.0.0.1");
  const v1::Host host = b.Build();
  std::vector<std::string> gpus(kMaxGpusPerRequest + 1, "0000:1a:00.0");
  absl::StatusOr<v1::Selection> s = SelectNics(host, gpus, {});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Msg(s.status()), "gpus: 65 given; at most 64 per request");
  // At the bound the list is read (and this one fails as a duplicate, not on its size).
  gpus.pop_back();
  EXPECT_EQ(SelectNics(host, gpus, {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SelectNics(host, {" 0000:1a:00.0"}, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(SelectNics(host, {"0000:1a:00.0"}, {}).ok());
}

TEST(SelectTest, RejectsABadPolicy) {
  TwoNics t(v1::DISTANCE_CLASS_PIX, v1::DISTANCE_CLASS_SYS);
  v1::SelectionPolicy p;
  (*p.mutable_static_env())["NOT-A-NAME"] = "1";
  EXPECT_EQ(t.Select(p).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SelectTest, DeviceWithoutTopologyPairIsSys) {
  ModelBuilder b;
  b.Gpu(kGpu, 0);
  v1::RdmaDevice* rxe = b.Device("rxe0", "");
  rxe->set_parent_netdev("eth5");
  b.RocePort(rxe, 1, "eth5", "10.5.0.2");
  b.Nic("mlx5_1", "0000:a9:00.0", 1, "eth1", "10.0.0.1");
  b.Distance(kGpu, "mlx5_1", v1::DISTANCE_CLASS_NODE);
  absl::StatusOr<v1::Selection> s = SelectNics(b.Build(), {kGpu}, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(Chosen(s->assignments(0)), "mlx5_1:1");
  EXPECT_EQ(RejectionOf(s->assignments(0), "rxe0:1"), "SYS (lost on distance: mlx5_1:1 is NODE)");

  // Alone, it is used, and the reason says why it counts as SYS.
  b.host().mutable_rdma_devices(1)->mutable_ports(0)->set_state(v1::PORT_STATE_DOWN);
  s = SelectNics(b.Build(), {kGpu}, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(Chosen(s->assignments(0)), "rxe0:1");
  EXPECT_THAT(s->assignments(0).reasons(0), HasSubstr("rxe0:1 SYS to 0000:18:00.0 (no PCI path)"));
  EXPECT_EQ(s->assignments(0).reasons(1), "only eligible port");
  EXPECT_FALSE(s->assignments(0).has_numa_node());
}

TEST(SelectTest, ReasonsAnOperatorCanCheck) {
  ModelBuilder b;
  b.Gpu("0000:38:00.0", 0);
  b.Nic("mlx5_3", "0000:39:00.0", 0, "eth3", "25.11.128.13", "25.11.128.0/24");
  b.Nic("mlx5_4", "0000:3c:00.0", 0, "eth4", "25.11.128.14", "25.11.128.0/24");
  b.Nic("mlx5_5", "0000:b9:00.0", 1, "eth5", "25.11.128.15", "25.11.128.0/24");
  b.Distance("0000:38:00.0", "mlx5_3", v1::DISTANCE_CLASS_PIX, "common PCIe switch")
      .Distance("0000:38:00.0", "mlx5_4", v1::DISTANCE_CLASS_PXB, "2 PCIe switches")
      .Distance("0000:38:00.0", "mlx5_5", v1::DISTANCE_CLASS_SYS, "across sockets");
  absl::StatusOr<v1::Selection> s = SelectNics(b.Build(), {"38:00.0"}, {});
  ASSERT_TRUE(s.ok()) << s.status();
  const v1::GpuAssignment& a = s->assignments(0);
  EXPECT_THAT(a.reasons(), ElementsAre("mlx5_3:1 PIX to 0000:38:00.0 (common PCIe switch), NUMA 0 "
                                       "same as GPU, 400 Gb/s, GID 3 = 25.11.128.13 (RoCE v2 on "
                                       "eth3)",
                                       "beat mlx5_4:1 on distance: PIX vs PXB"));
  EXPECT_EQ(RejectionOf(a, "mlx5_4:1"), "PXB (lost on distance: mlx5_3:1 is PIX)");
  EXPECT_EQ(RejectionOf(a, "mlx5_5:1"), "SYS (lost on distance: mlx5_3:1 is PIX)");
  EXPECT_EQ(a.rejected_size(), 2);
  EXPECT_EQ(a.netdev(), "eth3");
  EXPECT_EQ(a.ipv4_subnet(), "25.11.128.0/24");
}

// The field notes' typical RoCE host: mlx5_0 on eth0 (front-end), mlx5_1..8 on eth1..8, one per
// GPU under a common switch, GIDs 0..3 on every port.
TEST(SelectTest, TypicalRoceHost) {
  ModelBuilder b;
  std::vector<std::string> gpus;
  b.Nic("mlx5_0", "0000:0c:00.0", 0, "eth0", "10.0.60.3", "10.0.60.0/24", 100);
  b.DefaultRoute("eth0");
  for (int i = 1; i <= 8; ++i) {
    int numa = i <= 4 ? 0 : 1;
    std::string gpu = absl::StrFormat("0000:%02x:00.0", 0x10 * i + 8);
    std::string nic = absl::StrFormat("0000:%02x:00.0", 0x10 * i + 9);
    gpus.push_back(gpu);
    b.Gpu(gpu, numa);
    b.Nic(absl::StrCat("mlx5_", i), nic, numa, absl::StrCat("eth", i),
          absl::StrCat("25.11.128.", i), "25.11.128.0/24");
  }
  for (int g = 1; g <= 8; ++g) {
    for (int n = 0; n <= 8; ++n) {
      bool same_numa = (g <= 4) == (n <= 4);
      DistanceClass d = g == n      ? v1::DISTANCE_CLASS_PIX
                        : same_numa ? v1::DISTANCE_CLASS_NODE
                                    : v1::DISTANCE_CLASS_SYS;
      b.Distance(gpus[g - 1], absl::StrCat("mlx5_", n), d);
    }
  }
  // Ask in a shuffled order: assignments follow it.
  std::vector<std::string> order = {gpus[7], gpus[0], gpus[3], gpus[4]};
  absl::StatusOr<v1::Selection> s = SelectNics(b.Build(), order, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_THAT(ChosenPorts(*s), ElementsAre("mlx5_8:1", "mlx5_1:1", "mlx5_4:1", "mlx5_5:1"));
  for (const v1::GpuAssignment& a : s->assignments()) {
    EXPECT_EQ(a.gid_index(), 3u);
    EXPECT_EQ(a.distance(), v1::DISTANCE_CLASS_PIX);
    EXPECT_EQ(RejectionOf(a, "mlx5_0:1"), "front-end: carries the default route on eth0");
    EXPECT_EQ(a.rejected_size(), 8);
  }
  EXPECT_EQ(s->env().at("NCCL_IB_HCA"), "=mlx5_1:1,mlx5_4:1,mlx5_5:1,mlx5_8:1");
  EXPECT_EQ(s->env().at("NCCL_IB_GID_INDEX"), "3");
  EXPECT_EQ(s->env().at("NCCL_SOCKET_IFNAME"), "=eth0");
  EXPECT_THAT(s->notes(), IsEmpty());
}

}  // namespace
}  // namespace fabric
