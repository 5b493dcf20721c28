#include "agent/inventory/changes/changes.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/inventory/discovery/discovery.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "tests/hosts/discovered.h"
#include "tests/hosts/hosts.h"
#include "tests/hosts/model_builder.h"

namespace fabric {
namespace {

namespace fs = std::filesystem;
using namespace ::fabric::v1;  // NOLINT
using ::fabric::testing::ModelBuilder;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::IsEmpty;
using ::testing::Not;

constexpr char kGpu0[] = "0000:1a:00.0";
constexpr char kGpu1[] = "0000:3c:00.0";

// A small host: front-end mlx5_0 (eth0, default route), back-end RoCE NICs mlx5_1, mlx5_2 and
// mlx5_10, each with the usual four GIDs (v2 IPv4 at index 3), two GPUs, GPUDirect.
Host Base() {
  ModelBuilder b;
  b.host().set_hostname("node-1");
  b.Gpu(kGpu0, 0).Gpu(kGpu1, 0);
  b.Nic("mlx5_0", "0000:01:00.0", 0, "eth0", "10.0.60.3", "10.0.60.0/24", 100);
  b.DefaultRoute("eth0");
  b.Nic("mlx5_1", "0000:1b:00.0", 0, "eth1", "25.11.128.11", "25.11.128.0/24");
  b.Nic("mlx5_2", "0000:3d:00.0", 0, "eth2", "25.11.128.12", "25.11.128.0/24");
  b.Nic("mlx5_10", "0000:9d:00.0", 1, "eth10", "25.11.128.20", "25.11.128.0/24");
  b.Distance(kGpu0, "mlx5_1", DISTANCE_CLASS_PIX).Distance(kGpu1, "mlx5_2", DISTANCE_CLASS_PIX);
  b.host().mutable_gpudirect()->set_available(true);
  return b.Build();
}

RdmaDevice* Dev(Host& h, const std::string& name) {
  for (RdmaDevice& d : *h.mutable_rdma_devices()) {
    if (d.name() == name) return &d;
  }
  ADD_FAILURE() << "no device " << name;
  return h.add_rdma_devices();
}

Port* PortOf(Host& h, const std::string& dev, uint32_t number) {
  for (Port& p : *Dev(h, dev)->mutable_ports()) {
    if (p.number() == number) return &p;
  }
  ADD_FAILURE() << "no port " << dev << ":" << number;
  return Dev(h, dev)->add_ports();
}

Netdev* Nd(Host& h, const std::string& name) {
  for (Netdev& n : *h.mutable_netdevs()) {
    if (n.name() == name) return &n;
  }
  ADD_FAILURE() << "no netdev " << name;
  return h.add_netdevs();
}

template <typename T, typename Pred>
void EraseIf(google::protobuf::RepeatedPtrField<T>* r, Pred pred) {
  r->erase(std::remove_if(r->begin(), r->end(), pred), r->end());
}

void RemoveDevice(Host& h, const std::string& name) {
  EraseIf(h.mutable_rdma_devices(), [&](const RdmaDevice& d) { return d.name() == name; });
}

// "KIND subject old->new", plus " gid OLD->NEW" for GID table changes ("-" when unset).
std::string Describe(const InventoryChange& c) {
  std::string s = absl::StrCat(InventoryChange::Kind_Name(c.kind()).substr(5), " ", c.subject(),
                               " ", c.old_value(), "->", c.new_value());
  if (c.kind() == InventoryChange::KIND_GID_TABLE) {
    absl::StrAppend(
        &s, " gid ",
        c.has_old_roce_v2_ipv4_gid_index() ? absl::StrCat(c.old_roce_v2_ipv4_gid_index())
                                           : std::string("-"),
        "->",
        c.has_new_roce_v2_ipv4_gid_index() ? absl::StrCat(c.new_roce_v2_ipv4_gid_index())
                                           : std::string("-"));
  }
  return s;
}

std::vector<std::string> Diff(const Host& before, const Host& after) {
  std::vector<std::string> out;
  for (const InventoryChange& c : DiffHosts(before, after)) out.push_back(Describe(c));
  return out;
}

// Moves mlx5_1's IPv4 GIDs from 2/3 to 4/5 (the kernel re-added the address after a flap while a
// macvlan held the lower slots, then let them go).
void MoveIpv4Gids(Host& h) {
  Port* p = PortOf(h, "mlx5_1", 1);
  p->mutable_gids()->DeleteSubrange(2, 2);
  ModelBuilder::AddGid(p, 4, GID_TYPE_ROCE_V1, "eth1", "25.11.128.11");
  ModelBuilder::AddGid(p, 5, GID_TYPE_ROCE_V2, "eth1", "25.11.128.11");
}

struct Case {
  std::string name;
  std::function<void(Host&)> edit;  // Applied to a copy of Base() to make `after`.
  std::vector<std::string> want;
  std::function<void(Host&)> edit_before = nullptr;  // Likewise for `before`, when set.
};

TEST(DiffHosts, EachKind) {
  const std::vector<Case> cases = {
      {"identical", [](Host&) {}, {}},
      {"reordered only",
       [](Host& h) {
         h.mutable_rdma_devices()->SwapElements(1, 3);
         h.mutable_netdevs()->SwapElements(0, 2);
         h.mutable_accelerators()->SwapElements(0, 1);
       },
       {}},
      {"device and its netdev removed",
       [](Host& h) {
         RemoveDevice(h, "mlx5_2");
         EraseIf(h.mutable_netdevs(), [](const Netdev& n) { return n.name() == "eth2"; });
       },
       {"DEVICE_REMOVED mlx5_2 ->", "NETDEV_REMOVED eth2 ->"}},
      {"device added",
       [](Host& h) {
         ModelBuilder b;
         *b.host().mutable_netdevs() = h.netdevs();
         b.Nic("mlx5_3", "0000:41:00.0", 0, "eth3", "25.11.128.13", "25.11.128.0/24");
         *h.add_rdma_devices() = b.host().rdma_devices(0);
         *h.mutable_netdevs() = b.host().netdevs();
       },
       {"DEVICE_ADDED mlx5_3 ->", "NETDEV_ADDED eth3 ->"}},
      {"port down (phys state with it)",
       [](Host& h) {
         PortOf(h, "mlx5_1", 1)->set_state(PORT_STATE_DOWN);
         PortOf(h, "mlx5_1", 1)->set_phys_state(PHYS_STATE_DISABLED);
       },
       {"PORT_STATE mlx5_1:1 ACTIVE->DOWN"}},
      {"phys state alone is something else",
       [](Host& h) { PortOf(h, "mlx5_1", 1)->set_phys_state(PHYS_STATE_LINK_ERROR_RECOVERY); },
       {"OTHER  ->rdma_devices"}},
      {"rate (rate text with it)",
       [](Host& h) {
         PortOf(h, "mlx5_2", 1)->set_rate_gbps(200);
         PortOf(h, "mlx5_2", 1)->set_rate("200 Gb/sec (4X HDR)");
       },
       {"PORT_RATE mlx5_2:1 400->200"}},
      {"rate unknown",
       [](Host& h) { PortOf(h, "mlx5_2", 1)->clear_rate_gbps(); },
       {"PORT_RATE mlx5_2:1 400->"}},
      {"GID index moved",
       MoveIpv4Gids,
       {"GID_TABLE mlx5_1:1 3 (25.11.128.11)->5 (25.11.128.11) gid 3->5"}},
      {"GID gone",
       [](Host& h) { PortOf(h, "mlx5_1", 1)->mutable_gids()->DeleteSubrange(2, 2); },
       {"GID_TABLE mlx5_1:1 3 (25.11.128.11)-> gid 3->-",
        "NETDEV_ADDRESSES eth1 25.11.128.0/24,25.11.128.11->25.11.128.0/24"}},
      {"GID appears",
       [](Host&) {},
       {"GID_TABLE mlx5_1:1 ->3 (25.11.128.11) gid -->3",
        "NETDEV_ADDRESSES eth1 25.11.128.0/24->25.11.128.0/24,25.11.128.11"},
       [](Host& h) { PortOf(h, "mlx5_1", 1)->mutable_gids()->DeleteSubrange(2, 2); }},
      {"address changed in place",
       [](Host& h) {
         Port* p = PortOf(h, "mlx5_1", 1);
         for (int i = 2; i < 4; ++i) {
           p->mutable_gids(i)->set_ipv4("25.11.128.21");
           p->mutable_gids(i)->set_gid(testing::Ipv4MappedGid("25.11.128.21"));
         }
       },
       {"GID_TABLE mlx5_1:1 3 (25.11.128.11)->3 (25.11.128.21) gid 3->3",
        "NETDEV_ADDRESSES eth1 25.11.128.0/24,25.11.128.11->25.11.128.0/24,25.11.128.21"}},
      {"macvlan GIDs added: index stays",
       [](Host& h) {
         Port* p = PortOf(h, "mlx5_1", 1);
         ModelBuilder::AddGid(p, 4, GID_TYPE_ROCE_V1, "macvlan0", "25.11.129.50");
         ModelBuilder::AddGid(p, 5, GID_TYPE_ROCE_V2, "macvlan0", "25.11.129.50");
         Netdev* m = h.add_netdevs();
         m->set_name("macvlan0");
         m->set_upper(true);
       },
       {"GID_TABLE mlx5_1:1 3 (25.11.128.11)->3 (25.11.128.11) gid 3->3",
        "NETDEV_ADDED macvlan0 ->"}},
      {"netdev added",
       [](Host& h) { h.add_netdevs()->set_name("docker0"); },
       {"NETDEV_ADDED docker0 ->"}},
      {"netdev subnets",
       [](Host& h) {
         Nd(h, "eth2")->clear_ipv4_subnets();
         Nd(h, "eth2")->add_ipv4_subnets("25.11.0.0/16");
       },
       {"NETDEV_ADDRESSES eth2 25.11.128.0/24->25.11.0.0/16"}},
      {"netdev subnets reordered only",
       [](Host& h) {
         Nd(h, "eth2")->add_ipv4_subnets("10.1.0.0/16");
         Nd(h, "eth2")->mutable_ipv4_subnets()->SwapElements(0, 1);
       },
       {"NETDEV_ADDRESSES eth2 25.11.128.0/24->10.1.0.0/16,25.11.128.0/24"}},
      {"netdev operstate is something else",
       [](Host& h) { Nd(h, "eth2")->set_operstate("down"); },
       {"OTHER  ->netdevs"}},
      {"accelerator removed and added",
       [](Host& h) {
         EraseIf(h.mutable_accelerators(),
                 [](const Accelerator& a) { return a.pci_address() == kGpu1; });
         ModelBuilder b;
         b.Gpu("0000:c0:00.0", 1);
         *h.add_accelerators() = b.host().accelerators(0);
       },
       {"ACCELERATOR_REMOVED 0000:3c:00.0 ->", "ACCELERATOR_ADDED 0000:c0:00.0 ->"}},
      {"accelerator changed",
       [](Host& h) { h.mutable_accelerators(0)->mutable_pci()->set_numa_node(1); },
       {"OTHER  ->accelerators"}},
      {"port added on a device both have",
       [](Host& h) {
         Port* p = Dev(h, "mlx5_10")->add_ports();
         p->set_number(2);
         p->set_state(PORT_STATE_DOWN);
       },
       {"PORT_STATE mlx5_10:2 ->DOWN"}},
      {"port removed on a device both have",
       [](Host& h) { Dev(h, "mlx5_10")->clear_ports(); },
       {"PORT_STATE mlx5_10:1 ACTIVE->",
        "NETDEV_ADDRESSES eth10 25.11.128.0/24,25.11.128.20->25.11.128.0/24"}},
      {"device firmware",
       [](Host& h) { Dev(h, "mlx5_2")->set_fw_ver("28.39.1002"); },
       {"OTHER  ->rdma_devices"}},
      {"host-level fields",
       [](Host& h) {
         h.set_hostname("node-2");
         h.mutable_gpudirect()->set_available(false);
         h.mutable_topology(0)->set_distance(DISTANCE_CLASS_SYS);
         h.add_problems()->set_field("numa_nodes");
       },
       {"OTHER  ->hostname,gpudirect,topology,problems"}},
      {"the NCCL topology file read anew",
       [](Host& h) { h.mutable_nccl_topology()->set_error("gone"); },
       {"OTHER  ->nccl_topology"}},
  };
  for (const Case& c : cases) {
    Host before = Base(), after = Base();
    c.edit(after);
    if (c.edit_before) c.edit_before(before);
    EXPECT_THAT(Diff(before, after), ElementsAreArray(c.want)) << c.name;
  }
}

TEST(DiffHosts, ManyChangesComeInKindOrderThenNaturalOrder) {
  Host before = Base(), after = Base();
  PortOf(after, "mlx5_10", 1)->set_state(PORT_STATE_DOWN);
  PortOf(after, "mlx5_2", 1)->set_state(PORT_STATE_INIT);
  PortOf(after, "mlx5_10", 1)->set_rate_gbps(100);
  MoveIpv4Gids(after);
  RemoveDevice(after, "mlx5_0");
  after.add_netdevs()->set_name("eth11");
  after.add_netdevs()->set_name("eth9");
  EraseIf(after.mutable_accelerators(),
          [](const Accelerator& a) { return a.pci_address() == kGpu0; });
  after.mutable_gpudirect()->set_available(false);
  EXPECT_THAT(Diff(before, after),
              ElementsAre("DEVICE_REMOVED mlx5_0 ->",  //
                          "PORT_STATE mlx5_2:1 ACTIVE->INIT", "PORT_STATE mlx5_10:1 ACTIVE->DOWN",
                          "PORT_RATE mlx5_10:1 400->100",
                          "GID_TABLE mlx5_1:1 3 (25.11.128.11)->5 (25.11.128.11) gid 3->5",
                          "NETDEV_ADDED eth9 ->", "NETDEV_ADDED eth11 ->",
                          "NETDEV_ADDRESSES eth0 10.0.60.0/24,10.0.60.3->10.0.60.0/24",
                          "ACCELERATOR_REMOVED 0000:1a:00.0 ->", "OTHER  ->gpudirect"));
  // Old and new values are the right way round.
  std::vector<InventoryChange> changes = DiffHosts(before, after);
  EXPECT_EQ(changes[0].kind(), InventoryChange::KIND_DEVICE_REMOVED);
  EXPECT_EQ(changes[1].old_value(), "ACTIVE");
  EXPECT_EQ(changes[1].new_value(), "INIT");
}

TEST(RoceV2Ipv4GidIndex, OwnNetdevLowestIndex) {
  Host h = Base();
  EXPECT_EQ(RoceV2Ipv4GidIndex(*Dev(h, "mlx5_1"), *PortOf(h, "mlx5_1", 1)), 3u);

  // A macvlan's v2 GID at a lower index is not the port's own.
  Port* p = PortOf(h, "mlx5_2", 1);
  p->mutable_gids()->DeleteSubrange(2, 2);
  ModelBuilder::AddGid(p, 2, GID_TYPE_ROCE_V2, "macvlan0", "25.11.129.50");
  ModelBuilder::AddGid(p, 6, GID_TYPE_ROCE_V2, "eth2", "25.11.128.12");
  ModelBuilder::AddGid(p, 7, GID_TYPE_ROCE_V2, "eth2", "25.11.128.99");
  EXPECT_EQ(RoceV2Ipv4GidIndex(*Dev(h, "mlx5_2"), *p), 6u);

  // Own netdev unknown: any netdev.
  p->clear_netdev();
  EXPECT_EQ(RoceV2Ipv4GidIndex(*Dev(h, "mlx5_2"), *p), 2u);

  // A software device's port: the parent netdev.
  Dev(h, "mlx5_2")->set_parent_netdev("eth2");
  EXPECT_EQ(RoceV2Ipv4GidIndex(*Dev(h, "mlx5_2"), *p), 6u);

  // InfiniBand, and RoCE without an IPv4 GID: none.
  ModelBuilder b;
  RdmaDevice* ib = b.Device("mlx5_4", "0000:18:00.0");
  EXPECT_EQ(RoceV2Ipv4GidIndex(*ib, *b.IbPort(ib, 1)), std::nullopt);
  RdmaDevice* roce = b.Device("mlx5_5", "0000:19:00.0");
  EXPECT_EQ(RoceV2Ipv4GidIndex(*roce, *b.RocePort(roce, 1, "eth5", "")), std::nullopt);
}

std::vector<std::string> FindingLines(const std::vector<Finding>& findings) {
  std::vector<std::string> out;
  for (const Finding& f : findings) {
    EXPECT_EQ(f.severity(), SEVERITY_WARNING);
    EXPECT_EQ(f.check(), "gid_table");
    out.push_back(absl::StrCat(f.subject(), ": ", f.message()));
  }
  return out;
}

TEST(GidChangeFindings, Table) {
  const std::vector<Case> cases = {
      {"identical", [](Host&) {}, {}},
      {"moved",
       MoveIpv4Gids,
       {"mlx5_1:1: GID table changed since start: RoCE v2 IPv4 GID moved from index 3 to 5 (jobs "
        "started before use a stale NCCL_IB_GID_INDEX)"}},
      {"gone",
       [](Host& h) { PortOf(h, "mlx5_10", 1)->mutable_gids()->DeleteSubrange(2, 2); },
       {"mlx5_10:1: GID table changed since start: RoCE v2 IPv4 GID index 3 (25.11.128.20) is "
        "gone (jobs started before use a stale NCCL_IB_GID_INDEX)"}},
      {"address changed in place",
       [](Host& h) { PortOf(h, "mlx5_2", 1)->mutable_gids(3)->set_ipv4("25.11.128.99"); },
       {"mlx5_2:1: GID table changed since start: RoCE v2 IPv4 GID index 3 changed address from "
        "25.11.128.12 to 25.11.128.99 (connections made before use the old address)"}},
      {"other entries changed: informational, not reported",
       [](Host& h) {
         Port* p = PortOf(h, "mlx5_1", 1);
         ModelBuilder::AddGid(p, 4, GID_TYPE_ROCE_V2, "macvlan0", "25.11.129.50");
         p->mutable_gids()->DeleteSubrange(0, 1);
       },
       {}},
      {"device removed: reported elsewhere", [](Host& h) { RemoveDevice(h, "mlx5_1"); }, {}},
      {"port removed: reported elsewhere", [](Host& h) { Dev(h, "mlx5_1")->clear_ports(); }, {}},
      {"several, in natural order",
       [](Host& h) {
         PortOf(h, "mlx5_10", 1)->mutable_gids()->DeleteSubrange(2, 2);
         PortOf(h, "mlx5_2", 1)->mutable_gids()->DeleteSubrange(2, 2);
         h.mutable_rdma_devices()->SwapElements(2, 3);
       },
       {"mlx5_2:1: GID table changed since start: RoCE v2 IPv4 GID index 3 (25.11.128.12) is "
        "gone (jobs started before use a stale NCCL_IB_GID_INDEX)",
        "mlx5_10:1: GID table changed since start: RoCE v2 IPv4 GID index 3 (25.11.128.20) is "
        "gone (jobs started before use a stale NCCL_IB_GID_INDEX)"}},
  };
  for (const Case& c : cases) {
    Host start = Base(), now = Base();
    c.edit(now);
    EXPECT_THAT(FindingLines(GidChangeFindings(start, now)), ElementsAreArray(c.want)) << c.name;
  }
  // A GID that appears where there was none: jobs started before had none to use.
  Host start = Base(), now = Base();
  PortOf(start, "mlx5_1", 1)->mutable_gids()->DeleteSubrange(2, 2);
  EXPECT_THAT(GidChangeFindings(start, now), IsEmpty());
}

const Host& Discovered(const std::string& name) { return testing::DiscoveredExampleHost(name); }

TEST(DiffHosts, ExampleHostsAgainstThemselvesAndEachOther) {
  std::vector<Host> hosts;
  for (const std::string& name : testing::ExampleHostNames()) hosts.push_back(Discovered(name));
  for (size_t i = 0; i < hosts.size(); ++i) {
    const Host copy = hosts[i];
    EXPECT_THAT(DiffHosts(hosts[i], copy), IsEmpty()) << testing::ExampleHostNames()[i];
    EXPECT_THAT(GidChangeFindings(hosts[i], copy), IsEmpty());
  }
  // roce-9port -> broken (tests/hosts/hosts.h, BreakTree): mlx5_9 is a dangling link, mlx5_2's
  // state and rate unreadable, the RoCE v2 IPv4 GIDs of mlx5_3 (garbage), mlx5_5 (no gid_attrs:
  // and so eth5's address with it) and mlx5_8 (unknown type) unusable, eth6 lost with mlx5_6's
  // device link, GPU 0's class unreadable (so the other GPUs' nvidia-smi indices move down); the
  // roots differ (two temp dirs).
  EXPECT_THAT(
      Diff(hosts[0], hosts[4]),
      ElementsAre("DEVICE_ADDED mlx5_9 ->", "PORT_STATE mlx5_2:1 ACTIVE->UNKNOWN",
                  "PORT_RATE mlx5_2:1 400->", "GID_TABLE mlx5_3:1 3 (25.11.128.13)-> gid 3->-",
                  "GID_TABLE mlx5_5:1 3 (25.11.128.15)-> gid 3->-",
                  "GID_TABLE mlx5_8:1 3 (25.11.128.18)-> gid 3->-", "NETDEV_REMOVED eth6 ->",
                  "NETDEV_ADDRESSES eth5 25.11.128.0/24,25.11.128.15->25.11.128.0/24",
                  "ACCELERATOR_REMOVED 0000:1a:00.0 ->",
                  "OTHER  ->sysfs_root,procfs_root,rdma_devices,accelerators,topology,problems"));
}

// A targeted refresh shares the netdevs it did not read with the host before (the very
// objects). Their addresses come partly from the GID entries of devices that were read again:
// DiffHosts must see those changes as it does between copies.
TEST(DiffHosts, SharedNetdevsDiffAsCopiesDo) {
  const Host& before = Discovered("roce-9port");
  int checked = 0;
  for (const RdmaDevice& d : before.rdma_devices()) {
    for (bool drop : {false, true}) {
      google::protobuf::Arena arena;
      Host* after = google::protobuf::Arena::CreateMessage<Host>(&arena);
      *after = before;
      after->clear_rdma_devices();
      after->clear_netdevs();
      for (const RdmaDevice& e : before.rdma_devices()) {
        if (&e != &d) {
          after->mutable_rdma_devices()->UnsafeArenaAddAllocated(const_cast<RdmaDevice*>(&e));
          continue;
        }
        RdmaDevice* copy = after->add_rdma_devices();
        *copy = e;
        for (Port& p : *copy->mutable_ports()) {
          if (drop) p.clear_gids();
          for (Gid& g : *p.mutable_gids()) {
            if (!g.ipv4().empty()) g.set_ipv4("10.250.0.1");
          }
        }
      }
      for (const Netdev& n : before.netdevs()) {
        after->mutable_netdevs()->UnsafeArenaAddAllocated(const_cast<Netdev*>(&n));
      }
      const Host copied = *after;
      const std::vector<std::string> got = Diff(before, *after);
      EXPECT_EQ(got, Diff(before, copied)) << d.name() << (drop ? " GIDs dropped" : "");
      checked += std::count_if(got.begin(), got.end(), [](const std::string& c) {
        return c.rfind("NETDEV_ADDRESSES ", 0) == 0;
      });
    }
  }
  EXPECT_GE(checked, 9);  // Each RoCE port's netdev, at least once.
}

// DiffHosts compares through generated accessors, field by field. Here every field of the model
// (at every depth, on the first element of repeated fields) is changed in turn: each change must
// show. A field added to host.proto and not compared by DiffHosts fails this test.
namespace pb = ::google::protobuf;
using FieldPath = std::vector<std::pair<const pb::FieldDescriptor*, int>>;  // index -1: singular

pb::Message* Navigate(pb::Message* m, const FieldPath& path) {
  for (const auto& [f, i] : path) {
    const pb::Reflection* r = m->GetReflection();
    m = i < 0 ? r->MutableMessage(m, f) : r->MutableRepeatedMessage(m, f, i);
  }
  return m;
}

std::string PathName(const FieldPath& path, const pb::FieldDescriptor* last) {
  std::string out;
  for (const auto& [f, i] : path) absl::StrAppend(&out, f->name(), i < 0 ? "." : "[0].");
  return out + last->name();
}

// Changes the value of scalar or repeated field `f` of `m`.
void Mutate(pb::Message* m, const pb::FieldDescriptor* f) {
  const pb::Reflection* r = m->GetReflection();
  using F = pb::FieldDescriptor;
  if (f->is_repeated()) {
    switch (f->cpp_type()) {
      case F::CPPTYPE_INT32:
        r->AddInt32(m, f, 7);
        break;
      case F::CPPTYPE_INT64:
        r->AddInt64(m, f, 7);
        break;
      case F::CPPTYPE_UINT32:
        r->AddUInt32(m, f, 7);
        break;
      case F::CPPTYPE_UINT64:
        r->AddUInt64(m, f, 7);
        break;
      case F::CPPTYPE_DOUBLE:
        r->AddDouble(m, f, 7);
        break;
      case F::CPPTYPE_FLOAT:
        r->AddFloat(m, f, 7);
        break;
      case F::CPPTYPE_BOOL:
        r->AddBool(m, f, true);
        break;
      case F::CPPTYPE_ENUM:
        r->AddEnumValue(m, f, 1);
        break;
      case F::CPPTYPE_STRING:
        r->AddString(m, f, "added");
        break;
      case F::CPPTYPE_MESSAGE:
        r->AddMessage(m, f);
        break;
    }
    return;
  }
  switch (f->cpp_type()) {
    case F::CPPTYPE_INT32:
      r->SetInt32(m, f, r->GetInt32(*m, f) + 1);
      break;
    case F::CPPTYPE_INT64:
      r->SetInt64(m, f, r->GetInt64(*m, f) + 1);
      break;
    case F::CPPTYPE_UINT32:
      r->SetUInt32(m, f, r->GetUInt32(*m, f) + 1);
      break;
    case F::CPPTYPE_UINT64:
      r->SetUInt64(m, f, r->GetUInt64(*m, f) + 1);
      break;
    case F::CPPTYPE_DOUBLE:
      r->SetDouble(m, f, r->GetDouble(*m, f) + 1);
      break;
    case F::CPPTYPE_FLOAT:
      r->SetFloat(m, f, r->GetFloat(*m, f) + 1);
      break;
    case F::CPPTYPE_BOOL:
      r->SetBool(m, f, !r->GetBool(*m, f));
      break;
    case F::CPPTYPE_ENUM: {
      const pb::EnumDescriptor* e = f->enum_type();
      const int next = (r->GetEnum(*m, f)->index() + 1) % e->value_count();
      r->SetEnumValue(m, f, e->value(next)->number());
      break;
    }
    case F::CPPTYPE_STRING:
      r->SetString(m, f, r->GetString(*m, f) + "x");
      break;
    case F::CPPTYPE_MESSAGE:
      if (r->HasField(*m, f)) {
        r->ClearField(m, f);
      } else {
        r->MutableMessage(m, f);
      }
      break;
  }
}

// Checks every field below `path` of `base` (which holds `path`); counts the fields checked.
void CheckEveryField(const Host& base, const FieldPath& path, int* checked) {
  Host probe = base;
  const pb::Descriptor* d = Navigate(&probe, path)->GetDescriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const pb::FieldDescriptor* f = d->field(i);
    // The pairing is derived from the host and the policy, once per snapshot: not a fact of the
    // inventory (a fresh discovery has none to compare with the snapshot's).
    if (path.empty() && f->name() == "pairing") continue;
    Host after = base;
    Mutate(Navigate(&after, path), f);
    EXPECT_THAT(DiffHosts(base, after), Not(IsEmpty())) << PathName(path, f) << " is not compared";
    ++*checked;
    if (f->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE) continue;
    // Recurse into the sub-message, making one where `base` has none.
    Host inner = base;
    pb::Message* m = Navigate(&inner, path);
    const pb::Reflection* r = m->GetReflection();
    FieldPath deeper = path;
    if (f->is_repeated()) {
      if (r->FieldSize(*m, f) == 0) r->AddMessage(m, f);
      deeper.emplace_back(f, 0);
    } else {
      r->MutableMessage(m, f);
      deeper.emplace_back(f, -1);
    }
    CheckEveryField(inner, deeper, checked);
  }
}

TEST(DiffHosts, EveryFieldOfTheModelIsCompared) {
  // A RoCE host with a macvlan GID, and an InfiniBand host (LIDs, no netdev on the GIDs).
  for (const Host& base : {Base(), [] {
                             ModelBuilder b;
                             b.IbPort(b.Device("mlx5_0", "0000:18:00.0"), 1);
                             return b.Build();
                           }()}) {
    int checked = 0;
    CheckEveryField(base, {}, &checked);
    EXPECT_GT(checked, 90);
  }
}

}  // namespace
}  // namespace fabric
