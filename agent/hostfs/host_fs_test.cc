#include "agent/hostfs/host_fs.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"

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

// Which failed reads say nothing about the file: the table the daemon's trust in a rescan rests
// on.
TEST(IsTransientReadError, ByErrno) {
  struct Case {
    int err;
    bool transient;
  } cases[] = {
      {EMFILE, true},      {ENFILE, true},   {ENOMEM, true},    {ENOBUFS, true}, {EIO, true},
      {EAGAIN, true},      {EINTR, true},    {ETIMEDOUT, true}, {EACCES, true},  {EPERM, true},
      {ENOENT, false},     {ENOTDIR, false}, {ENODEV, false},   {ENXIO, false},  {EINVAL, false},
      {EOPNOTSUPP, false}, {ENODATA, false},
  };
  for (const Case& c : cases) {
    const absl::Status s = ErrnoStatus(c.err, "open", "class/x");
    EXPECT_EQ(IsTransientReadError(s), c.transient) << s;
    EXPECT_EQ(StatusErrno(s), c.err);
    EXPECT_EQ(s.code(), absl::ErrnoToStatusCode(c.err));
    EXPECT_EQ(s.message(), absl::StrCat("open class/x: ", std::strerror(c.err)));
  }
  // Not an errno: the same codes without the errno are never transient.
  EXPECT_FALSE(IsTransientReadError(absl::ResourceExhaustedError("larger than 16777216 bytes")));
  EXPECT_FALSE(IsTransientReadError(absl::PermissionDeniedError("no errno")));
  EXPECT_FALSE(IsTransientReadError(absl::InvalidArgumentError("not a number")));
  EXPECT_FALSE(IsTransientReadError(absl::OkStatus()));
  EXPECT_EQ(StatusErrno(absl::InternalError("x")), std::nullopt);
  EXPECT_TRUE(IsTransientReadError(absl::DeadlineExceededError("timed out")));
}

// HostFsImpl's own failures carry their errno: a missing file is gone, not transient, and a file
// too large is HostFs's refusal, not the kernel's.
TEST_F(HostFsTest, FailuresCarryTheirErrno) {
  HostFsImpl fs(root_.string());
  auto missing = fs.ReadFile("class/net/eth9/mtu");
  EXPECT_EQ(StatusErrno(missing.status()), ENOENT);
  EXPECT_FALSE(IsTransientReadError(missing.status()));
  auto notdir = fs.ListDir("devices/pci0000:00/0000:00:01.0/0000:01:00.0/vendor");
  EXPECT_EQ(StatusErrno(notdir.status()), ENOTDIR);
  EXPECT_FALSE(IsTransientReadError(notdir.status()));
  auto dir = fs.OpenDir("class/net/eth0");
  ASSERT_TRUE(dir.ok()) << dir.status();
  auto gone = (*dir)->ReadFile("speed");
  EXPECT_EQ(StatusErrno(gone.status()), ENOENT);
  char buf[8];
  auto small = (*dir)->ReadSmall("nope", buf, sizeof buf);
  EXPECT_EQ(StatusErrno(small.status()), ENOENT);
}

}  // namespace
}  // namespace fabric
