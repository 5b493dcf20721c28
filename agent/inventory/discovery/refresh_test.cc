#include "agent/inventory/discovery/refresh.h"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/inventory/discovery/discovery.h"
#include "tests/hosts/builder.h"
#include "tests/hosts/hosts.h"
#include "tests/testing/subprocess.h"

namespace fabric {
namespace {

namespace fs = std::filesystem;
using namespace ::fabric::v1;  // NOLINT

// ---- Planning, table-driven on a small model ----

Host PlanHost() {
  Host h;
  RdmaDevice* a = h.add_rdma_devices();
  a->set_name("mlx5_0");
  a->mutable_pci()->set_address("0000:17:00.0");
  a->add_ports()->set_netdev("eth1");
  RdmaDevice* b = h.add_rdma_devices();
  b->set_name("mlx5_1");
  b->mutable_pci()->set_address("0000:18:00.0");
  b->add_ports()->set_netdev("eth2");
  RdmaDevice* rxe = h.add_rdma_devices();
  rxe->set_name("rxe0");
  rxe->set_parent_netdev("eth9");
  auto nd = [&](const std::string& name, const std::string& dev, int32_t ifindex) {
    Netdev* n = h.add_netdevs();
    n->set_name(name);
    n->set_rdma_device(dev);
    n->set_ifindex(ifindex);
  };
  nd("eth0", "", 2);  // The default-route netdev.
  nd("eth1", "mlx5_0", 3);
  nd("eth2", "mlx5_1", 4);
  nd("mv0", "mlx5_0", 5);  // An upper device named by mlx5_0's GIDs.
  nd("eth9", "rxe0", 6);
  h.add_default_route_netdevs("eth0");
  return h;
}

struct PlanCase {
  const char* name;
  std::function<void(ChangeScope*)> events;
  std::map<std::string, NetdevFacts> sysfs;  // What LookUpNetdev would say.
  std::set<std::string> devices;
  bool device_list, routes, full;
  std::set<std::string> netdevs;
};

TEST(PlanRefreshTest, EachEventPlansWhatDependsOnIt) {
  NetdevFacts pod_on_pf;  // A second netdev on mlx5_1's function.
  pod_on_pf.exists = true;
  pod_on_pf.pci_address = "0000:18:00.0";
  pod_on_pf.pci_has_rdma = true;
  NetdevFacts back;  // The netdev of an RDMA device the inventory does not hold (yet).
  back.exists = true;
  back.pci_address = "0000:99:00.0";
  back.pci_has_rdma = true;
  NetdevFacts plain_nic = back;
  plain_nic.pci_has_rdma = false;
  NetdevFacts macvlan;
  macvlan.exists = true;
  macvlan.lowers = {"eth2"};
  NetdevFacts bridge;
  bridge.exists = true;
  bridge.lowers = {"veth7"};
  const std::vector<PlanCase> cases = {
      {"pod veth (not in sysfs)",
       [](ChangeScope* s) { s->Netdev("veth1a2b"); },
       {},
       {},
       false,
       false,
       false,
       {}},
      {"bridge over pod veths",
       [](ChangeScope* s) { s->Netdev("cni0"); },
       {{"cni0", bridge}},
       {},
       false,
       false,
       false,
       {}},
      {"port netdev",
       [](ChangeScope* s) { s->Netdev("eth1"); },
       {},
       {"mlx5_0"},
       false,
       false,
       false,
       {}},
      {"address by ifindex",
       [](ChangeScope* s) { s->Ifindex(4); },
       {},
       {"mlx5_1"},
       false,
       false,
       false,
       {}},
      {"unknown ifindex", [](ChangeScope* s) { s->Ifindex(77); }, {}, {}, false, false, false, {}},
      {"known upper",
       [](ChangeScope* s) { s->Netdev("mv0"); },
       {},
       {"mlx5_0"},
       false,
       false,
       false,
       {}},
      {"new macvlan on a port",
       [](ChangeScope* s) { s->Netdev("mv9"); },
       {{"mv9", macvlan}},
       {"mlx5_1"},
       false,
       false,
       false,
       {}},
      {"software device's netdev",
       [](ChangeScope* s) { s->Netdev("eth9"); },
       {},
       {"rxe0"},
       false,
       false,
       false,
       {}},
      {"second netdev of a function",
       [](ChangeScope* s) { s->Netdev("eth2v"); },
       {{"eth2v", pod_on_pf}},
       {"mlx5_1"},
       false,
       false,
       false,
       {}},
      {"device back with its netdev",
       [](ChangeScope* s) { s->Netdev("eth7"); },
       {{"eth7", back}},
       {},
       true,
       false,
       false,
       {}},
      {"plain NIC",
       [](ChangeScope* s) { s->Netdev("eno1"); },
       {{"eno1", plain_nic}},
       {},
       false,
       false,
       false,
       {}},
      {"default-route netdev",
       [](ChangeScope* s) { s->Netdev("eth0"); },
       {},
       {},
       false,
       false,
       false,
       {"eth0"}},
      {"route via a pod veth",
       [](ChangeScope* s) { s->RouteVia("veth1a2b"); },
       {},
       {},
       false,
       false,
       false,
       {}},
      {"route via a port netdev",
       [](ChangeScope* s) { s->RouteVia("eth2"); },
       {},
       {},
       false,
       true,
       false,
       {}},
      {"default route", [](ChangeScope* s) { s->DefaultRoute(); }, {}, {}, false, true, false, {}},
      {"RDMA uevent",
       [](ChangeScope* s) { s->RdmaDevice("mlx5_1"); },
       {},
       {"mlx5_1"},
       true,
       false,
       false,
       {}},
      {"RDMA uevent, new device",
       [](ChangeScope* s) { s->RdmaDevice("mlx5_9"); },
       {},
       {},
       true,
       false,
       false,
       {}},
      {"overflow", [](ChangeScope* s) { s->Full("ENOBUFS"); }, {}, {}, false, false, true, {}},
      {"storm of names",
       [](ChangeScope* s) {
         for (int i = 0; i < 10000; ++i) s->Netdev(absl::StrCat("veth", i));
       },
       {},
       {},
       false,
       false,
       true,
       {}},
  };
  const Host h = PlanHost();
  for (const PlanCase& c : cases) {
    ChangeScope scope;
    c.events(&scope);
    std::vector<std::string> asked;
    RefreshPlan p = PlanRefresh(h, scope, [&](const std::string& n) {
      asked.push_back(n);
      auto it = c.sysfs.find(n);
      return it == c.sysfs.end() ? NetdevFacts{} : it->second;
    });
    EXPECT_EQ(p.full, c.full) << c.name;
    if (c.full) continue;
    EXPECT_EQ(p.devices, c.devices) << c.name;
    EXPECT_EQ(p.device_list, c.device_list) << c.name;
    EXPECT_EQ(p.routes, c.routes) << c.name;
    EXPECT_EQ(p.netdevs, c.netdevs) << c.name;
    for (const std::string& n : asked) {
      EXPECT_EQ(std::count_if(h.netdevs().begin(), h.netdevs().end(),
                              [&](const Netdev& nd) { return nd.name() == n; }),
                0)
          << c.name << ": sysfs asked about " << n << ", which the inventory holds";
    }
  }
}

TEST(ChangeScopeTest, AStormKeepsNoNames) {
  ChangeScope s;
  for (int i = 0; i < 100000; ++i) s.Netdev(absl::StrCat("veth", i));
  EXPECT_TRUE(s.full());
  EXPECT_TRUE(s.netdevs().empty());
  ChangeScope merged;
  merged.Netdev("eth1");
  merged.Merge(s);
  EXPECT_TRUE(merged.full());
  EXPECT_TRUE(merged.netdevs().empty());
}

// ---- Refresh against a full Discover on written example hosts ----

// Host problems come out in another order after a splice; nothing else may differ.
Host Normalized(Host h) {
  std::sort(h.mutable_problems()->begin(), h.mutable_problems()->end(),
            [](const FieldProblem& a, const FieldProblem& b) {
              return std::tie(a.field(), a.path(), a.reason()) <
                     std::tie(b.field(), b.path(), b.reason());
            });
  return h;
}

class RefreshTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  void Load(const std::string& name) {
    dir_ = testing::MakeTempDir("refresh");
    ASSERT_FALSE(dir_.empty());
    fs::remove(dir_);
    ASSERT_TRUE(testing::WriteExampleHost(name, dir_).ok());
    sys_ = dir_ / "sys";
    sysfs_ = std::make_unique<HostFsImpl>(sys_.string());
    procfs_ = std::make_unique<HostFsImpl>((dir_ / "proc").string());
    auto h = Discover(*sysfs_, *procfs_);
    ASSERT_TRUE(h.ok()) << h.status();
    cur_ = std::make_shared<const Host>(*h);
    kept_ = 0;
  }

  // Refreshes for `scope`, then checks the result against a full rescan of the same tree. The
  // next step starts from the refreshed host, so that hosts share devices several steps deep.
  RefreshPlan Step(const std::string& what, const ChangeScope& scope) {
    RefreshPlan plan =
        PlanRefresh(*cur_, scope, [&](const std::string& n) { return LookUpNetdev(*sysfs_, n); });
    auto full = Discover(*sysfs_, *procfs_);
    EXPECT_TRUE(full.ok()) << full.status();
    const std::string before = cur_->SerializeAsString();
    std::shared_ptr<const Host> next = cur_;
    int kept = kept_;
    if (plan.full) {
      next = std::make_shared<const Host>(*full);
      kept = 0;
    } else if (!plan.empty()) {
      auto r = Refresh(*sysfs_, *procfs_, cur_, plan);
      EXPECT_TRUE(r.ok()) << what << ": " << r.status();
      if (r.ok()) {
        next = r->host;
        kept = r->kept;
        EXPECT_LE(kept, kMaxKeptAlive);
      }
    }
    EXPECT_EQ(cur_->SerializeAsString(), before)
        << what << ": the refresh wrote the host it shares";
    std::string report;
    google::protobuf::util::MessageDifferencer diff;
    diff.ReportDifferencesToString(&report);
    const bool same = diff.Compare(Normalized(*full), Normalized(*next));
    EXPECT_TRUE(same) << what << " (plan: " << plan.why << ")\n" << report;
    cur_ = same ? next : std::make_shared<const Host>(*full);
    kept_ = same ? kept : 0;
    return plan;
  }

  fs::path Port(const std::string& dev, int port = 1) {
    return sys_ / "class/infiniband" / dev / "ports" / std::to_string(port);
  }
  static void Write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }
  void SetGid(const std::string& dev, int slot, const std::string& ipv4, const std::string& nd) {
    const fs::path p = Port(dev);
    Write(p / "gids" / std::to_string(slot), testing::Ipv4MappedGid(ipv4) + "\n");
    Write(p / "gid_attrs/types" / std::to_string(slot), "RoCE v2\n");
    Write(p / "gid_attrs/ndevs" / std::to_string(slot), nd + "\n");
  }
  void ClearGid(const std::string& dev, int slot) {
    const fs::path p = Port(dev);
    Write(p / "gids" / std::to_string(slot), "0000:0000:0000:0000:0000:0000:0000:0000\n");
    fs::remove(p / "gid_attrs/types" / std::to_string(slot));
    fs::remove(p / "gid_attrs/ndevs" / std::to_string(slot));
  }
  const RdmaDevice* Dev(const std::string& name) const {
    for (const RdmaDevice& d : cur_->rdma_devices()) {
      if (d.name() == name) return &d;
    }
    return nullptr;
  }
  // Where `link` leads, if that is inside the tree. The example hosts have links that lead out
  // of it on purpose (broken: eth7 to /etc); the tests run as root, so a helper that moves or
  // writes what a link leads to must never follow one of those.
  std::optional<fs::path> InTree(const fs::path& link) const {
    std::error_code ec;
    const fs::path real = fs::canonical(link, ec);
    const fs::path root = fs::canonical(dir_, ec);
    if (ec || real.empty()) return std::nullopt;
    auto [r, _] = std::mismatch(root.begin(), root.end(), real.begin(), real.end());
    if (r != root.end()) return std::nullopt;
    return real;
  }
  // Takes a device out of the tree (as its driver unbinding would), and puts it back.
  void RemoveDevice(const std::string& dev) {
    const fs::path link = sys_ / "class/infiniband" / dev;
    const std::optional<fs::path> real = InTree(link);
    ASSERT_TRUE(real) << link << " leads out of the tree";
    stash_[dev] = {fs::read_symlink(link), *real};
    fs::rename(stash_[dev].second, dir_ / ("stash-" + dev));
    fs::remove(link);
  }
  void RestoreDevice(const std::string& dev) {
    auto [target, real] = stash_[dev];
    fs::rename(dir_ / ("stash-" + dev), real);
    fs::create_symlink(target, sys_ / "class/infiniband" / dev);
    stash_.erase(dev);
  }
  // Renames a port's netdev as the kernel does: its directory, class link and GID entries.
  void RenameNetdev(const std::string& from, const std::string& to) {
    const fs::path link = sys_ / "class/net" / from;
    const fs::path target = fs::read_symlink(link);
    const std::optional<fs::path> in_tree = InTree(link);
    ASSERT_TRUE(in_tree) << link << " leads out of the tree";
    const fs::path real = *in_tree;
    fs::rename(real, real.parent_path() / to);
    fs::remove(link);
    fs::create_symlink(target.parent_path() / to, sys_ / "class/net" / to);
    for (const auto& dev : fs::directory_iterator(sys_ / "class/infiniband")) {
      if (!InTree(dev.path())) continue;  // Dangling, or leading out of the tree.
      for (const auto& port : fs::directory_iterator(dev.path() / "ports")) {
        const fs::path ndevs = port.path() / "gid_attrs/ndevs";
        if (!fs::exists(ndevs)) continue;
        for (const auto& e : fs::directory_iterator(ndevs)) {
          std::ifstream in(e.path());
          std::string name;
          std::getline(in, name);
          if (name == from) Write(e.path(), to + "\n");
        }
      }
    }
  }
  // A macvlan on `lower`, with the GID the kernel adds to the lower's port for its address.
  void AddUpper(const std::string& name, const std::string& lower, const std::string& dev, int slot,
                const std::string& ipv4) {
    const fs::path d = sys_ / "devices/virtual/net" / name;
    fs::create_directories(d);
    Write(d / "address", "0e:42:a1:99:00:01\n");
    Write(d / "mtu", "1500\n");
    Write(d / "operstate", "up\n");
    Write(d / "ifindex", "900\n");
    Write(d / "speed", "100000\n");
    fs::create_symlink(
        fs::path("../../../..") / fs::relative(fs::canonical(sys_ / "class/net" / lower), sys_),
        d / ("lower_" + lower));
    fs::create_symlink(fs::path("../../devices/virtual/net") / name, sys_ / "class/net" / name);
    SetGid(dev, slot, ipv4, name);
  }
  void DelUpper(const std::string& name, const std::string& dev, int slot) {
    ClearGid(dev, slot);
    fs::remove(sys_ / "class/net" / name);
    fs::remove_all(sys_ / "devices/virtual/net" / name);
  }

  fs::path dir_, sys_;
  std::unique_ptr<HostFsImpl> sysfs_, procfs_;
  std::shared_ptr<const Host> cur_;
  int kept_ = 0;  // As the last refresh returned it.
  std::map<std::string, std::pair<fs::path, fs::path>> stash_;
};

TEST_F(RefreshTest, EachKindOfChangeEqualsAFullRescan) {
  Load("roce-9port");
  ChangeScope s;
  {
    ChangeScope pod;
    pod.Netdev("veth0a1b2c");
    pod.RouteVia("veth0a1b2c");
    EXPECT_TRUE(Step("a pod's veth", pod).empty());
  }
  SetGid("mlx5_3", 9, "10.9.0.3", "eth3");
  s.Netdev("eth3");
  s.RouteVia("eth3");
  RefreshPlan p = Step("an address on a port's netdev", s);
  EXPECT_EQ(p.devices, std::set<std::string>{"mlx5_3"});
  ClearGid("mlx5_3", 9);
  Step("the address removed", s);

  AddUpper("mv7", "eth5", "mlx5_5", 10, "10.9.0.5");
  ChangeScope upper;
  upper.Netdev("mv7");
  p = Step("a macvlan with an address on a port's netdev", upper);
  EXPECT_EQ(p.devices, std::set<std::string>{"mlx5_5"});
  DelUpper("mv7", "mlx5_5", 10);
  Step("the macvlan deleted", upper);

  Write(Port("mlx5_2") / "state", "1: DOWN\n");
  Write(sys_ / "class/net/eth2/operstate", "down\n");
  ChangeScope down;
  down.Netdev("eth2");
  Step("a port's link down", down);

  RemoveDevice("mlx5_7");
  fs::remove(sys_ / "class/net/eth7");
  ChangeScope gone;
  gone.Netdev("eth7");
  p = Step("an RDMA device removed (its netdev's event)", gone);
  EXPECT_EQ(p.devices, std::set<std::string>{"mlx5_7"});
  RestoreDevice("mlx5_7");
  ChangeScope uevent;
  uevent.RdmaDevice("mlx5_7");
  Step("the device back (its uevent)", uevent);

  RenameNetdev("eth4", "ens4np0");
  ChangeScope renamed;
  renamed.Netdev("eth4");
  renamed.Netdev("ens4np0");
  Step("a port's netdev renamed", renamed);
}

// Refreshed hosts point at the devices they did not read again. Reading one device again and
// again keeps only the scanned host alive behind the last one: the hosts between are freed.
TEST_F(RefreshTest, RefreshesOfOneDeviceKeepOnlyTheScannedHost) {
  Load("roce-9port");
  const std::weak_ptr<const Host> scanned = cur_;
  ChangeScope s;
  s.Netdev("eth3");
  for (int i = 0; i < kMaxKeptAlive + 3; ++i) {
    std::shared_ptr<const Host> before = cur_;
    SetGid("mlx5_3", 9, absl::StrCat("10.9.0.", 10 + i), "eth3");
    Step(absl::StrCat("address ", i), s);
    ASSERT_NE(cur_, before);
    ASSERT_EQ(cur_->rdma_devices_size(), before->rdma_devices_size());
    for (int d = 0; d < cur_->rdma_devices_size(); ++d) {
      const bool same_object = &cur_->rdma_devices(d) == &before->rdma_devices(d);
      EXPECT_EQ(same_object, cur_->rdma_devices(d).name() != "mlx5_3")
          << cur_->rdma_devices(d).name() << ": only the device read again is a new object";
    }
    EXPECT_EQ(kept_, 1);
    const std::weak_ptr<const Host> was = before;
    before.reset();
    EXPECT_EQ(was.expired(), i > 0) << "step " << i << ": a host between is kept alive";
    EXPECT_FALSE(scanned.expired());
  }
}

// Refreshes of different devices keep the hosts that hold each one alive, up to kMaxKeptAlive;
// the refresh past that copies the kept devices and frees them all.
TEST_F(RefreshTest, RefreshesOfManyDevicesAreCutByACopy) {
  Load("roce-9port");
  std::vector<std::pair<std::string, std::string>> ports;  // Device, netdev.
  for (const v1::RdmaDevice& d : cur_->rdma_devices()) {
    if (d.ports_size() > 0 && !d.ports(0).netdev().empty() &&
        d.ports(0).link_layer() == v1::LINK_LAYER_ETHERNET) {
      ports.emplace_back(d.name(), d.ports(0).netdev());
    }
  }
  ASSERT_GT(ports.size(), static_cast<size_t>(kMaxKeptAlive));  // Each step a different one.
  std::vector<int> kept;
  bool copied = false;
  for (int i = 0; i < 2 * kMaxKeptAlive + 2; ++i) {
    const auto& [dev, netdev] = ports[static_cast<size_t>(i) % ports.size()];
    const std::shared_ptr<const Host> before = cur_;
    SetGid(dev, 9, absl::StrCat("10.9.", i, ".1"), netdev);
    ChangeScope s;
    s.Netdev(netdev);
    Step(absl::StrCat("address on ", netdev), s);
    kept.push_back(kept_);
    if (kept_ == 0) {
      copied = true;
      for (int d = 0; d < cur_->rdma_devices_size(); ++d) {
        EXPECT_NE(&cur_->rdma_devices(d), &before->rdma_devices(d)) << "a copy shares nothing";
      }
    }
  }
  EXPECT_TRUE(copied);
  // One more host kept per step (the one holding the device read the step before) until the
  // copy: 1,2,...,8,0,1,...
  for (size_t i = 0; i < kept.size(); ++i) {
    const int want = i == 0 ? 1 : (kept[i - 1] == kMaxKeptAlive ? 0 : kept[i - 1] + 1);
    EXPECT_EQ(kept[i], want) << absl::StrJoin(kept, ",");
  }
}

// Refresh copies every host-level field it does not build itself (CopyHostFields).
TEST(RefreshHostFields, EveryFieldOfHostIsKnown) {
  const google::protobuf::Descriptor* d = Host::descriptor();
  std::vector<std::string> names;
  for (int i = 0; i < d->field_count(); ++i) names.push_back(d->field(i)->name());
  EXPECT_EQ(absl::StrJoin(names, ","),
            "hostname,kernel_release,sysfs_root,procfs_root,rdma_devices,netdevs,accelerators,"
            "gpudirect,topology,default_route_netdevs,numa_nodes,problems,pairing,nccl_topology")
      << "Host has a new field: copy it in refresh.cc's CopyHostFields and serialize it in "
         "agent/daemon/api/watch.cc's HostPieces, then update this list";
}

TEST_F(RefreshTest, VanishedAndNeverSeenAreNoErrors) {
  Load("roce-9port");
  RemoveDevice("mlx5_1");  // Between the event and the read.
  ChangeScope s;
  s.Netdev("eth1");
  s.Ifindex(123456);
  s.RdmaDevice("mlx5_42");
  Step("device gone before the read; events for things never seen", s);
}

TEST_F(RefreshTest, ADefaultRouteChangeAsksForAFullRescan) {
  Load("roce-9port");
  RefreshPlan plan;
  plan.routes = true;
  // A second default route, through eth1: a netdev set the splice cannot follow.
  std::ofstream(dir_ / "proc/net/route", std::ios::app)
      << "eth1\t00000000\t0100000A\t0003\t0\t0\t0\t00000000\t0\t0\t0\n";
  auto r = Refresh(*sysfs_, *procfs_, cur_, plan);
  EXPECT_TRUE(absl::IsFailedPrecondition(r.status())) << r.status();
}

// Random steps on each example host, seeded and printed (FABRIC_SEED=N repeats a sequence):
// GIDs set and cleared, pods' veths, devices removed and restored, links down and up, port
// netdevs renamed or moved into a pod's namespace and back, macvlans with a GID added and deleted.
// After each step the refreshed host must equal a full rescan.
class RandomizedRefreshTest : public RefreshTest,
                              public ::testing::WithParamInterface<std::string> {};

TEST_P(RandomizedRefreshTest, EveryStepEqualsAFullRescan) {
  Load(GetParam());
  uint32_t seed = static_cast<uint32_t>(
      std::chrono::steady_clock::now().time_since_epoch().count() & 0xffffffff);
  if (const char* env = std::getenv("FABRIC_SEED")) {
    ASSERT_TRUE(absl::SimpleAtoi(env, &seed)) << "FABRIC_SEED=" << env;
  }
  SCOPED_TRACE(absl::StrCat("FABRIC_SEED=", seed));
  std::mt19937 rng(seed);
  // Devices whose port has a host netdev, both inside the tree.
  std::vector<std::string> with_netdev;
  for (const RdmaDevice& d : cur_->rdma_devices()) {
    if (!d.ports().empty() && !d.ports(0).netdev().empty() &&
        InTree(sys_ / "class/net" / d.ports(0).netdev()) &&
        InTree(sys_ / "class/infiniband" / d.name())) {
      with_netdev.push_back(d.name());
    }
  }
  if (with_netdev.empty()) {
    GTEST_SKIP() << "no RDMA port with a netdev on " << GetParam();
  }
  std::map<std::string, std::string> uppers;  // device -> its macvlan
  struct InPod {
    std::string name;
    fs::path target;  // Of its class/net link.
    fs::path real;    // Its directory.
  };
  std::map<std::string, InPod> in_pod;  // device -> its netdev, moved out
  int renames = 0;
  // Each step rescans the whole host to compare: on the 512-VF host that is half a second (more
  // under ASan), so it takes fewer steps; its size is what it adds, not more kinds of step.
  const int steps = cur_->rdma_devices_size() > 64 ? 8 : 24;
  for (int i = 0; i < steps; ++i) {
    const std::string dev = with_netdev[rng() % with_netdev.size()];
    const RdmaDevice* d = Dev(dev);
    if (d == nullptr && !stash_.count(dev)) continue;  // Gone with a broken tree's link.
    const std::string nd = d != nullptr ? d->ports(0).netdev() : "";
    ChangeScope s;
    std::string what;
    const uint32_t kind = rng() % 7;
    if (in_pod.count(dev) && kind != 6) continue;  // Only its way back.
    switch (kind) {
      case 0: {
        if (d == nullptr) continue;
        const int slot = 4 + static_cast<int>(rng() % 4);
        if (rng() % 2) {
          SetGid(dev, slot, absl::StrCat("10.77.", i, ".1"), nd);
        } else {
          ClearGid(dev, slot);
        }
        s.Netdev(nd);
        what = absl::StrCat("GID ", slot, " of ", dev);
        break;
      }
      case 1:
        s.Netdev("veth" + std::to_string(rng()));
        what = "pod veth";
        break;
      case 2:
        if (uppers.count(dev)) continue;  // Its macvlan's lower link would dangle.
        if (d == nullptr) {
          RestoreDevice(dev);
          what = "restore " + dev;
        } else {
          RemoveDevice(dev);
          what = "remove " + dev;
        }
        s.RdmaDevice(dev);
        break;
      case 3: {
        if (d == nullptr || !InTree(sys_ / "class/net" / nd)) continue;
        Write(sys_ / "class/net" / nd / "operstate", rng() % 2 ? "down\n" : "up\n");
        s.Netdev(nd);
        what = "operstate of " + nd;
        break;
      }
      case 4: {
        if (d == nullptr || uppers.count(dev) || !InTree(sys_ / "class/net" / nd)) continue;
        const std::string to = absl::StrCat("ren", renames++);
        RenameNetdev(nd, to);
        s.Netdev(nd);
        s.Netdev(to);
        what = absl::StrCat("rename ", nd, " to ", to);
        break;
      }
      case 6: {
        // Into a pod's network namespace and back: the netdev leaves the host's class/net.
        if (auto it = in_pod.find(dev); it != in_pod.end()) {
          const auto& [name, target, real] = it->second;
          fs::rename(dir_ / ("pod-" + name), real);
          fs::create_symlink(target, sys_ / "class/net" / name);
          s.Netdev(name);
          what = name + " back from a pod";
          in_pod.erase(it);
          break;
        }
        if (d == nullptr || nd.empty() || uppers.count(dev)) continue;
        const fs::path link = sys_ / "class/net" / nd;
        const std::optional<fs::path> real = InTree(link);
        if (!real) continue;
        in_pod[dev] = {nd, fs::read_symlink(link), *real};
        fs::rename(*real, dir_ / ("pod-" + nd));
        fs::remove(link);
        s.Netdev(nd);
        what = nd + " into a pod";
        break;
      }
      default: {
        if (d == nullptr) continue;
        if (auto it = uppers.find(dev); it != uppers.end()) {
          DelUpper(it->second, dev, 9);
          s.Netdev(it->second);
          what = "delete " + it->second;
          uppers.erase(it);
        } else {
          // Without gid_attrs (broken's mlx5_5, as in some containers) no GID entry names the
          // macvlan, so nothing in the inventory relates it to the port: its deletion is the
          // safety net's to find (README: changes no event announces).
          if (!InTree(sys_ / "class/net" / nd) || !fs::exists(Port(dev) / "gid_attrs/ndevs")) {
            continue;
          }
          const std::string name = absl::StrCat("mv", i);
          AddUpper(name, nd, dev, 9, absl::StrCat("10.78.", i, ".1"));
          s.Netdev(name);
          uppers[dev] = name;
          what = absl::StrCat("macvlan ", name, " on ", nd);
        }
      }
    }
    Step(absl::StrCat("step ", i, ": ", what), s);
  }
}

INSTANTIATE_TEST_SUITE_P(ExampleHosts, RandomizedRefreshTest,
                         ::testing::ValuesIn(testing::ExampleHostNames()),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           return testing::ExampleHostTestName(p.param);
                         });

}  // namespace
}  // namespace fabric
