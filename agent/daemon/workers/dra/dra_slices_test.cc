// The DRA driver's slices against the tests' API server (which refuses any object the real
// resource.k8s.io/v1 would): what is written for a host, that an unrelated change writes nothing,
// health as taints in a new generation, vanished devices, stale slices removed, 409 storms, an
// unreachable server as a finding that clears.
#include "agent/daemon/workers/dra/dra_slices.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "agent/publish/dra/slice_json.h"
#include "tests/dra/fake_apiserver.h"
#include "tests/hosts/discovered.h"
#include "tests/testing/subprocess.h"

namespace fabric {
namespace {

using testing::FakeApiServer;
using ::testing::HasSubstr;
using ::testing::SizeIs;

class DraSlicesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = FakeApiServer::Start();
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
  }

  std::unique_ptr<DraSlices> Start(DraSlicesOptions o = {}) {
    auto api = kubeapi::KubeApiImpl::Create(server_->Config());
    EXPECT_TRUE(api.ok()) << api.status();
    o.node = "node-a";
    o.min_backoff = absl::Milliseconds(20);
    o.max_backoff = absl::Milliseconds(200);
    auto d = DraSlices::Start(*std::move(api), o);
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? *std::move(d) : nullptr;
  }

  static void Publish(DraSlices* d, const v1::Host& host, const v1::Health& health = {}) {
    Snapshot s;
    s.host = std::make_shared<const v1::Host>(host);
    s.health = health;
    Built b;
    d->Publish(Publication{s, nullptr, b, absl::Now()});
  }

  nlohmann::json Slices() {
    auto st = server_->State();
    EXPECT_TRUE(st.ok()) << st.status();
    return st.ok() ? (*st)["slices"] : nlohmann::json();
  }

  std::unique_ptr<FakeApiServer> server_;
};

TEST_F(DraSlicesTest, WritesTheHostOnceAndNothingForAnUnrelatedChange) {
  auto d = Start();
  const v1::Host& host = testing::DiscoveredExampleHost("sriov-512vf");
  Publish(d.get(), host);
  ASSERT_TRUE(d->WaitSynced(absl::Seconds(60)));
  nlohmann::json slices = Slices();
  ASSERT_EQ(slices.size(), 9u);
  size_t devices = 0;
  for (const auto& [name, s] : slices.items()) {
    EXPECT_EQ(s["spec"]["pool"]["generation"], 1) << name;
    EXPECT_EQ(s["spec"]["pool"]["resourceSliceCount"], 9) << name;
    EXPECT_EQ(s["spec"]["nodeName"], "node-a");
    EXPECT_EQ(s["metadata"]["ownerReferences"][0]["kind"], "Node");
    devices += s["spec"]["devices"].size();
  }
  EXPECT_EQ(devices, 520u);
  const DraSlices::Stats first = d->stats();
  EXPECT_EQ(first.writes, 10u);  // Nine slices and the node's condition.
  EXPECT_EQ(first.generation, 1);

  // The same devices from another snapshot (a counter, an address moved): nothing written.
  v1::Host other = host;
  other.set_kernel_release("6.1.0-99-amd64");
  Publish(d.get(), other);
  ASSERT_TRUE(d->WaitSynced(absl::Seconds(30)));
  EXPECT_EQ(d->stats().writes, first.writes);

  // A new agent over what the old one wrote: it reads, finds the slices current, writes nothing.
  d.reset();
  auto again = Start();
  Publish(again.get(), host);
  ASSERT_TRUE(again->WaitSynced(absl::Seconds(60)));
  EXPECT_EQ(again->stats().writes, 1u);  // Only its own view of the node's condition.
  EXPECT_EQ(again->stats().generation, 1);
}

TEST_F(DraSlicesTest, HealthTaintsInANewGenerationAndTheConditionSaysSo) {
  auto d = Start();
  const v1::Host& host = testing::DiscoveredExampleHost("roce-9port");
  Publish(d.get(), host);
  ASSERT_TRUE(d->WaitSynced(absl::Seconds(30)));
  v1::Health health;
  health.set_verdict(v1::SEVERITY_CRITICAL);
  v1::Finding* f = health.add_findings();
  f->set_severity(v1::SEVERITY_CRITICAL);
  f->set_check("port_state");
  f->set_code("port_state.down");
  f->set_subject("mlx5_2:1");
  f->set_message("port DOWN");
  Publish(d.get(), host, health);
  ASSERT_TRUE(d->WaitSynced(absl::Seconds(30)));
  nlohmann::json slices = Slices();
  ASSERT_EQ(slices.size(), 1u);
  const nlohmann::json& s = slices.begin().value();
  EXPECT_EQ(s["spec"]["pool"]["generation"], 2);
  bool tainted = false;
  for (const auto& dev : s["spec"]["devices"]) {
    if (dev["name"] != "mlx5-2") {
      EXPECT_FALSE(dev.contains("taints")) << dev["name"];
      continue;
    }
    ASSERT_EQ(dev["taints"].size(), 1u);
    EXPECT_EQ(dev["taints"][0]["key"], "rdma.fabric.io/port_state");
    EXPECT_EQ(dev["taints"][0]["value"], "down");
    EXPECT_EQ(dev["taints"][0]["effect"], "NoSchedule");
    tainted = true;
  }
  EXPECT_TRUE(tainted);
  auto st = server_->State();
  ASSERT_TRUE(st.ok());
  const nlohmann::json& conds = (*st)["nodes"]["node-a"]["status"]["conditions"];
  ASSERT_EQ(conds.size(), 1u);
  EXPECT_EQ(conds[0]["type"], "FabricHealthy");
  EXPECT_EQ(conds[0]["status"], "False");
  EXPECT_EQ(conds[0]["reason"], "FabricCritical");
  EXPECT_THAT(conds[0]["message"].get<std::string>(), HasSubstr("port_state.down"));
}

TEST_F(DraSlicesTest, VanishedDevicesStayTaintedAndStaleSlicesGo) {
  // An earlier run's slice under a name this one does not use.
  auto api = kubeapi::KubeApiImpl::Create(server_->Config());
  ASSERT_TRUE(api.ok());
  dra::SliceMeta stale{"node-a", "", 1, 1, 0, ""};
  std::string body = dra::SliceJson(stale, {});
  body.replace(body.find("node-a-rdma.fabric.io-0"), 23, "node-a-rdma.fabric.io-7");
  auto created = (*api)->Call({"POST", "/apis/resource.k8s.io/v1/resourceslices", body});
  ASSERT_TRUE(created.ok());
  ASSERT_EQ(created->code, 201) << created->body;

  auto d = Start();
  const v1::Host& host = testing::DiscoveredExampleHost("roce-9port");
  Publish(d.get(), host);
  ASSERT_TRUE(d->WaitSynced(absl::Seconds(30)));
  nlohmann::json slices = Slices();
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_TRUE(slices.contains("node-a-rdma.fabric.io-0"));

  v1::Host fewer = host;
  fewer.mutable_rdma_devices()->erase(fewer.mutable_rdma_devices()->begin() + 4);
  Publish(d.get(), fewer);
  ASSERT_TRUE(d->WaitSynced(absl::Seconds(30)));
  slices = Slices();
  const nlohmann::json& devices = slices["node-a-rdma.fabric.io-0"]["spec"]["devices"];
  ASSERT_EQ(devices.size(), 9u);
  EXPECT_EQ(devices[4]["name"], "mlx5-4");
  EXPECT_EQ(devices[4]["taints"][0]["key"], "rdma.fabric.io/device_missing");
}

TEST_F(DraSlicesTest, ConflictStormsAreReadAgainAndWon) {
  auto d = Start();
  const v1::Host& host = testing::DiscoveredExampleHost("roce-9port");
  Publish(d.get(), host);
  ASSERT_TRUE(d->WaitSynced(absl::Seconds(30)));
  ASSERT_TRUE(server_
                  ->Faults({{{"method", "PUT"},
                             {"path", "/apis/resource.k8s.io/v1/resourceslices/"},
                             {"mode", "409"},
                             {"count", 3}}})
                  .ok());
  v1::Health health;
  v1::Finding* f = health.add_findings();
  f->set_severity(v1::SEVERITY_WARNING);
  f->set_check("counter");
  f->set_code("counter.symbol_error");
  f->set_subject("mlx5_1:1");
  Publish(d.get(), host, health);
  ASSERT_TRUE(d->WaitSynced(absl::Seconds(30)));
  EXPECT_EQ(d->stats().conflicts, 3u);
  const nlohmann::json slices = Slices();
  EXPECT_EQ(slices["node-a-rdma.fabric.io-0"]["spec"]["devices"][1]["taints"][0]["effect"], "None");
}

TEST_F(DraSlicesTest, AnUnreachableServerIsAFindingThatClears) {
  auto d = Start();
  ASSERT_TRUE(server_
                  ->Faults({{{"method", "GET"},
                             {"path", "/apis/resource.k8s.io/v1/resourceslices"},
                             {"mode", "500"},
                             {"count", 2}},
                            {{"method", "GET"},
                             {"path", "/apis/resource.k8s.io/v1/resourceslices"},
                             {"mode", "close"},
                             {"count", 2}}})
                  .ok());
  Publish(d.get(), testing::DiscoveredExampleHost("roce-9port"));
  bool seen = false;
  for (int i = 0; i < 200 && !seen; ++i) {
    std::vector<v1::Finding> findings;
    d->Findings(absl::Now(), &findings);
    seen = !findings.empty() && findings[0].code() == "dra.api_unreachable";
    if (!seen) absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_TRUE(seen);
  ASSERT_TRUE(d->WaitSynced(absl::Seconds(30)));
  std::vector<v1::Finding> findings;
  d->Findings(absl::Now(), &findings);
  EXPECT_THAT(findings, SizeIs(0));
  // Two 500s and the closes: libcurl sends a request again once on a fresh connection when a
  // reused one closed before answering, so the two closes may fail one sync or two.
  EXPECT_GE(d->stats().failures, 3u);
  EXPECT_EQ(Slices().size(), 1u);
}

// An expired token (the server takes another now): a finding that says so, cleared once the
// kubelet's rotation reaches the agent's file.
TEST_F(DraSlicesTest, AnExpiredTokenIsUnauthorizedUntilRotated) {
  server_->SetServerToken("rotated");
  auto d = Start();
  Publish(d.get(), testing::DiscoveredExampleHost("roce-9port"));
  std::vector<v1::Finding> findings;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        findings.clear();
        d->Findings(absl::Now(), &findings);
        return !findings.empty();
      },
      absl::Seconds(10)));
  EXPECT_EQ(findings[0].code(), "dra.unauthorized");
  EXPECT_THAT(findings[0].message(), HasSubstr("401"));
  server_->SetClientToken("rotated");
  ASSERT_TRUE(d->WaitSynced(absl::Seconds(30)));
  findings.clear();
  d->Findings(absl::Now(), &findings);
  EXPECT_THAT(findings, SizeIs(0));
}

TEST(DraSlices, ANodeNameThatIsNotOneIsRefused) {
  DraSlicesOptions o;
  o.node = "Node_A";
  EXPECT_FALSE(DraSlices::Start(nullptr, o).ok());
}

}  // namespace
}  // namespace fabric
