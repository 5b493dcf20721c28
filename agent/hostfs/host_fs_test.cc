#include "agent/hostfs/host_fs.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace fabric {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;

class HostFsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "hostfs.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
    fs::create_directories(root_ / "devices/pci0000:00/0000:00:01.0/0000:01:00.0/net/eth0");
    fs::create_directories(root_ / "class/net");
    Write("devices/pci0000:00/0000:00:01.0/0000:01:00.0/vendor", "0x15b3\n");
    Write("devices/pci0000:00/0000:00:01.0/0000:01:00.0/net/eth0/mtu", "1500\n");
    fs::create_directory_symlink("../../devices/pci0000:00/0000:00:01.0/0000:01:00.0/net/eth0",
                                 root_ / "class/net/eth0");
    fs::create_directory_symlink(
        "../../../0000:01:00.0",
        root_ / "devices/pci0000:00/0000:00:01.0/0000:01:00.0/net/eth0/device");
  }
  void TearDown() override { fs::remove_all(root_); }
  void Write(const std::string& rel, const std::string& content) {
    std::ofstream(root_ / rel) << content;
  }

  fs::path root_;
};

TEST_F(HostFsTest, ReadsAndLists) {
  HostFsImpl hfs(root_.string() + "/");
  EXPECT_EQ(*hfs.ReadFile("devices/pci0000:00/0000:00:01.0/0000:01:00.0/vendor"), "0x15b3\n");
  EXPECT_EQ(*hfs.ReadFile("class/net/eth0/mtu"), "1500\n");  // through the link
  EXPECT_THAT(*hfs.ListDir("devices/pci0000:00/0000:00:01.0/0000:01:00.0"),
              ElementsAre("net", "vendor"));
  auto missing = hfs.ReadFile("class/net/eth0/speed");
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(absl::IsNotFound(missing.status()));
  EXPECT_THAT(std::string(missing.status().message()), ::testing::HasSubstr("speed"));
  EXPECT_FALSE(hfs.ListDir("nope").ok());
  EXPECT_TRUE(hfs.Exists("class/net/eth0"));
  EXPECT_FALSE(hfs.Exists("class/net/eth1"));
}

TEST_F(HostFsTest, RealPathResolvesRelativeLinksInsideRoot) {
  HostFsImpl hfs(root_.string());
  EXPECT_EQ(*hfs.RealPath("class/net/eth0"),
            "devices/pci0000:00/0000:00:01.0/0000:01:00.0/net/eth0");
  EXPECT_EQ(*hfs.RealPath("class/net/eth0/device"), "devices/pci0000:00/0000:00:01.0/0000:01:00.0");
  EXPECT_EQ(*hfs.RealPath("/class//net/./eth0/../eth0/mtu"),
            "devices/pci0000:00/0000:00:01.0/0000:01:00.0/net/eth0/mtu");
}

TEST_F(HostFsTest, AbsoluteAndEscapingLinksStayInsideRoot) {
  fs::create_directories(root_ / "etc");
  Write("etc/marker", "inside\n");
  fs::create_directory_symlink("/etc", root_ / "class/net/abs");
  fs::create_directory_symlink("../../../../../../../../etc", root_ / "class/net/escape");
  HostFsImpl hfs(root_.string());
  EXPECT_EQ(*hfs.RealPath("class/net/abs/marker"), "etc/marker");
  // ".." stops at the root, so the escape lands on the root's own etc.
  EXPECT_EQ(*hfs.RealPath("class/net/escape/marker"), "etc/marker");
}

TEST_F(HostFsTest, DanglingAndLoopingLinksAreErrors) {
  fs::create_directory_symlink("../../devices/pci0000:ff/0000:ff:00.0", root_ / "class/net/gone");
  fs::create_symlink("loop", root_ / "class/net/loop");
  HostFsImpl hfs(root_.string());
  auto gone = hfs.RealPath("class/net/gone");
  ASSERT_FALSE(gone.ok());
  EXPECT_TRUE(absl::IsNotFound(gone.status()));
  auto loop = hfs.RealPath("class/net/loop");
  ASSERT_FALSE(loop.ok());
  EXPECT_THAT(std::string(loop.status().message()), ::testing::HasSubstr("symbolic links"));
  auto through_file = hfs.RealPath("devices/pci0000:00/0000:00:01.0/0000:01:00.0/vendor/x");
  EXPECT_FALSE(through_file.ok());
}

TEST_F(HostFsTest, OpenDirReadsRelative) {
  HostFsImpl hfs(root_.string());
  auto dir = hfs.OpenDir("devices/pci0000:00/0000:00:01.0/0000:01:00.0");
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ((*dir)->path(), "devices/pci0000:00/0000:00:01.0/0000:01:00.0");
  EXPECT_EQ(*(*dir)->ReadFile("vendor"), "0x15b3\n");
  EXPECT_EQ(*(*dir)->ReadFile("net/eth0/mtu"), "1500\n");
  EXPECT_THAT(*(*dir)->ListDir("net"), ElementsAre("eth0"));
  EXPECT_THAT(*(*dir)->ListDir(""), ElementsAre("net", "vendor"));
  EXPECT_TRUE((*dir)->Exists("net/eth0"));
  EXPECT_FALSE((*dir)->Exists("infiniband"));
  auto missing = (*dir)->ReadFile("numa_node");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()),
              ::testing::HasSubstr("0000:01:00.0/numa_node"));
  EXPECT_FALSE(hfs.OpenDir("nope").ok());
}

TEST(JoinPath, Table) {
  EXPECT_EQ(JoinPath("a/", "/b"), "a/b");
  EXPECT_EQ(JoinPath("", "b"), "b");
  EXPECT_EQ(JoinPath("a", ""), "a");
}

}  // namespace
}  // namespace fabric
