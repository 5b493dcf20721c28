// The cycle's GID follow-up on the roce-9port example host: the kernel writes a netdev's GIDs from
// a work queue after the address event, so a refresh for that event that finds the GID table as
// it was reads it again after 200 ms, 1 s and 5 s until it changes, and then stops; a refresh
// that already sees the new GIDs, a device uevent and an unrelated netdev arm nothing.
#include "agent/daemon/cycle/inventory_cycle.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "agent/hostfs/host_fs.h"
#include "tests/hosts/hosts.h"
#include "tests/testing/subprocess.h"

namespace fabric {
namespace {

namespace fs = std::filesystem;

constexpr char kNewGid[] = "0000:0000:0000:0000:0000:ffff:0a63:0102";  // 10.99.1.2

class GidFollowUpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = testing::MakeTempDir("cycle-gids");
    ASSERT_FALSE(base_.empty());
    ASSERT_TRUE(testing::WriteExampleHost("roce-9port", base_ + "/host").ok());
    sys_ = std::make_unique<HostFsImpl>(base_ + "/host/sys");
    proc_ = std::make_unique<HostFsImpl>(base_ + "/host/proc");
    cycle_ = std::make_unique<InventoryCycle>(sys_.get(), proc_.get(), CycleOptions{}, &counters_);
    ASSERT_TRUE(cycle_->First().ok());
    ASSERT_FALSE(HasNewGid());
  }
  void TearDown() override { fs::remove_all(base_); }

  // What the kernel's work queue does for an address on eth0 (mlx5_0's netdev): GID slot 10.
  void WriteGid() {
    const std::string port = base_ + "/host/sys/class/infiniband/mlx5_0/ports/1/";
    std::ofstream(port + "gids/10") << kNewGid << "\n";
    std::ofstream(port + "gid_attrs/types/10") << "RoCE v2\n";
    std::ofstream(port + "gid_attrs/ndevs/10") << "eth0\n";
  }

  bool HasNewGid() const {
    for (const v1::RdmaDevice& d : cycle_->store().Current()->host->rdma_devices()) {
      if (d.name() != "mlx5_0") continue;
      for (const v1::Gid& g : d.ports(0).gids()) {
        if (g.index() == 10 && g.gid() == kNewGid) return true;
      }
    }
    return false;
  }

  static ChangeScope NetdevEvent(const std::string& name) {
    ChangeScope s;
    s.Netdev(name);
    return s;
  }

  std::string base_;
  std::unique_ptr<HostFsImpl> sys_, proc_;
  AgentCounters counters_;
  std::unique_ptr<InventoryCycle> cycle_;
};

TEST_F(GidFollowUpTest, ReadsAgainUntilTheKernelHasWrittenTheGids) {
  const absl::Time before = absl::Now();
  cycle_->RefreshFor(NetdevEvent("eth0"), "address added");
  const absl::Time at = cycle_->gid_follow_up_at();
  ASSERT_NE(at, absl::InfiniteFuture());
  EXPECT_GE(at - before, InventoryCycle::kGidFollowUps[0]);
  EXPECT_LE(at - absl::Now(), InventoryCycle::kGidFollowUps[0]);
  EXPECT_FALSE(HasNewGid());

  WriteGid();
  const uint64_t targeted = counters_.refreshes_targeted.load();
  cycle_->FollowUpGids(at - absl::Milliseconds(1));  // Not due yet: nothing read.
  EXPECT_EQ(counters_.refreshes_targeted.load(), targeted);
  EXPECT_FALSE(HasNewGid());

  cycle_->FollowUpGids(at);
  EXPECT_EQ(counters_.refreshes_targeted.load(), targeted + 1);
  EXPECT_TRUE(HasNewGid());
  EXPECT_EQ(cycle_->gid_follow_up_at(), absl::InfiniteFuture());  // Changed: no more reads.
}

TEST_F(GidFollowUpTest, GivesUpAfterTheLastDelay) {
  cycle_->RefreshFor(NetdevEvent("eth0"), "link changed");
  int reads = 0;
  for (absl::Duration d : InventoryCycle::kGidFollowUps) {
    const absl::Time at = cycle_->gid_follow_up_at();
    ASSERT_NE(at, absl::InfiniteFuture()) << "follow-up " << reads;
    const absl::Time now = absl::Now();
    EXPECT_LE(at - now, d);
    EXPECT_GE(at - now, d - absl::Seconds(1));
    cycle_->FollowUpGids(at);
    ++reads;
  }
  EXPECT_EQ(reads, 3);
  EXPECT_EQ(cycle_->gid_follow_up_at(), absl::InfiniteFuture());
  EXPECT_FALSE(HasNewGid());
}

TEST_F(GidFollowUpTest, ArmsNothingWhenTheFirstReadSawTheGids) {
  WriteGid();
  cycle_->RefreshFor(NetdevEvent("eth0"), "address added");
  EXPECT_TRUE(HasNewGid());
  EXPECT_EQ(cycle_->gid_follow_up_at(), absl::InfiniteFuture());
}

TEST_F(GidFollowUpTest, ArmsNothingForDeviceUeventsOrUnrelatedNetdevs) {
  ChangeScope uevent;
  uevent.RdmaDevice("mlx5_0");
  cycle_->RefreshFor(uevent, "uevent");
  EXPECT_EQ(cycle_->gid_follow_up_at(), absl::InfiniteFuture());
  cycle_->RefreshFor(NetdevEvent("veth-pod"), "address added");  // No such netdev.
  EXPECT_EQ(cycle_->gid_follow_up_at(), absl::InfiniteFuture());
}

}  // namespace
}  // namespace fabric
