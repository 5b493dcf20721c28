#include "agent/daemon/watch.h"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include "agent/inventory/changes/changes.h"

namespace fabric {
namespace {

// The event's bytes are built without copying the host; they must parse to what the typed
// message would say.
TEST(WatchEventBytes, ParsesToTheInventoryAndTheChanges) {
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
  Snapshot after;
  auto next = std::make_shared<v1::Host>(*host);
  next->mutable_rdma_devices(0)->mutable_ports(0)->set_state(v1::PORT_STATE_DOWN);
  after.host = next;
  after.generation = 5;
  after.discovered_at = absl::FromUnixSeconds(1700000000);

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
    v1::InventoryEvent got;
    ASSERT_TRUE(got.ParseFromString(WatchEventBytes(before.get(), after)));
    // The event log's fill depends on the time of the call: compare what does not.
    got.mutable_inventory()->clear_port_events();
    want.mutable_inventory()->clear_port_events();
    std::string report;
    google::protobuf::util::MessageDifferencer diff;
    diff.ReportDifferencesToString(&report);
    EXPECT_TRUE(diff.Compare(want, got)) << report;
  }
  // A stream that has seen nothing gets the inventory alone.
  v1::InventoryEvent first;
  ASSERT_TRUE(first.ParseFromString(WatchEventBytes(nullptr, after)));
  EXPECT_EQ(first.changes_size(), 0);
  EXPECT_EQ(first.inventory().host().hostname(), "node-1");
}

}  // namespace
}  // namespace fabric
