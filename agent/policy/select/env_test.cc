#include "agent/policy/select/env.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "agent/policy/select/select.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/hosts/discovered.h"
#include "tests/hosts/model_builder.h"

namespace fabric {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Key;
using testing::ModelBuilder;
using ::testing::Not;

// One RoCE port per GPU. The port's own RoCE v2 IPv4 GID is at `gid_index` (v1 just below it);
// indices 0/1 are link-local.
struct PortSpec {
  std::string dev;
  std::string netdev;
  uint32_t gid_index;
  std::string ipv4;
  std::string subnet;  // Connected subnet of the netdev; empty: unknown.
};

struct Rig {
  ModelBuilder b;
  std::vector<std::string> gpus;
  std::vector<v1::Port*> ports;

  explicit Rig(const std::vector<PortSpec>& specs) {
    for (size_t i = 0; i < specs.size(); ++i) {
      const PortSpec& p = specs[i];
      std::string gpu = absl::StrFormat("0000:%02x:00.0", 0x10 + i);
      gpus.push_back(gpu);
      b.Gpu(gpu, 0);
      v1::RdmaDevice* d = b.Device(p.dev, absl::StrFormat("0000:%02x:00.0", 0x90 + i), 0);
      v1::Port* port = b.RocePort(d, 1, p.netdev, "", p.subnet);
      if (!p.ipv4.empty()) {
        ModelBuilder::AddGid(port, p.gid_index - 1, v1::GID_TYPE_ROCE_V1, p.netdev, p.ipv4);
        ModelBuilder::AddGid(port, p.gid_index, v1::GID_TYPE_ROCE_V2, p.netdev, p.ipv4);
      }
      ports.push_back(port);
    }
    // Each GPU has its own NIC under its switch, so GPU i gets port i.
    for (size_t g = 0; g < specs.size(); ++g) {
      for (size_t n = 0; n < specs.size(); ++n) {
        b.Distance(gpus[g], specs[n].dev, g == n ? v1::DISTANCE_CLASS_PIX : v1::DISTANCE_CLASS_SYS);
      }
    }
  }

  absl::StatusOr<v1::Selection> Select(const v1::SelectionPolicy& p = {}) {
    return SelectNics(b.Build(), gpus, p);
  }

  // Port i's own global IPv6 GID at `gid_index` (RoCE v2; v1 just below it), for a spec without
  // IPv4: 2001:db8:a00:<i+1>::<last>.
  void AddIpv6(size_t i, uint32_t gid_index, int last) {
    const std::string gid = absl::StrFormat("2001:0db8:0a00:%04x:0000:0000:0000:%04x", i + 1, last);
    const std::string text = absl::StrFormat("2001:db8:a00:%x::%x", i + 1, last);
    const std::string& netdev = ports[i]->netdev();
    ModelBuilder::AddIpv6Gid(ports[i], gid_index - 1, v1::GID_TYPE_ROCE_V1, netdev, gid, text);
    ModelBuilder::AddIpv6Gid(ports[i], gid_index, v1::GID_TYPE_ROCE_V2, netdev, gid, text);
  }
};

EnvMap MustEnv(Rig& r, const v1::SelectionPolicy& p = {}) {
  absl::StatusOr<v1::Selection> s = r.Select(p);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? EnvOf(*s) : EnvMap{};
}

std::vector<std::string> Notes(Rig& r, const v1::SelectionPolicy& p = {}) {
  absl::StatusOr<v1::Selection> s = r.Select(p);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::vector<std::string>(s->notes().begin(), s->notes().end())
                : std::vector<std::string>{};
}

TEST(RenderEnvTest, HcaListIsExactMatchWithMoreThanTenDevices) {
  ModelBuilder b;
  b.Gpu("0000:18:00.0", 0).Gpu("0000:28:00.0", 0).Gpu("0000:38:00.0", 0);
  for (int i = 0; i < 12; ++i) {
    b.Nic(absl::StrCat("mlx5_", i), absl::StrFormat("0000:%02x:00.0", 0x40 + i), 0,
          absl::StrCat("eth", i), absl::StrCat("10.0.0.", 10 + i), "10.0.0.0/24");
  }
  const std::map<std::string, std::string> pix = {
      {"0000:18:00.0", "mlx5_1"}, {"0000:28:00.0", "mlx5_10"}, {"0000:38:00.0", "mlx5_11"}};
  for (const auto& [gpu, nic] : pix) {
    for (int i = 0; i < 12; ++i) {
      std::string dev = absl::StrCat("mlx5_", i);
      b.Distance(gpu, dev, dev == nic ? v1::DISTANCE_CLASS_PIX : v1::DISTANCE_CLASS_SYS);
    }
  }
  absl::StatusOr<v1::Selection> s =
      SelectNics(b.Build(), {"0000:18:00.0", "0000:28:00.0", "0000:38:00.0"}, {});
  ASSERT_TRUE(s.ok()) << s.status();
  // Without "=", NCCL would read mlx5_1 as a prefix of mlx5_10 and mlx5_11.
  EXPECT_EQ(s->env().at("NCCL_IB_HCA"), "=mlx5_1:1,mlx5_10:1,mlx5_11:1");
  EXPECT_EQ(s->env().at("UCX_NET_DEVICES"), "mlx5_1:1,mlx5_10:1,mlx5_11:1");
}

TEST(RenderEnvTest, HcaListInNaturalOrderWithoutDuplicates) {
  Rig r({{"mlx5_1", "eth1", 3, "10.0.0.1", "10.0.0.0/24"},
         {"mlx5_2", "eth2", 3, "10.0.0.2", "10.0.0.0/24"},
         {"mlx5_3", "eth3", 3, "10.0.0.3", "10.0.0.0/24"}});
  // GPUs asked in reverse order; the first two share mlx5_3's switch.
  r.b.Gpu("0000:1f:00.0", 0);
  for (const char* dev : {"mlx5_1", "mlx5_2", "mlx5_3"}) {
    r.b.Distance("0000:1f:00.0", dev,
                 std::string(dev) == "mlx5_3" ? v1::DISTANCE_CLASS_PIX : v1::DISTANCE_CLASS_SYS);
  }
  absl::StatusOr<v1::Selection> s =
      SelectNics(r.b.Build(), {"0000:1f:00.0", r.gpus[2], r.gpus[0]}, {});
  ASSERT_TRUE(s.ok()) << s.status();
  // Whatever order the GPUs come in: every rank of a job gets the same bytes.
  EXPECT_EQ(s->env().at("NCCL_IB_HCA"), "=mlx5_1:1,mlx5_3:1");
  EXPECT_EQ(s->env().at("UCX_NET_DEVICES"), "mlx5_1:1,mlx5_3:1");
}

// The example hosts as discovery sees them, whole host selected.
TEST(RenderEnvTest, ExampleHostsWithOtherGidLayouts) {
  const v1::Host& v6 = testing::DiscoveredExampleHost("ipv6-roce");
  absl::StatusOr<v1::Selection> s = SelectNics(v6, {"0000:19:00.0", "0000:9b:00.0"}, {});
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->assignments_size(), 2);
  EXPECT_EQ(s->assignments(0).rdma_device(), "mlx5_0");
  EXPECT_EQ(s->assignments(0).gid_index(), 3u);
  EXPECT_EQ(s->assignments(0).ipv6(), "2001:db8:a00:1:e42:a1ff:fe03:0");
  EXPECT_EQ(s->assignments(1).ipv6(), "2001:db8:a00:2:e42:a1ff:fe03:1");
  EXPECT_EQ(s->env().at("NCCL_IB_HCA"), "=mlx5_0:1,mlx5_1:1");
  EXPECT_EQ(s->env().at("NCCL_IB_GID_INDEX"), "3");
  EXPECT_EQ(s->env().at("UCX_IB_GID_INDEX"), "3");

  // InfiniBand: no GID variable, whatever the prefix-only slots hold.
  const v1::Host& ib = testing::DiscoveredExampleHost("ib-prefix-gids");
  s = SelectNics(ib, {"0000:19:00.0", "0000:9b:00.0"}, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->env().at("NCCL_IB_HCA"), "=mlx5_0:1,mlx5_1:1");
  EXPECT_THAT(EnvOf(*s), Not(Contains(Key("NCCL_IB_GID_INDEX"))));
  EXPECT_FALSE(s->assignments(0).has_gid_index());
}

TEST(RenderEnvTest, Ipv6OnlyWithOneIndexNamesIt) {
  Rig r({{"mlx5_1", "eth1", 0, "", ""}, {"mlx5_2", "eth2", 0, "", ""}});
  r.AddIpv6(0, 3, 1);
  r.AddIpv6(1, 3, 2);
  absl::StatusOr<v1::Selection> s = r.Select();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->assignments(0).ipv6(), "2001:db8:a00:1::1");
  EXPECT_EQ(s->assignments(1).ipv6(), "2001:db8:a00:2::2");
  const EnvMap env = EnvOf(*s);
  EXPECT_EQ(env.at("NCCL_IB_GID_INDEX"), "3");
  EXPECT_EQ(env.at("UCX_IB_GID_INDEX"), "3");
  EXPECT_THAT(env, Not(Contains(Key("NCCL_IB_ADDR_FAMILY"))));
  EXPECT_THAT(env, Not(Contains(Key("NCCL_IB_ADDR_RANGE"))));
  EXPECT_THAT(s->notes(), Not(Contains(HasSubstr("GID"))));
}

TEST(RenderEnvTest, Ipv6OnlyWithDifferentIndicesNamesTheFamily) {
  Rig r({{"mlx5_1", "eth1", 0, "", ""}, {"mlx5_2", "eth2", 0, "", ""}});
  r.AddIpv6(0, 3, 1);
  r.AddIpv6(1, 5, 2);
  absl::StatusOr<v1::Selection> s = r.Select();
  ASSERT_TRUE(s.ok()) << s.status();
  const EnvMap env = EnvOf(*s);
  EXPECT_EQ(env.at("NCCL_IB_GID_INDEX"), "-1");
  EXPECT_EQ(env.at("NCCL_IB_ADDR_FAMILY"), "AF_INET6");
  EXPECT_EQ(env.at("NCCL_IB_ROCE_VERSION_NUM"), "2");
  EXPECT_THAT(env, Not(Contains(Key("UCX_IB_GID_INDEX"))));
  EXPECT_THAT(env, Not(Contains(Key("NCCL_IB_ADDR_RANGE"))));
  EXPECT_THAT(s->notes(), Contains(AllOf(HasSubstr("GID indices differ (3 on mlx5_1:1; 5 on "
                                                   "mlx5_2:1)"),
                                         HasSubstr("AF_INET6"))));
}

TEST(RenderEnvTest, MixedFamiliesAreNoted) {
  // Same index on both: the index is right for both ports.
  Rig same({{"mlx5_1", "eth1", 3, "10.0.0.1", "10.0.0.0/24"}, {"mlx5_2", "eth2", 0, "", ""}});
  same.AddIpv6(1, 3, 2);
  absl::StatusOr<v1::Selection> s = same.Select();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->env().at("NCCL_IB_GID_INDEX"), "3");
  EXPECT_EQ(s->env().at("UCX_IB_GID_INDEX"), "3");
  EXPECT_THAT(s->notes(), Contains(HasSubstr("mixed address families: IPv4 GIDs on mlx5_1:1, IPv6 "
                                             "GIDs on mlx5_2:1")));

  // Different indices: no index and no family fits every port.
  Rig differ({{"mlx5_1", "eth1", 3, "10.0.0.1", "10.0.0.0/24"}, {"mlx5_2", "eth2", 0, "", ""}});
  differ.AddIpv6(1, 5, 2);
  s = differ.Select();
  ASSERT_TRUE(s.ok()) << s.status();
  const EnvMap env = EnvOf(*s);
  EXPECT_THAT(env, Not(Contains(Key("NCCL_IB_GID_INDEX"))));
  EXPECT_THAT(env, Not(Contains(Key("UCX_IB_GID_INDEX"))));
  EXPECT_THAT(env, Not(Contains(Key("NCCL_IB_ADDR_FAMILY"))));
  EXPECT_THAT(s->notes(), Contains(HasSubstr("mixed address families")));
  EXPECT_THAT(s->notes(), Contains(HasSubstr("left unset: GID indices differ")));
}

TEST(RenderEnvTest, UniformGidIndex) {
  Rig r({{"mlx5_1", "eth1", 3, "10.0.0.1", "10.0.0.0/24"},
         {"mlx5_2", "eth2", 3, "10.0.1.2", "10.0.1.0/24"}});
  EnvMap env = MustEnv(r);
  EXPECT_EQ(env["NCCL_IB_GID_INDEX"], "3");
  EXPECT_EQ(env["UCX_IB_GID_INDEX"], "3");
  EXPECT_THAT(env, AllOf(Not(Contains(Key("NCCL_IB_ROCE_VERSION_NUM"))),
                         Not(Contains(Key("NCCL_IB_ADDR_FAMILY"))),
                         Not(Contains(Key("NCCL_IB_ADDR_RANGE")))));

  Rig seven({{"mlx5_1", "eth1", 7, "10.0.0.1", ""}});
  EXPECT_EQ(MustEnv(seven)["NCCL_IB_GID_INDEX"], "7");
}

TEST(RenderEnvTest, MixedIndicesInOneSubnet) {
  Rig r({{"mlx5_1", "eth1", 3, "10.224.0.11", "10.224.0.0/24"},
         {"mlx5_2", "eth2", 5, "10.224.0.12", "10.224.0.0/24"}});
  EnvMap env = MustEnv(r);
  EXPECT_EQ(env["NCCL_IB_GID_INDEX"], "-1");
  EXPECT_EQ(env["NCCL_IB_ROCE_VERSION_NUM"], "2");
  EXPECT_EQ(env["NCCL_IB_ADDR_FAMILY"], "AF_INET");
  EXPECT_EQ(env["NCCL_IB_ADDR_RANGE"], "10.224.0.0/24");
  EXPECT_THAT(env, Not(Contains(Key("UCX_IB_GID_INDEX"))));
  EXPECT_THAT(Notes(r),
              Contains(AllOf(HasSubstr("3 on mlx5_1:1; 5 on mlx5_2:1"), HasSubstr("NCCL 2.21"))));
}

TEST(RenderEnvTest, MixedIndicesGetTheSmallestCoveringRange) {
  struct Case {
    const char* name;
    PortSpec a, b;
    const char* range;
  };
  for (const Case& c : {
           Case{"eight /24s",
                {"mlx5_1", "eth1", 3, "10.224.0.11", "10.224.0.0/24"},
                {"mlx5_2", "eth2", 4, "10.224.7.12", "10.224.7.0/24"},
                "10.224.0.0/21"},
           Case{"two /24s",
                {"mlx5_1", "eth1", 3, "10.224.0.11", "10.224.0.0/24"},
                {"mlx5_2", "eth2", 4, "10.224.1.12", "10.224.1.0/24"},
                "10.224.0.0/23"},
           Case{"unaligned pair",
                {"mlx5_1", "eth1", 3, "10.224.7.11", "10.224.7.0/24"},
                {"mlx5_2", "eth2", 4, "10.224.8.12", "10.224.8.0/24"},
                "10.224.0.0/20"},
           Case{"addresses when subnets are unknown",
                {"mlx5_1", "eth1", 3, "10.0.0.1", ""},
                {"mlx5_2", "eth2", 4, "10.0.0.2", ""},
                "10.0.0.0/30"},
       }) {
    Rig r({c.a, c.b});
    EnvMap env = MustEnv(r);
    EXPECT_EQ(env["NCCL_IB_GID_INDEX"], "-1") << c.name;
    EXPECT_EQ(env["NCCL_IB_ADDR_RANGE"], c.range) << c.name;
  }
}

TEST(RenderEnvTest, RangeThatWouldAlsoSelectAnotherGidIsLeftOut) {
  auto rig = [] {
    return Rig({{"mlx5_1", "eth1", 3, "10.224.0.11", "10.224.0.0/24"},
                {"mlx5_2", "eth2", 5, "10.224.7.12", "10.224.7.0/24"}});
  };
  // A pod's macvlan on mlx5_1 with an address inside 10.224.0.0/21, at a lower index.
  Rig r = rig();
  r.b.Netdev("macvlan0")->set_upper(true);
  ModelBuilder::AddGid(r.ports[0], 2, v1::GID_TYPE_ROCE_V2, "macvlan0", "10.224.3.99");
  EnvMap env = MustEnv(r);
  EXPECT_EQ(env["NCCL_IB_GID_INDEX"], "-1");
  EXPECT_EQ(env["NCCL_IB_ADDR_FAMILY"], "AF_INET");
  EXPECT_THAT(env, Not(Contains(Key("NCCL_IB_ADDR_RANGE"))));
  EXPECT_THAT(Notes(r), Contains(AllOf(HasSubstr("NCCL_IB_ADDR_RANGE left out"),
                                       HasSubstr("10.224.3.99"), HasSubstr("macvlan0"))));

  // The same macvlan outside the range does not get in the way.
  Rig outside = rig();
  ModelBuilder::AddGid(outside.ports[0], 9, v1::GID_TYPE_ROCE_V2, "macvlan0", "192.168.5.5");
  EXPECT_EQ(MustEnv(outside)["NCCL_IB_ADDR_RANGE"], "10.224.0.0/21");

  // A RoCE v1 entry in the range does not either: NCCL is told to take version 2.
  Rig v1_only = rig();
  ModelBuilder::AddGid(v1_only.ports[1], 8, v1::GID_TYPE_ROCE_V1, "macvlan1", "10.224.3.98");
  EXPECT_EQ(MustEnv(v1_only)["NCCL_IB_ADDR_RANGE"], "10.224.0.0/21");

  // Even the shared-subnet case is checked.
  Rig same({{"mlx5_1", "eth1", 3, "10.224.0.11", "10.224.0.0/24"},
            {"mlx5_2", "eth2", 5, "10.224.0.12", "10.224.0.0/24"}});
  ModelBuilder::AddGid(same.ports[1], 7, v1::GID_TYPE_ROCE_V2, "macvlan0", "10.224.0.200");
  EXPECT_THAT(MustEnv(same), Not(Contains(Key("NCCL_IB_ADDR_RANGE"))));
}

TEST(RenderEnvTest, AllInfinibandHasNoGidVariables) {
  ModelBuilder b;
  b.Gpu("0000:18:00.0", 0).Gpu("0000:28:00.0", 0);
  b.IbPort(b.Device("mlx5_1", "0000:19:00.0", 0), 1);
  b.IbPort(b.Device("mlx5_2", "0000:29:00.0", 0), 1);
  b.Distance("0000:18:00.0", "mlx5_1", v1::DISTANCE_CLASS_PIX)
      .Distance("0000:28:00.0", "mlx5_2", v1::DISTANCE_CLASS_PIX);
  absl::StatusOr<v1::Selection> s = SelectNics(b.Build(), {"18:00.0", "28:00.0"}, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EnvMap env = EnvOf(*s);
  EXPECT_EQ(env["NCCL_IB_HCA"], "=mlx5_1:1,mlx5_2:1");
  for (const char* k : {"NCCL_IB_GID_INDEX", "UCX_IB_GID_INDEX", "NCCL_IB_ROCE_VERSION_NUM",
                        "NCCL_IB_ADDR_FAMILY", "NCCL_IB_ADDR_RANGE"}) {
    EXPECT_THAT(env, Not(Contains(Key(k))));
  }
}

TEST(RenderEnvTest, InfinibandPortsDoNotDisturbTheRoceIndex) {
  Rig r({{"mlx5_1", "eth1", 3, "10.0.0.1", "10.0.0.0/24"}});
  r.b.Gpu("0000:2f:00.0", 0);
  r.b.IbPort(r.b.Device("mlx5_2", "0000:2e:00.0", 0), 1);
  r.b.Distance("0000:2f:00.0", "mlx5_2", v1::DISTANCE_CLASS_PIX);
  absl::StatusOr<v1::Selection> s = SelectNics(r.b.Build(), {r.gpus[0], "2f:00.0"}, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->env().at("NCCL_IB_HCA"), "=mlx5_1:1,mlx5_2:1");
  EXPECT_EQ(s->env().at("NCCL_IB_GID_INDEX"), "3");
}

TEST(RenderEnvTest, RocePortWithoutGidLeavesTheIndexUnset) {
  // SelectNics only picks such a port when no port with a GID is left, so the selection is
  // written out here: one port with GID 3, one without.
  Rig r({{"mlx5_1", "eth1", 3, "10.0.0.1", "10.0.0.0/24"}, {"mlx5_2", "eth2", 3, "", ""}});
  v1::Selection sel;
  for (const char* dev : {"mlx5_1", "mlx5_2"}) {
    v1::GpuAssignment* a = sel.add_assignments();
    a->set_rdma_device(dev);
    a->set_port(1);
    a->set_link_layer(v1::LINK_LAYER_ETHERNET);
  }
  sel.mutable_assignments(0)->set_gid_index(3);
  sel.mutable_assignments(0)->set_ipv4("10.0.0.1");
  absl::StatusOr<jobenv::Result> rendered = RenderJobEnv(r.b.Build(), sel, {});
  ASSERT_TRUE(rendered.ok()) << rendered.status();
  absl::StatusOr<EnvMap> env = rendered->Merged();
  const std::vector<std::string>& notes = rendered->notes;
  EXPECT_EQ((*env)["NCCL_IB_HCA"], "=mlx5_1:1,mlx5_2:1");
  for (const char* k : {"NCCL_IB_GID_INDEX", "UCX_IB_GID_INDEX", "NCCL_IB_ADDR_RANGE"}) {
    EXPECT_THAT(*env, Not(Contains(Key(k))));
  }
  EXPECT_THAT(notes, Contains(AllOf(HasSubstr("GID index"), HasSubstr("mlx5_2:1"))));

  // Through SelectNics with that port alone.
  Rig alone({{"mlx5_2", "eth2", 3, "", ""}});
  EXPECT_THAT(MustEnv(alone), Not(Contains(Key("NCCL_IB_GID_INDEX"))));
  EXPECT_THAT(Notes(alone), Contains(HasSubstr("GID index variables left unset")));
}

TEST(RenderEnvTest, SocketIfname) {
  auto rig = [] { return Rig({{"mlx5_1", "eth1", 3, "10.0.0.1", "10.0.0.0/24"}}); };
  {
    SCOPED_TRACE("default route");
    Rig r = rig();
    r.b.DefaultRoute("eth0");
    EXPECT_EQ(MustEnv(r)["NCCL_SOCKET_IFNAME"], "=eth0");
  }
  {
    SCOPED_TRACE("policy wins");
    Rig r = rig();
    r.b.DefaultRoute("eth0");
    v1::SelectionPolicy p;
    p.set_socket_ifname("ens9");
    EXPECT_EQ(MustEnv(r, p)["NCCL_SOCKET_IFNAME"], "=ens9");
  }
  {
    SCOPED_TRACE("first in natural order of several");
    Rig r = rig();
    r.b.DefaultRoute("eth10").DefaultRoute("eth2");
    EXPECT_EQ(MustEnv(r)["NCCL_SOCKET_IFNAME"], "=eth2");
  }
  {
    SCOPED_TRACE("no default route: the first selected port's netdev");
    Rig r = rig();
    EXPECT_EQ(MustEnv(r)["NCCL_SOCKET_IFNAME"], "=eth1");
    EXPECT_THAT(Notes(r), Contains(HasSubstr("NCCL_SOCKET_IFNAME uses eth1")));
  }
  {
    SCOPED_TRACE("nothing to name");
    ModelBuilder b;
    b.Gpu("0000:18:00.0", 0);
    b.IbPort(b.Device("mlx5_1", "0000:19:00.0", 0), 1);
    absl::StatusOr<v1::Selection> s = SelectNics(b.Build(), {"18:00.0"}, {});
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_THAT(EnvOf(*s), Not(Contains(Key("NCCL_SOCKET_IFNAME"))));
    EXPECT_THAT(s->notes(), Contains(HasSubstr("NCCL_SOCKET_IFNAME left unset")));
  }
}

TEST(RenderEnvTest, StaticEnvIsAddedAndWins) {
  Rig r({{"mlx5_1", "eth1", 3, "10.0.0.1", "10.0.0.0/24"}});
  v1::SelectionPolicy p;
  (*p.mutable_static_env())["NCCL_IB_TIMEOUT"] = "22";
  (*p.mutable_static_env())["NCCL_IB_GID_INDEX"] = "5";
  (*p.mutable_static_env())["NCCL_IB_HCA"] = "=mlx5_1:1";  // Same as computed: no note.
  EnvMap env = MustEnv(r, p);
  EXPECT_EQ(env["NCCL_IB_TIMEOUT"], "22");
  EXPECT_EQ(env["NCCL_IB_GID_INDEX"], "5");
  EXPECT_EQ(env["UCX_IB_GID_INDEX"], "3");
  std::vector<std::string> notes = Notes(r, p);
  EXPECT_THAT(notes, Contains(AllOf(HasSubstr("NCCL_IB_GID_INDEX=5"), HasSubstr("overrides"),
                                    HasSubstr("3"))));
  EXPECT_THAT(notes, Not(Contains(HasSubstr("NCCL_IB_HCA"))));
  EXPECT_THAT(notes, Not(Contains(HasSubstr("NCCL_IB_TIMEOUT"))));
}

// The config's NIC profile changes reach the job through the selection's nic_profile, and a bad
// profile name or variable is refused with the place it is in.
TEST(RenderEnvTest, NicProfilesFromTheConfig) {
  Rig r({{"mlx5_1", "eth1", 3, "10.0.0.1", "10.0.0.0/24"}});
  r.b.host().mutable_rdma_devices(0)->mutable_pci()->set_driver("ionic");
  v1::SelectionPolicy p;
  (*(*p.mutable_nic_profiles())["ionic"].mutable_env())["NCCL_IB_TC"] = "41";
  (*(*p.mutable_nic_profiles())["ionic"].mutable_env())["NCCL_NET_PLUGIN"] = "";
  (*(*p.mutable_nic_profiles())["mlx5"].mutable_env())["NCCL_IB_TIMEOUT"] = "23";
  EnvMap env = MustEnv(r, p);
  EXPECT_EQ(env["NCCL_IB_TC"], "41");
  EXPECT_EQ(env["NCCL_IB_FIFO_TC"], "192");
  EXPECT_FALSE(env.contains("NCCL_NET_PLUGIN"));
  EXPECT_FALSE(env.contains("NCCL_IB_TIMEOUT"));  // Another profile's.

  v1::SelectionPolicy bad;
  (*(*bad.mutable_nic_profiles())["cxgb4"].mutable_env())["X"] = "1";
  absl::Status s = r.Select(bad).status();
  EXPECT_THAT(s.message(), HasSubstr("no NIC profile \"cxgb4\" (known: mlx5, bnxt_re"));
  bad.clear_nic_profiles();
  (*(*bad.mutable_nic_profiles())["efa"].mutable_env())["NOT-A-NAME"] = "1";
  s = r.Select(bad).status();
  EXPECT_THAT(s.message(), HasSubstr("selection.nicProfiles.efa.env: \"NOT-A-NAME\""));
  bad.clear_nic_profiles();
  (*(*bad.mutable_nic_profiles())["efa"].mutable_env())["A"] = "x\ny";
  EXPECT_THAT(r.Select(bad).status().message(), HasSubstr("contains a NUL, CR or newline"));
}

TEST(RenderEnvTest, Errors) {
  Rig r({{"mlx5_1", "eth1", 3, "10.0.0.1", "10.0.0.0/24"}});
  absl::StatusOr<v1::Selection> s = r.Select();
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(RenderJobEnv(r.b.Build(), v1::Selection(), {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  v1::SelectionPolicy bad;
  (*bad.mutable_static_env())["1X"] = "y";
  EXPECT_EQ(RenderJobEnv(r.b.Build(), *s, bad).status().code(), absl::StatusCode::kInvalidArgument);
  // RenderJobEnv on its own gives what SelectNics stored.
  absl::StatusOr<jobenv::Result> env = RenderJobEnv(r.b.Build(), *s, {});
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->Merged(), EnvOf(*s));
}

}  // namespace
}  // namespace fabric
