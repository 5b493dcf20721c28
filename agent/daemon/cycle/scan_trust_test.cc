#include "agent/daemon/cycle/scan_trust.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace fabric {
namespace {

using v1::FieldProblem;
using v1::Host;

FieldProblem Problem(const std::string& field, const std::string& path, bool transient,
                     const std::string& reason = "x") {
  FieldProblem p;
  p.set_field(field);
  p.set_path(path);
  p.set_reason(reason);
  p.set_transient(transient);
  return p;
}

// A host with one device, one port, one netdev and one accelerator, so that problems can sit at
// every level ForEachProblem visits.
Host WithProblems(const std::vector<std::pair<std::string, FieldProblem>>& where) {
  Host h;
  h.add_rdma_devices()->set_name("mlx5_0");
  h.mutable_rdma_devices(0)->add_ports()->set_number(1);
  h.add_netdevs()->set_name("eth0");
  h.add_accelerators()->set_pci_address("0000:1a:00.0");
  for (const auto& [at, p] : where) {
    if (at == "host") *h.add_problems() = p;
    if (at == "device") *h.mutable_rdma_devices(0)->add_problems() = p;
    if (at == "pci") *h.mutable_rdma_devices(0)->mutable_pci()->add_problems() = p;
    if (at == "port") *h.mutable_rdma_devices(0)->mutable_ports(0)->add_problems() = p;
    if (at == "netdev") *h.mutable_netdevs(0)->add_problems() = p;
    if (at == "accelerator") *h.mutable_accelerators(0)->mutable_pci()->add_problems() = p;
  }
  return h;
}

TEST(JudgeScan, Table) {
  const FieldProblem emfile = Problem("rdma_devices", "class/infiniband", true);
  const FieldProblem gid_eacces = Problem("gids", "class/infiniband/mlx5_0/ports/1/gids/3", true);
  const FieldProblem parse = Problem("state", "class/infiniband/mlx5_0/ports/1/state", false);
  struct Case {
    const char* name;
    std::vector<std::pair<std::string, FieldProblem>> published, scan;
    bool trusted;
    size_t new_transient;
  } cases[] = {
      {"clean scan", {}, {}, true, 0},
      {"only ordinary problems", {}, {{"port", parse}}, true, 0},
      {"a new transient problem", {}, {{"host", emfile}}, false, 1},
      {"the same transient problem as published", {{"host", emfile}}, {{"host", emfile}}, true, 0},
      {"known path, other reason",
       {{"port", gid_eacces}},
       {{"port", Problem(gid_eacces.field(), gid_eacces.path(), true, "Input/output error")}},
       true,
       0},
      {"same path, other field",
       {{"host", Problem("accelerators", emfile.path(), true)}},
       {{"host", emfile}},
       false,
       1},
      {"published had it as an ordinary problem",
       {{"port", parse}},
       {{"port", Problem(parse.field(), parse.path(), true)}},
       true,
       0},
      {"a transient problem gone is fine", {{"host", emfile}}, {}, true, 0},
      {"one known, one new",
       {{"port", gid_eacces}},
       {{"port", gid_eacces}, {"netdev", Problem("mtu", "class/net/eth0/mtu", true)}},
       false,
       1},
      {"on a device", {}, {{"device", Problem("fw_ver", "a/fw_ver", true)}}, false, 1},
      {"on a PCI function", {}, {{"pci", Problem("vendor_id", "a/vendor", true)}}, false, 1},
      {"on an accelerator",
       {},
       {{"accelerator", Problem("class_code", "b/class", true)}},
       false,
       1},
  };
  for (const Case& c : cases) {
    const ScanTrust t = JudgeScan(WithProblems(c.published), WithProblems(c.scan));
    EXPECT_EQ(t.trusted, c.trusted) << c.name;
    EXPECT_EQ(t.new_transient.size(), c.new_transient) << c.name;
  }
}

// A device that is gone (its directory vanished: no problem at all, just fewer devices) is a
// trusted scan: removal on evidence is published.
TEST(JudgeScan, FewerDevicesWithoutProblemsIsTrusted) {
  Host published = WithProblems({});
  published.add_rdma_devices()->set_name("mlx5_1");
  EXPECT_TRUE(JudgeScan(published, WithProblems({})).trusted);
}

TEST(StaleRetryDelay, DoublesFromHalfASecondUpToThirtySeconds) {
  const absl::Duration minutes = absl::Minutes(5);
  const absl::Duration want[] = {absl::Milliseconds(500), absl::Seconds(1), absl::Seconds(2),
                                 absl::Seconds(4),        absl::Seconds(8), absl::Seconds(16),
                                 absl::Seconds(30),       absl::Seconds(30)};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(StaleRetryDelay(i + 1, minutes), want[i]) << i + 1;
  // Bounded however long it lasts (no overflow), and never later than the periodic rescan.
  EXPECT_EQ(StaleRetryDelay(1000000, minutes), absl::Seconds(30));
  EXPECT_EQ(StaleRetryDelay(0, minutes), absl::Milliseconds(500));
  EXPECT_EQ(StaleRetryDelay(5, absl::Seconds(3)), absl::Seconds(3));
  EXPECT_EQ(StaleRetryDelay(1, absl::Milliseconds(100)), absl::Milliseconds(100));
}

TEST(StaleFinding, NamesTheTimeTheFirstReadAndTheCount) {
  ScanTrust t;
  t.trusted = false;
  t.new_transient.push_back(Problem("rdma_devices", "class/infiniband", true,
                                    "opendir /s/class/infiniband: Permission denied"));
  const absl::Time since = absl::FromUnixSeconds(1700000000);
  v1::Finding f = StaleFinding(since, t);
  EXPECT_EQ(f.check(), "inventory_stale");
  EXPECT_EQ(f.severity(), v1::SEVERITY_WARNING);
  EXPECT_EQ(f.subject(), "");
  EXPECT_EQ(f.message(),
            "inventory stale since 2023-11-14T22:13:20+00:00: class/infiniband: opendir "
            "/s/class/infiniband: Permission denied (1 failed read); serving the last good "
            "inventory");
  t.new_transient.push_back(Problem("mtu", "class/net/eth0/mtu", true));
  EXPECT_NE(StaleFinding(since, t).message().find("(2 failed reads)"), std::string::npos);
}

}  // namespace
}  // namespace fabric
