// KmsgSourceImpl and KmsgReader on the real /dev/kmsg (root): a system test of its own, so that
// the parser's and reader's unit tests (kmsg_test.cc) run in the fast stage.
#include <errno.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <thread>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "agent/hostfs/kmsg.h"

namespace fabric {
namespace {

// The real device: a line written to /dev/kmsg is read back through the reader from the end of
// the log, with the facility the kernel gives user-space writers (never 0).
TEST(KmsgSystem, WrittenLineIsReadBack) {
  if (geteuid() != 0) GTEST_SKIP() << "writing to /dev/kmsg needs root";
  std::string devkmsg;
  std::ifstream("/proc/sys/kernel/printk_devkmsg") >> devkmsg;
  if (devkmsg == "off") GTEST_SKIP() << "kernel.printk_devkmsg=off drops writes to /dev/kmsg";
  auto src = KmsgSourceImpl::Open({});
  if (!src.ok()) GTEST_SKIP() << "cannot read the kernel log here: " << src.status();

  std::random_device rd;
  const std::string tag = absl::StrFormat("fabric-kmsg-test %08x%08x hello", rd(), rd());
  {
    const int fd = open("/dev/kmsg", O_WRONLY | O_CLOEXEC);
    if (fd < 0) GTEST_SKIP() << "cannot write /dev/kmsg: " << strerror(errno);
    // <3> asks for facility 0 (kernel), level 3: the kernel keeps the level and gives USER.
    const std::string line = "<3>" + tag + "\n";
    const ssize_t n = write(fd, line.data(), line.size());
    const int err = errno;
    close(fd);
    ASSERT_EQ(n, static_cast<ssize_t>(line.size())) << strerror(err);
  }

  KmsgReaderOptions opt;
  opt.kernel_only = false;
  KmsgReader reader(src->get(), opt);
  std::optional<KmsgRecord> found;
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (!found && absl::Now() < deadline) {
    for (KmsgRecord& r : reader.Drain(absl::Now(), 1000)) {
      if (r.message == tag) found = std::move(r);
    }
    if (!found) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(found.has_value()) << "not read back in 5 s; read " << reader.read() << ", malformed "
                                 << reader.malformed() << " (" << reader.last_malformed() << ")";
  EXPECT_EQ(found->facility, 1) << "a writer cannot claim the kernel's facility";
  EXPECT_EQ(found->level, 3);
  EXPECT_EQ(reader.malformed(), 0u) << reader.last_malformed();

  // The same line is not seen by a kernel-only reader: a user cannot forge a kernel record.
  auto again = KmsgSourceImpl::Open({.path = "/dev/kmsg", .from_start = true});
  ASSERT_TRUE(again.ok()) << again.status();
  KmsgReaderOptions kernel_only;
  kernel_only.burst = 1e9;  // The whole ring buffer, without a rate bound in the way.
  KmsgReader kreader(again->get(), kernel_only);
  for (int i = 0; i < 1000; ++i) {  // Until the reader has caught up with the log.
    const uint64_t before = kreader.read();
    for (const KmsgRecord& r : kreader.Drain(absl::Now(), 1000)) EXPECT_NE(r.message, tag);
    if (kreader.read() == before) break;
  }
  EXPECT_GT(kreader.not_kernel(), 0u);
}

}  // namespace
}  // namespace fabric
