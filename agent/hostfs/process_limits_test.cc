#include "agent/hostfs/process_limits.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tests/testing/subprocess.h"

namespace fabric {
namespace {

namespace fs = std::filesystem;

TEST(ProcessLimitsTest, CapEff) {
  struct Case {
    const char* text;
    int64_t want;  // -1: an error.
  };
  const Case cases[] = {
      {"Name:\tx\nCapInh:\t0000000000000000\nCapEff:\t00000000a80425fb\n", 0xa80425fb},
      {"CapEff:\t0000000000004000\n", 1 << kCapIpcLock},
      {"CapEff:\t000001ffffffffff", 0x1ffffffffffLL},  // No trailing newline.
      {"CapEff:\tzz\n", -1},
      {"CapEff:\t\n", -1},
      {"CapEff:\t00000000000000000000\n", -1},  // Longer than 64 bits.
      {"CapPrm:\t0\n", -1},
      {"", -1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    absl::StatusOr<uint64_t> m = ParseCapEff(c.text);
    if (c.want < 0) {
      EXPECT_FALSE(m.ok());
    } else {
      ASSERT_TRUE(m.ok()) << m.status();
      EXPECT_EQ(*m, static_cast<uint64_t>(c.want));
    }
  }
}

constexpr char kMountinfo[] =
    "22 1 0:21 / / rw,relatime - overlay overlay rw,lowerdir=/l\n"
    "23 22 0:22 / /dev rw,nosuid - tmpfs tmpfs rw,size=65536k\n"
    "24 23 0:23 / /dev/shm rw,nosuid,nodev - tmpfs shm rw,size=65536k\n"
    "25 23 0:24 / /dev/shm ro,nosuid shared:5 - tmpfs shm ro,size=1g\n"
    "26 22 0:25 / /mnt/with\\040space rw shared:1 master:2 - ext4 /dev/sda1 rw\n"
    "garbage line\n"
    "27 22 0:26 / /short rw -\n";

TEST(ProcessLimitsTest, FindMountTakesTheLastMountAtThePoint) {
  auto shm = FindMount(kMountinfo, "/dev/shm");
  ASSERT_TRUE(shm.has_value());
  EXPECT_EQ(shm->fstype, "tmpfs");
  EXPECT_TRUE(shm->read_only) << "the later mount hides the first";
  auto spaced = FindMount(kMountinfo, "/mnt/with space");
  ASSERT_TRUE(spaced.has_value());
  EXPECT_EQ(spaced->fstype, "ext4");
  EXPECT_FALSE(spaced->read_only);
  EXPECT_FALSE(FindMount(kMountinfo, "/short").has_value()) << "no filesystem type";
  EXPECT_FALSE(FindMount(kMountinfo, "/nope").has_value());
  EXPECT_FALSE(FindMount("", "/dev/shm").has_value());
}

// The real process, in a child whose memlock limit is 64 KiB (what a container without
// --ulimit memlock gets on many runtimes): the reader reports that, this process's /proc, and a
// real tmpfs's size.
TEST(ProcessLimitsTest, ReadsTheRealProcess) {
  const std::string dir = testing::MakeTempDir("limits");
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    rlimit r{64 * 1024, 64 * 1024};
    if (setrlimit(RLIMIT_MEMLOCK, &r) != 0) _exit(10);
    const ProcessLimits l = ReadProcessLimits("/proc/self", "/dev/shm");
    if (!l.memlock_soft || *l.memlock_soft != 64 * 1024) _exit(11);
    if (!l.cap_ipc_lock.has_value()) _exit(12);
    if (geteuid() == 0 && !*l.cap_ipc_lock) _exit(13);  // Root holds CAP_IPC_LOCK.
    if (!l.nofile_soft) _exit(14);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "child check " << WEXITSTATUS(status);

  const ProcessLimits missing = ReadProcessLimits(dir + "/noproc", dir + "/noshm");
  EXPECT_FALSE(missing.cap_ipc_lock.has_value());
  EXPECT_FALSE(missing.shm.has_value());
  EXPECT_FALSE(missing.shm_size.has_value());
  EXPECT_EQ(missing.unreadable.size(), 3u) << "status, mountinfo, statvfs";
  fs::remove_all(dir);
}

TEST(ProcessLimitsTest, ATinyTmpfsIsMeasured) {
  if (geteuid() != 0) GTEST_SKIP() << "mounting a tmpfs needs root";
  const std::string dir = testing::MakeTempDir("shm");
  auto m = testing::Run({"/usr/bin/mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", dir});
  ASSERT_TRUE(m.ok() && m->status == 0) << (m.ok() ? m->err : "");
  const ProcessLimits l = ReadProcessLimits("/proc/self", dir);
  ASSERT_TRUE(l.shm.has_value());
  EXPECT_EQ(l.shm->fstype, "tmpfs");
  ASSERT_TRUE(l.shm_size.has_value());
  EXPECT_EQ(*l.shm_size, 64u << 20);
  (void)testing::Run({"/usr/bin/umount", dir});
  fs::remove_all(dir);
}

}  // namespace
}  // namespace fabric
