// The CDI publisher in a real inventory cycle on the roce-9port example host: the spec written
// with the first inventory, not again for rescans or reloads that leave it as it was, again when
// a port it uses goes down; a directory that cannot take it (missing, full) is a WARNING finding
// in the agent's health, with the path and the errno's text, while the old spec stays, cleared
// by the first rescan after the fault is gone.
#include "agent/daemon/cycle/cdi_publisher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "agent/daemon/cycle/inventory_cycle.h"
#include "agent/hostfs/host_fs.h"
#include "tests/hosts/hosts.h"
#include "tests/testing/small_fs.h"
#include "tests/testing/subprocess.h"

namespace fabric {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string Slurp(const std::string& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class CdiPublisherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = testing::MakeTempDir("cdi-cycle");
    ASSERT_FALSE(tmpl.empty());
    base_ = tmpl;
    ASSERT_TRUE(testing::WriteExampleHost("roce-9port", base_ + "/host").ok());
    sys_ = std::make_unique<HostFsImpl>(base_ + "/host/sys");
    proc_ = std::make_unique<HostFsImpl>(base_ + "/host/proc");
  }
  void TearDown() override { fs::remove_all(base_); }

  // A cycle over the example host with `pub` as its publisher; First() run.
  std::unique_ptr<InventoryCycle> Cycle(CdiPublisher* pub) {
    auto cycle =
        std::make_unique<InventoryCycle>(sys_.get(), proc_.get(), CycleOptions{}, &counters_);
    cycle->AddPublisher(pub);
    EXPECT_TRUE(cycle->First().ok());
    return cycle;
  }

  // The agent's "cdi" findings now served.
  static std::vector<v1::Finding> CdiFindings(const InventoryCycle& c) {
    std::vector<v1::Finding> out;
    for (const v1::Finding& f : c.store().Current()->health.findings()) {
      if (f.check() == "cdi") out.push_back(f);
    }
    return out;
  }

  void PortDown(const std::string& dev) {
    std::ofstream(base_ + "/host/sys/class/infiniband/" + dev + "/ports/1/state") << "1: DOWN\n";
  }

  std::string base_;
  std::unique_ptr<HostFsImpl> sys_, proc_;
  AgentCounters counters_;
};

TEST_F(CdiPublisherTest, WritesOnlyWhenTheSpecChanges) {
  fs::create_directories(base_ + "/cdi");
  CdiPublisher pub(base_ + "/cdi", {});
  auto cycle = Cycle(&pub);
  EXPECT_EQ(pub.writes(), 1u);
  const std::string first = Slurp(pub.path());
  auto spec = cdi::SpecJson(*cycle->store().Current()->host, {});
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(first, *spec);
  struct stat before, after;
  ASSERT_EQ(::stat(pub.path().c_str(), &before), 0);

  cycle->Rescan("test: nothing changed");
  cycle->Rescan("test: a reload", {.policy_changed = true});  // Rendered again, same bytes.
  EXPECT_EQ(pub.writes(), 1u);
  EXPECT_EQ(pub.renders(), 2u);
  ASSERT_EQ(::stat(pub.path().c_str(), &after), 0);
  EXPECT_EQ(before.st_ino, after.st_ino);
  EXPECT_TRUE(CdiFindings(*cycle).empty());

  PortDown("mlx5_1");  // gpu0's NIC.
  cycle->Rescan("test: a port went down");
  EXPECT_EQ(pub.writes(), 2u);
  EXPECT_NE(Slurp(pub.path()), first);
  ASSERT_EQ(::stat(pub.path().c_str(), &after), 0);
  EXPECT_NE(before.st_ino, after.st_ino);
}

TEST_F(CdiPublisherTest, UnwritableIsAFindingUntilItIsWritten) {
  const std::string dir = base_ + "/missing/cdi";  // Its parent is missing: not created.
  CdiPublisher pub(dir, {});
  auto cycle = Cycle(&pub);
  std::vector<v1::Finding> found = CdiFindings(*cycle);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].severity(), v1::SEVERITY_WARNING);
  EXPECT_THAT(found[0].message(), HasSubstr(dir));
  EXPECT_THAT(found[0].message(), HasSubstr("No such file or directory"));

  // Fixed: the next rescan, although the host is the same, writes it and clears the finding.
  fs::create_directories(base_ + "/missing");
  cycle->Rescan("test: periodic");
  EXPECT_TRUE(CdiFindings(*cycle).empty());
  EXPECT_TRUE(fs::exists(pub.path()));
}

TEST_F(CdiPublisherTest, FullKeepsTheOldSpecAndSaysSo) {
  auto small = testing::SmallFs::Mount();
  if (!small.ok()) GTEST_SKIP() << "needs a private tmpfs: " << small.status();
  CdiPublisher pub((*small)->dir(), {});
  auto cycle = Cycle(&pub);
  const std::string old = Slurp(pub.path());
  ASSERT_FALSE(old.empty());
  ASSERT_TRUE((*small)->Fill().ok());

  PortDown("mlx5_1");
  cycle->Rescan("test: a port went down");
  std::vector<v1::Finding> found = CdiFindings(*cycle);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_THAT(found[0].message(), HasSubstr((*small)->dir()));
  EXPECT_THAT(found[0].message(), HasSubstr("No space left on device"));
  EXPECT_EQ(Slurp(pub.path()), old);
}

}  // namespace
}  // namespace fabric
