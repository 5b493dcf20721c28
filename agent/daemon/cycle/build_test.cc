// BuildSnapshot on every example host, through the steps the agent takes: the first inventory,
// the same host again, the agent's findings alone, a policy reload, a GID that is not chosen, a
// port going down. What it builds must equal what its parts compute from scratch (pairing,
// health, diff), and the first snapshot's pairing, rails, health and selection must print the
// bytes of its golden file (testdata/build_golden/<host>.txt; FABRIC_UPDATE_GOLDEN=1 rewrites).
#include "agent/daemon/cycle/build.h"

#include <google/protobuf/text_format.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "agent/daemon/api/watch.h"
#include "agent/inventory/changes/changes.h"
#include "agent/inventory/query/host_query.h"
#include "agent/policy/health/health.h"
#include "agent/policy/select/pairing.h"
#include "agent/policy/select/select.h"
#include "tests/hosts/discovered.h"
#include "tests/hosts/hosts.h"

namespace fabric {
namespace {

using google::protobuf::util::MessageDifferencer;

const absl::Time kT0 = absl::FromUnixSeconds(1800000000);

std::string Text(const google::protobuf::Message& m) {
  std::string out;
  google::protobuf::TextFormat::PrintToString(m, &out);
  return out;
}

v1::Finding AgentFinding(const std::string& message) {
  v1::Finding f;
  f.set_severity(v1::SEVERITY_WARNING);
  f.set_check("agent");
  f.set_message(message);
  return f;
}

class BuildTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    host_ = testing::DiscoveredExampleHost(GetParam());
    ASSERT_GT(host_.rdma_devices_size(), 0);
  }

  // A build of `host` (none: no new host) after `prev`, at kT0 + `step` seconds.
  Built Build(const Snapshot* prev, std::optional<v1::Host> host, const v1::SelectionPolicy& policy,
              bool policy_changed, std::vector<v1::Finding> findings, int step) {
    BuildInput in;
    if (host) in.host = ScannedHost(*std::move(host));
    in.policy = &policy;
    in.policy_changed = policy_changed;
    in.agent_findings = std::move(findings);
    in.start_host = start_;
    in.events = prev != nullptr ? prev->events : EventLog();
    in.now = kT0 + absl::Seconds(step);
    if (start_ == nullptr && in.host) start_ = in.host->host;
    return BuildSnapshot(prev, std::move(in));
  }

  // What the pieces say from scratch for `s`'s host and policy: the builder may keep a pairing or
  // health, but only where it equals this.
  void ExpectConsistent(const Snapshot& s, const std::vector<v1::Finding>& findings) {
    EXPECT_TRUE(MessageDifferencer::Equals(s.host->pairing(), PairGpus(*s.host, s.policy)))
        << "kept pairing differs from PairGpus";
    v1::Health want = EvaluateHealth(*s.host, s.policy);
    for (v1::Finding& f : GidChangeFindings(*start_, *s.host)) AddFinding(&want, std::move(f));
    EXPECT_TRUE(MessageDifferencer::Equals(s.host_health, want)) << Text(s.host_health);
    for (const v1::Finding& f : findings) AddFinding(&want, f);
    EXPECT_TRUE(MessageDifferencer::Equals(s.health, want));
  }

  // The watch event a stream that saw `prev` gets for `next` (the hub's byte cache, with and
  // without `prev`'s event cached) parses to the inventory and the built changes.
  void ExpectWatchEvent(const Snapshot* prev, const Snapshot& next) {
    // Copies that the cache may hold weakly; their hosts are the very objects built.
    auto p = std::make_shared<Snapshot>();
    p->generation = prev->generation;
    p->host = prev->host;
    auto n = std::make_shared<Snapshot>();
    n->generation = next.generation;
    n->discovered_at = next.discovered_at;
    n->host = next.host;
    n->changes_since = next.changes_since;
    n->changes = next.changes;
    v1::InventoryEvent want;
    FillInventory(*n, want.mutable_inventory());
    for (const v1::InventoryChange& c : next.changes) *want.add_changes() = c;
    WatchEventCache cache;
    for (bool prev_cached : {false, true}) {
      if (prev_cached) {
        ASSERT_NE(cache.Bytes(nullptr, p), nullptr);
      }
      WatchEventCache fresh;
      v1::InventoryEvent got;
      ASSERT_TRUE(got.ParseFromString(*(prev_cached ? cache : fresh).Bytes(p, n)));
      EXPECT_TRUE(MessageDifferencer::Equals(got, want)) << "prev cached: " << prev_cached;
    }
  }

  v1::Host host_;
  std::shared_ptr<const v1::Host> start_;
};

TEST_P(BuildTest, EveryStepEqualsItsPartsFromScratch) {
  v1::SelectionPolicy policy;
  // The first inventory.
  Built first = Build(nullptr, host_, policy, true, {}, 0);
  ASSERT_NE(first.snapshot, nullptr);
  const Snapshot& s1 = *first.snapshot;
  EXPECT_TRUE(first.host_changed);
  EXPECT_FALSE(first.labels_same);
  EXPECT_EQ(s1.generation, 1u);
  EXPECT_EQ(s1.discovered_at, kT0);
  EXPECT_TRUE(first.changes.empty());
  ExpectConsistent(s1, {});

  // The same host, findings and policy: nothing to publish.
  Built same = Build(&s1, host_, policy, false, {}, 1);
  EXPECT_EQ(same.snapshot, nullptr);
  EXPECT_FALSE(same.host_changed);
  EXPECT_TRUE(same.changes.empty());

  // Only the agent's findings: the very same host and host health, the finding in health.
  const std::vector<v1::Finding> findings = {AgentFinding("route netlink events unavailable")};
  Built agent = Build(&s1, std::nullopt, policy, false, findings, 2);
  ASSERT_NE(agent.snapshot, nullptr);
  EXPECT_EQ(agent.snapshot->host, s1.host);
  EXPECT_EQ(agent.snapshot->generation, 1u);
  EXPECT_TRUE(agent.labels_same);
  EXPECT_EQ(agent.snapshot->agent_findings_key, FindingsKey(findings));
  ExpectConsistent(*agent.snapshot, findings);

  // A policy reload that denies the first backend port's device: same generation, new pairing.
  v1::SelectionPolicy deny;
  const std::vector<BackendPort> backend = BackendPorts(*s1.host, policy);
  if (!backend.empty()) deny.add_deny(backend.front().device->name());
  Built reload = Build(agent.snapshot.get(), std::nullopt, deny, true, findings, 3);
  ASSERT_NE(reload.snapshot, nullptr);
  EXPECT_EQ(reload.snapshot->generation, 1u);
  EXPECT_NE(reload.snapshot->host, s1.host);
  EXPECT_FALSE(reload.labels_same);
  ExpectConsistent(*reload.snapshot, findings);

  // The last GID of the port with the most: a new generation whose diff is DiffHosts', and the
  // pairing kept or computed, equal to PairGpus either way.
  v1::Host gid = *reload.snapshot->host;
  v1::Port* most = nullptr;
  for (v1::RdmaDevice& d : *gid.mutable_rdma_devices()) {
    for (v1::Port& p : *d.mutable_ports()) {
      if (most == nullptr || p.gids_size() > most->gids_size()) most = &p;
    }
  }
  ASSERT_NE(most, nullptr);
  if (most->gids_size() > 0) most->mutable_gids()->RemoveLast();
  Built gids = Build(reload.snapshot.get(), gid, deny, false, findings, 4);
  const std::vector<v1::InventoryChange> want_gid_changes = DiffHosts(*reload.snapshot->host, gid);
  EXPECT_EQ(gids.host_changed, !want_gid_changes.empty());
  ASSERT_EQ(gids.changes.size(), want_gid_changes.size());
  for (size_t i = 0; i < gids.changes.size(); ++i) {
    EXPECT_TRUE(MessageDifferencer::Equals(gids.changes[i], want_gid_changes[i]));
  }
  const Snapshot* last = reload.snapshot.get();
  if (gids.snapshot != nullptr) {
    EXPECT_EQ(gids.snapshot->generation, 2u);
    EXPECT_EQ(gids.snapshot->changes_since, 1u);
    ExpectConsistent(*gids.snapshot, findings);
    last = gids.snapshot.get();
  }

  // The first ACTIVE port goes down: a flap in the event log, and health evaluated again.
  v1::Host down = *last->host;
  std::string port_name;
  for (v1::RdmaDevice& d : *down.mutable_rdma_devices()) {
    for (v1::Port& p : *d.mutable_ports()) {
      if (port_name.empty() && p.state() == v1::PORT_STATE_ACTIVE) {
        p.set_state(v1::PORT_STATE_DOWN);
        port_name = absl::StrCat(d.name(), ":", p.number());
      }
    }
  }
  if (port_name.empty()) return;  // No ACTIVE port on this host (none is, on "broken"'s VFs).
  Built flap = Build(last, down, deny, false, findings, 5);
  ASSERT_NE(flap.snapshot, nullptr);
  ExpectWatchEvent(last, *flap.snapshot);
  EXPECT_EQ(flap.snapshot->generation, last->generation + 1);
  EXPECT_FALSE(flap.labels_same);
  EXPECT_FALSE(flap.snapshot->events.empty()) << port_name << " went down: no event recorded";
  EXPECT_FALSE(flap.events.empty());
  ExpectConsistent(*flap.snapshot, findings);
}

// The first snapshot's pairing, rails, health and selection of every collective GPU, as text.
std::string Golden(const Snapshot& s) {
  std::ostringstream out;
  out << "# generation " << s.generation << "\n# pairing\n" << Text(s.host->pairing());
  out << "# rails\n";
  for (const v1::Netdev& n : s.host->netdevs()) {
    if (n.has_neighbor()) out << n.name() << " " << n.neighbor().rail() << "\n";
  }
  out << "# health\n" << Text(s.health);
  const std::vector<std::string> gpus = CollectiveGpus(*s.host);
  auto sel = SelectNics(*s.host, gpus, s.policy);
  // As the API answers by default: without the ports each GPU did not get.
  if (sel.ok()) {
    for (v1::GpuAssignment& a : *sel->mutable_assignments()) a.clear_rejected();
  }
  out << "# select --gpus=all\n" << (sel.ok() ? Text(*sel) : sel.status().ToString() + "\n");
  return out.str();
}

TEST_P(BuildTest, FirstSnapshotPrintsItsGoldenBytes) {
  const v1::SelectionPolicy policy;  // The default, as with no config file.
  Built first = Build(nullptr, host_, policy, true, {AgentFinding("ib: no umad")}, 0);
  ASSERT_NE(first.snapshot, nullptr);
  const std::string got = Golden(*first.snapshot);
  EXPECT_EQ(got, Golden(*first.snapshot)) << "two renderings differ";
  const std::filesystem::path file = std::filesystem::path(FABRIC_SOURCE_DIR) /
                                     "agent/daemon/cycle/testdata/build_golden" /
                                     (GetParam() + ".txt");
  if (std::getenv("FABRIC_UPDATE_GOLDEN") != nullptr) {
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file) << got;
    return;
  }
  std::ifstream in(file);
  ASSERT_TRUE(in.good()) << file << " is missing: run scripts/regen-golden.sh";
  std::stringstream want;
  want << in.rdbuf();
  EXPECT_EQ(got, want.str()) << "BuildSnapshot on " << GetParam()
                             << " differs from its golden file; if meant, run "
                                "scripts/regen-golden.sh and review the diff";
}

INSTANTIATE_TEST_SUITE_P(ExampleHosts, BuildTest, ::testing::ValuesIn(testing::ExampleHostNames()),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           return testing::ExampleHostTestName(p.param);
                         });

}  // namespace
}  // namespace fabric
