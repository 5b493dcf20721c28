#include "agent/daemon/api/agent_metrics.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "absl/strings/match.h"

namespace fabric {
namespace {

// The stale-inventory samples follow the loop's counters: absent "since" while the inventory is
// good, present with the time while it is stale.
TEST(AgentMetrics, StaleInventory) {
  SnapshotStore store;
  auto snap = std::make_shared<Snapshot>();
  snap->generation = 3;
  snap->discovered_at = absl::FromUnixSeconds(1700000000);
  store.Publish(snap);
  HostFsImpl sysfs("/nonexistent-sysfs");
  AgentCounters counters;
  MetricsSources src;
  src.store = &store;
  src.sysfs = &sysfs;
  src.counters = &counters;
  const absl::Time now = absl::FromUnixSeconds(1700000100);

  std::string text = RenderAgentMetrics(src, now);
  EXPECT_TRUE(absl::StrContains(text, "\nfabric_agent_stale_scans_total 0\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, "\nfabric_inventory_stale 0\n")) << text;
  EXPECT_FALSE(absl::StrContains(text, "fabric_inventory_stale_since_timestamp_seconds")) << text;

  counters.stale_scans = 4;
  counters.stale_since_unix_ns = absl::ToUnixNanos(absl::FromUnixSeconds(1700000050));
  text = RenderAgentMetrics(src, now);
  EXPECT_TRUE(absl::StrContains(text, "\nfabric_agent_stale_scans_total 4\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, "\nfabric_inventory_stale 1\n")) << text;
  EXPECT_TRUE(
      absl::StrContains(text, "\nfabric_inventory_stale_since_timestamp_seconds 1700000050\n"))
      << text;
  EXPECT_TRUE(absl::StrContains(text, "\nfabric_inventory_generation 3\n")) << text;
}

}  // namespace
}  // namespace fabric
