// Real nodes in a scratch directory: made with mknod (root), opened by the kernel. This machine
// has no InfiniBand driver, so a uverbs node with its real numbers answers ENXIO or ENODEV, as
// one does in a container that was given a node but not the driver's device.
#include "agent/hostfs/dev_nodes.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tests/testing/subprocess.h"

namespace fabric {
namespace {

namespace fs = std::filesystem;

class DevNodesTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::MakeTempDir("dev-nodes"); }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST_F(DevNodesTest, MissingDirectoryIsNotFound) {
  auto r = OpenRdmaNodes(dir_ + "/infiniband");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("infiniband"));
}

TEST_F(DevNodesTest, PlainFilesAreNotOpenedAndOthersAreLeftOut) {
  std::ofstream(dir_ + "/uverbs0") << "not a device";
  std::ofstream(dir_ + "/umad0") << "";
  ASSERT_EQ(mkfifo((dir_ + "/rdma_cm").c_str(), 0600), 0);  // Opening it would block.
  auto r = OpenRdmaNodes(dir_);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].name, "rdma_cm");
  EXPECT_FALSE((*r)[0].is_char);
  EXPECT_EQ((*r)[1].name, "uverbs0");
  EXPECT_FALSE((*r)[1].is_char);
}

TEST_F(DevNodesTest, TheKernelAnswersEachNode) {
  if (geteuid() != 0) GTEST_SKIP() << "mknod needs root";
  ASSERT_EQ(mknod((dir_ + "/uverbs10").c_str(), S_IFCHR | 0666, makedev(231, 202)), 0);
  ASSERT_EQ(mknod((dir_ + "/uverbs2").c_str(), S_IFCHR | 0666, makedev(231, 194)), 0);
  ASSERT_EQ(mknod((dir_ + "/rdma_cm").c_str(), S_IFCHR | 0666, makedev(1, 3)), 0);  // /dev/null's.
  auto r = OpenRdmaNodes(dir_);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0].name, "rdma_cm");
  EXPECT_EQ((*r)[0].error, 0) << "a character device whose driver answers opens";
  EXPECT_EQ((*r)[1].name, "uverbs2") << "natural order";
  EXPECT_EQ((*r)[2].name, "uverbs10");
  if (!fs::exists("/sys/class/infiniband_verbs")) {
    EXPECT_THAT((*r)[1].error, ::testing::AnyOf(ENXIO, ENODEV)) << "no driver behind 231:194";
  }
  // Another user, as a job runs: mode 0600 root-owned refuses with EACCES.
  ASSERT_EQ(chmod((dir_ + "/rdma_cm").c_str(), 0600), 0);
  auto as_nobody = testing::Run({"/usr/bin/setpriv", "--reuid=65534", "--regid=65534",
                                 "--clear-groups", "/usr/bin/test", "-r", dir_ + "/rdma_cm"});
  ASSERT_TRUE(as_nobody.ok());
  EXPECT_NE(as_nobody->status, 0) << "the kernel's view for another user";
}

TEST_F(DevNodesTest, ListingIsBounded) {
  for (int i = 0; i < 50; ++i) std::ofstream(dir_ + "/uverbs" + std::to_string(i)) << "";
  auto r = OpenRdmaNodes(dir_, 8);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->size(), 8u);
}

}  // namespace
}  // namespace fabric
