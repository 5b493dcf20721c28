#include "agent/common/fd.h"

#include <fcntl.h>
#include <gtest/gtest.h>

#include <cerrno>

namespace fabric {
namespace {

bool IsOpen(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

TEST(UniqueFd, ClosesOnScopeExitAndMoves) {
  int raw = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(raw, 0);
  {
    UniqueFd a(raw);
    UniqueFd b(std::move(a));
    EXPECT_FALSE(a.valid());
    EXPECT_EQ(b.get(), raw);
    EXPECT_TRUE(IsOpen(raw));
  }
  EXPECT_FALSE(IsOpen(raw));
}

TEST(UniqueFd, ReleaseKeepsItOpenAndResetCloses) {
  int raw = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(raw, 0);
  UniqueFd a(raw);
  EXPECT_EQ(a.release(), raw);
  EXPECT_FALSE(a.valid());
  EXPECT_TRUE(IsOpen(raw));
  a.reset(raw);
  a.reset();
  EXPECT_FALSE(IsOpen(raw));
}

TEST(UniqueFd, MoveAssignClosesTheOldOne) {
  int x = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  int y = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(x, 0);
  ASSERT_GE(y, 0);
  UniqueFd a(x), b(y);
  a = std::move(b);
  EXPECT_FALSE(IsOpen(x));
  EXPECT_EQ(a.get(), y);
}

TEST(UniqueFd, CloseReportsTheResultAndGivesTheDescriptorUp) {
  int raw = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(raw, 0);
  UniqueFd a(raw);
  EXPECT_EQ(a.Close(), 0);
  EXPECT_FALSE(a.valid());
  EXPECT_FALSE(IsOpen(raw));
  EXPECT_EQ(a.Close(), 0);  // Nothing held.
  // A descriptor closed behind its owner's back: close(2) fails with EBADF, reported.
  int other = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(other, 0);
  UniqueFd b(other);
  ASSERT_EQ(::close(other), 0);
  EXPECT_EQ(b.Close(), EBADF);
  EXPECT_FALSE(b.valid());
}

}  // namespace
}  // namespace fabric
