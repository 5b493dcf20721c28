#include "agent/daemon/api/watch.h"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "agent/inventory/changes/changes.h"
#include "tests/hosts/discovered.h"

namespace fabric {
namespace {

// `bytes` parse to `want`, but for the event log's fill, which depends on the time of the call.
void ExpectEvent(const std::string& bytes, v1::InventoryEvent want) {
  v1::InventoryEvent got;
  ASSERT_TRUE(got.ParseFromString(bytes));
  got.mutable_inventory()->clear_port_events();
  want.mutable_inventory()->clear_port_events();
  std::string report;
  google::protobuf::util::MessageDifferencer diff;
  diff.ReportDifferencesToString(&report);
  EXPECT_TRUE(diff.Compare(want, got)) << report;
}

// The event's bytes are built without copying the host; they must parse to what the typed
// message would say.
TEST(WatchEventCache, ParsesToTheInventoryAndTheChanges) {
  auto before = std::make_shared<Snapshot>();
  before->generation = 4;
  auto host = std::make_shared<v1::Host>();
  host->set_hostname("node-1");
  v1::RdmaDevice* d = host->add_rdma_devices();
  d->set_name("mlx5_0");
  v1::Port* p = d->add_ports();
  p->set_number(1);
  p->set_state(v1::PORT_STATE_ACTIVE);
  before->host = host;
  auto after_ptr = std::make_shared<Snapshot>();
  Snapshot& after = *after_ptr;
  auto next = std::make_shared<v1::Host>(*host);
  next->mutable_rdma_devices(0)->mutable_ports(0)->set_state(v1::PORT_STATE_DOWN);
  after.host = next;
  after.generation = 5;
  after.discovered_at = absl::FromUnixSeconds(1700000000);
  WatchEventCache cache;

  v1::InventoryEvent want;
  FillInventory(after, want.mutable_inventory());
  for (const v1::InventoryChange& c : DiffHosts(*before->host, *after.host)) {
    *want.add_changes() = c;
  }
  ASSERT_EQ(want.changes_size(), 1);
  for (bool published_diff : {false, true}) {
    if (published_diff) {
      after.changes_since = 4;
      after.changes = DiffHosts(*before->host, *after.host);
    }
    ExpectEvent(*cache.Bytes(before, after_ptr), want);
  }
  // A stream that has seen nothing gets the inventory alone.
  v1::InventoryEvent first;
  ASSERT_TRUE(first.ParseFromString(*cache.Bytes(nullptr, after_ptr)));
  EXPECT_EQ(first.changes_size(), 0);
  EXPECT_EQ(first.inventory().host().hostname(), "node-1");
}

// A host that is `base` but for device `name` (a copy with its first port DOWN) and its netdevs
// (copies, down): the other devices, netdevs and topology pairs are the very objects of `base`,
// on an arena, as a targeted refresh builds it. "-name" drops the device and its netdevs instead;
// "+name" keeps it and adds a copy named "<name>b" after it.
std::shared_ptr<const v1::Host> SharedWith(std::shared_ptr<const v1::Host> base, std::string name) {
  const char op = name[0] == '-' || name[0] == '+' ? name[0] : ' ';
  if (op != ' ') name = name.substr(1);
  struct Owner {
    google::protobuf::Arena arena;
    std::shared_ptr<const v1::Host> base;
  };
  auto owner = std::make_shared<Owner>();
  owner->base = base;
  v1::Host* h = google::protobuf::Arena::CreateMessage<v1::Host>(&owner->arena);
  *h = *base;
  h->clear_rdma_devices();
  h->clear_topology();
  auto share = [](const auto& m, auto* field) {
    field->UnsafeArenaAddAllocated(const_cast<std::remove_cvref_t<decltype(m)>*>(&m));
  };
  for (const v1::RdmaDevice& d : base->rdma_devices()) {
    if (d.name() != name || op == '+') share(d, h->mutable_rdma_devices());
    if (d.name() != name || op == '-') continue;
    v1::RdmaDevice* copy = h->add_rdma_devices();
    *copy = d;
    if (op == '+') {
      copy->set_name(name + "b");
    } else {
      copy->mutable_ports(0)->set_state(v1::PORT_STATE_DOWN);
    }
  }
  h->clear_netdevs();
  for (const v1::Netdev& n : base->netdevs()) {
    if (n.rdma_device() != name || op == '+') {
      share(n, h->mutable_netdevs());
    } else if (op == ' ') {
      v1::Netdev* copy = h->add_netdevs();
      *copy = n;
      copy->set_operstate("down");
    }
  }
  for (const v1::TopologyPair& p : base->topology()) share(p, h->mutable_topology());
  return std::shared_ptr<const v1::Host>(owner, h);
}

// Events between hosts that share devices reuse the bytes of the shared ones: they must parse
// to exactly what the typed message says, whichever snapshot a stream saw last.
TEST(WatchEventCache, SharedDevicesGiveTheSameEvent) {
  auto first = std::make_shared<v1::Host>(testing::DiscoveredExampleHost("roce-9port"));
  first->mutable_pairing()->add_pairs()->set_gpu("0000:1a:00.0");  // Every field of Host set.
  ASSERT_GT(first->topology_size(), 0);
  ASSERT_TRUE(first->has_gpudirect());
  std::vector<std::shared_ptr<Snapshot>> snaps;
  std::shared_ptr<const v1::Host> host = first;
  // Replaced, dropped and added devices, alone and side by side: the event copies the runs
  // around them.
  const std::vector<std::vector<std::string>> steps = {{},
                                                       {"mlx5_2"},
                                                       {"mlx5_3"},
                                                       {"mlx5_2"},
                                                       {"-mlx5_4"},
                                                       {"+mlx5_0"},
                                                       {"+mlx5_6"},
                                                       {"-mlx5_1", "-mlx5_2"},
                                                       {"mlx5_6", "mlx5_7"},
                                                       {"mlx5_5", "+mlx5_3"}};
  for (const std::vector<std::string>& step : steps) {
    auto s = std::make_shared<Snapshot>();
    for (const std::string& dev : step) host = SharedWith(host, dev);
    s->host = host;
    s->generation = snaps.size() + 1;
    snaps.push_back(s);
  }
  WatchEventCache cache;
  auto check = [&cache](const std::shared_ptr<Snapshot>& last,
                        const std::shared_ptr<Snapshot>& next) {
    v1::InventoryEvent want;
    FillInventory(*next, want.mutable_inventory());
    if (last != nullptr) {
      for (const v1::InventoryChange& c : DiffHosts(*last->host, *next->host)) {
        *want.add_changes() = c;
      }
    }
    ExpectEvent(*cache.Bytes(last, next), want);
  };
  check(nullptr, snaps[0]);
  for (size_t i = 1; i < snaps.size(); ++i) {
    SCOPED_TRACE(i);
    check(snaps[i - 1], snaps[i]);
    check(snaps[0], snaps[i]);  // A stream that skipped some.
    const auto& h = *snaps[i]->host;
    EXPECT_EQ(cache.ObjectsOf(*snaps[i]),
              static_cast<size_t>(h.rdma_devices_size() + h.netdevs_size() + h.topology_size()));
  }
  // Bounded: the first snapshot's event went out with the fifth newer one.
  EXPECT_EQ(cache.ObjectsOf(*snaps[0]), 0u);
}

// The cache holds its snapshots weakly: one nobody else holds is freed, its entry with it.
TEST(WatchEventCache, KeepsNoSnapshotAlive) {
  auto s = std::make_shared<Snapshot>();
  s->host = std::make_shared<v1::Host>(testing::DiscoveredExampleHost("roce-9port"));
  s->generation = 1;
  WatchEventCache cache;
  ASSERT_NE(cache.Bytes(nullptr, s), nullptr);
  EXPECT_GT(cache.ObjectsOf(*s), 0u);
  std::weak_ptr<const Snapshot> weak = s;
  s.reset();
  EXPECT_TRUE(weak.expired());
  // A new snapshot, perhaps at the freed one's address, is not taken for it: serialized whole.
  auto t = std::make_shared<Snapshot>();
  t->host = std::make_shared<v1::Host>(testing::DiscoveredExampleHost("roce-9port"));
  t->generation = 2;
  v1::InventoryEvent want;
  FillInventory(*t, want.mutable_inventory());
  ExpectEvent(*cache.Bytes(nullptr, t), want);
}

}  // namespace
}  // namespace fabric
