#include "agent/inventory/changes/event_log.h"

#include <gtest/gtest.h>

namespace fabric {
namespace {

v1::InventoryChange Change(v1::InventoryChange::Kind kind, const std::string& subject,
                           const std::string& old_value = "", const std::string& new_value = "") {
  v1::InventoryChange c;
  c.set_kind(kind);
  c.set_subject(subject);
  c.set_old_value(old_value);
  c.set_new_value(new_value);
  return c;
}

v1::Host HostWith(const std::string& dev, const std::string& pci, int ports) {
  v1::Host h;
  v1::RdmaDevice* d = h.add_rdma_devices();
  d->set_name(dev);
  if (!pci.empty()) d->mutable_pci()->set_address(pci);
  for (int i = 1; i <= ports; ++i) d->add_ports()->set_number(static_cast<uint32_t>(i));
  return h;
}

const absl::Time kT0 = absl::FromUnixSeconds(1'800'000'000);

TEST(EventLog, CountsFlapsOnlyWhenAPortLeavesActive) {
  using K = v1::InventoryChange;
  struct Case {
    std::string old_state, new_state;
    uint64_t flaps;
  };
  const Case cases[] = {
      {"ACTIVE", "DOWN", 1},  {"ACTIVE", "INIT", 1},
      {"ACTIVE", "ARMED", 1}, {"DOWN", "ACTIVE", 0},
      {"INIT", "DOWN", 0},    {"ACTIVE", "", 0},  // port vanished with device
      {"", "ACTIVE", 0},      {"ACTIVE", "ACTIVE_DEFER", 1},
  };
  for (const Case& c : cases) {
    EventLog log;
    log.Record({}, {Change(K::KIND_PORT_STATE, "mlx5_1:1", c.old_state, c.new_state)}, kT0);
    uint64_t got = log.ports().count("mlx5_1:1") ? log.ports().at("mlx5_1:1").link_flaps : 0;
    EXPECT_EQ(got, c.flaps) << c.old_state << " -> " << c.new_state;
  }
}

TEST(EventLog, FlapsAndGidChangesAccumulateAndCountChanges) {
  using K = v1::InventoryChange;
  EventLog log;
  for (int i = 0; i < 3; ++i) {
    log.Record({}, {Change(K::KIND_PORT_STATE, "mlx5_1:1", "ACTIVE", "DOWN")},
               kT0 + absl::Minutes(i));
    log.Record({}, {Change(K::KIND_PORT_STATE, "mlx5_1:1", "DOWN", "ACTIVE")},
               kT0 + absl::Minutes(i) + absl::Seconds(5));
  }
  log.Record({}, {Change(K::KIND_GID_TABLE, "mlx5_2:1"), Change(K::KIND_GID_TABLE, "mlx5_2:1")},
             kT0);
  ASSERT_EQ(log.ports().size(), 2u);
  EXPECT_EQ(log.ports().at("mlx5_1:1").link_flaps, 3u);
  EXPECT_EQ(log.ports().at("mlx5_1:1").last_flap, kT0 + absl::Minutes(2));
  EXPECT_EQ(log.ports().at("mlx5_1:1").gid_changes, 0u);
  EXPECT_EQ(log.ports().at("mlx5_2:1").gid_changes, 2u);

  v1::InventoryChange state = Change(K::KIND_PORT_STATE, "mlx5_1:1", "ACTIVE", "DOWN");
  log.SetCount(&state);
  EXPECT_EQ(state.count(), 3u);
  v1::InventoryChange gid = Change(K::KIND_GID_TABLE, "mlx5_2:1");
  log.SetCount(&gid);
  EXPECT_EQ(gid.count(), 2u);
  v1::InventoryChange other = Change(K::KIND_NETDEV_ADDED, "mlx5_1:1");
  log.SetCount(&other);
  EXPECT_EQ(other.count(), 0u);
}

TEST(EventLog, RemovedDeviceIsAbsentUntilItReturnsOrTheWindowPasses) {
  using K = v1::InventoryChange;
  const v1::Host before = HostWith("mlx5_3", "0000:3b:00.0", 2);
  EventLog log;
  log.Record(before, {Change(K::KIND_DEVICE_REMOVED, "mlx5_3")}, kT0);
  ASSERT_EQ(log.absent().size(), 1u);
  const EventLog::Absent& a = log.absent().at("mlx5_3");
  EXPECT_EQ(a.pci_address, "0000:3b:00.0");
  EXPECT_EQ(a.ports, (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(a.since, kT0);

  v1::Inventory inv;
  log.Fill(kT0 + absl::Seconds(30), absl::Hours(1), &inv);
  ASSERT_EQ(inv.absent_devices_size(), 1);
  EXPECT_EQ(inv.absent_devices(0).name(), "mlx5_3");
  EXPECT_EQ(inv.absent_devices(0).since().seconds(), absl::ToUnixSeconds(kT0));
  EXPECT_EQ(inv.absent_devices(0).ports_size(), 2);

  // Back again: no longer absent.
  EventLog back = log;
  back.Record({}, {Change(K::KIND_DEVICE_ADDED, "mlx5_3")}, kT0 + absl::Minutes(1));
  EXPECT_TRUE(back.absent().empty());

  // Never back: reported for the window, then forgotten.
  v1::Inventory later;
  log.Fill(kT0 + absl::Hours(2), absl::Hours(1), &later);
  EXPECT_EQ(later.absent_devices_size(), 0);
  log.Expire(kT0 + absl::Hours(2), absl::Hours(1));
  EXPECT_TRUE(log.absent().empty());
  EXPECT_TRUE(log.empty());
}

TEST(EventLog, SoftwareDeviceHasNoPciAddress) {
  EventLog log;
  log.Record(HostWith("rxe0", "", 1), {Change(v1::InventoryChange::KIND_DEVICE_REMOVED, "rxe0")},
             kT0);
  ASSERT_EQ(log.absent().count("rxe0"), 1u);
  EXPECT_EQ(log.absent().at("rxe0").pci_address, "");
}

}  // namespace
}  // namespace fabric
