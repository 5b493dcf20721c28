#include "agent/daemon/cycle/pod_record_sweeper.h"

#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/publish/podrecord/pod_record.h"
#include "tests/testing/subprocess.h"

namespace fabric {
namespace {

namespace fs = std::filesystem;

// Namespace paths stand in as plain files: the sweeper's rule is about paths and inodes.
class SweeperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(records_);
    fs::create_directories(netns_dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A record of a pod whose namespace is at `netns`; `inode` 0: that path's own.
  std::string Record(const std::string& id, const std::string& netns, uint64_t inode = 0) {
    struct stat st {};
    if (inode == 0 && stat(netns.c_str(), &st) == 0) inode = st.st_ino;
    podrecord::PodRecord r;
    r.container_id = id;
    r.ifname = "net1";
    r.netns = netns;
    r.netns_inode = inode;
    const std::string path = absl::StrCat(records_, "/", podrecord::FileName(inode, id, "net1"));
    std::ofstream(path) << podrecord::RecordJson(r);
    return path;
  }
  std::string Namespace(const std::string& name) {
    const std::string p = absl::StrCat(netns_dir_, "/", name);
    std::ofstream(p) << "";
    return p;
  }
  static bool Exists(const std::string& p) { return access(p.c_str(), F_OK) == 0; }

  const std::string dir_ = testing::MakeTempDir("sweeper");
  const std::string records_ = dir_ + "/pods";
  const std::string netns_dir_ = dir_ + "/netns";
  // Late enough that every record is past its grace.
  const absl::Time later_ = absl::Now() + PodRecordSweeper::kGrace + absl::Seconds(5);
};

TEST_F(SweeperTest, RemovesOnlyRecordsOfPodsThatAreGone) {
  const std::string live = Record("live", Namespace("cni-live"));
  const std::string gone_ns = Namespace("cni-gone");
  const std::string gone = Record("gone", gone_ns);
  ASSERT_EQ(unlink(gone_ns.c_str()), 0);
  // A file that is not a namespace at the path (a mount not propagated here): left alone.
  const std::string unmounted = Record("unmounted", Namespace("cni-unmounted"), 12345);
  // Where the agent cannot see the namespace directory it judges nothing.
  const std::string unseen = Record("unseen", dir_ + "/not-mounted/cni-x");
  const std::string corrupt = absl::StrCat(records_, "/99-bad-net1.json");
  std::ofstream(corrupt) << "{";
  const std::string other = absl::StrCat(records_, "/README");
  std::ofstream(other) << "not a record";

  PodRecordSweeper sweeper(records_);
  // Within the grace nothing goes.
  EXPECT_EQ(sweeper.Sweep(absl::Now()), 0);
  EXPECT_EQ(sweeper.Sweep(later_), 2);
  EXPECT_TRUE(Exists(live));
  EXPECT_FALSE(Exists(gone));
  EXPECT_TRUE(Exists(unmounted));
  EXPECT_TRUE(Exists(unseen));
  EXPECT_FALSE(Exists(corrupt));
  EXPECT_TRUE(Exists(other));
  std::vector<v1::Finding> findings;
  sweeper.Findings(later_, &findings);
  EXPECT_TRUE(findings.empty());
}

// A real namespace (this process's) at a path whose inode is not the record's: the path is
// another pod's now.
TEST_F(SweeperTest, RemovesARecordWhosePathIsAnotherNamespaceNow) {
  const std::string mine = Record("mine", "/proc/self/ns/net");
  const std::string reused = Record("reused", "/proc/self/ns/net", 12345);
  PodRecordSweeper sweeper(records_);
  EXPECT_EQ(sweeper.Sweep(later_), 1);
  EXPECT_TRUE(Exists(mine));
  EXPECT_FALSE(Exists(reused));
}

TEST_F(SweeperTest, NoDirectoryIsNoError) {
  PodRecordSweeper sweeper(dir_ + "/absent");
  EXPECT_EQ(sweeper.Sweep(later_), 0);
  std::vector<v1::Finding> findings;
  sweeper.Findings(later_, &findings);
  EXPECT_TRUE(findings.empty());
}

// A record that cannot be removed: a read-only directory, or for root (whom permissions do not
// stop) a file mounted over the record (unlink: EBUSY).
TEST_F(SweeperTest, ARecordItCannotRemoveIsAFinding) {
  const std::string ns = Namespace("cni-gone");
  const std::string record = Record("gone", ns);
  ASSERT_EQ(unlink(ns.c_str()), 0);
  bool mounted = false;
  if (geteuid() == 0) {
    const std::string copy = dir_ + "/copy.json";
    fs::copy_file(record, copy);
    mounted = mount(copy.c_str(), record.c_str(), nullptr, MS_BIND, nullptr) == 0;
    if (!mounted) GTEST_SKIP() << "no bind mount here: " << std::strerror(errno);
  } else {
    ASSERT_EQ(chmod(records_.c_str(), 0555), 0);
  }
  PodRecordSweeper sweeper(records_);
  EXPECT_EQ(sweeper.Sweep(later_), 0);
  std::vector<v1::Finding> findings;
  sweeper.Findings(later_, &findings);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].check(), "pod-records");
  EXPECT_NE(findings[0].message().find(record), std::string::npos) << findings[0].message();
  if (mounted) umount(record.c_str());
  chmod(records_.c_str(), 0755);
  // Once it can go, it goes and the finding clears.
  EXPECT_EQ(sweeper.Sweep(later_), 1);
  findings.clear();
  sweeper.Findings(later_, &findings);
  EXPECT_TRUE(findings.empty());
}

}  // namespace
}  // namespace fabric
