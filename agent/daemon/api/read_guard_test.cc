// The guard on the process's recvmsg, over real socket pairs: this binary links the guard as the
// agent does, so its recvmsg is the guard's (and so is libgrpc's in the agent).
#include "agent/daemon/api/read_guard.h"

#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "agent/common/fd.h"
#include "gtest/gtest.h"

namespace fabric::read_guard {
namespace {

constexpr std::string_view kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

std::string Frame(uint8_t type, uint32_t stream, std::string_view payload) {
  std::string f;
  f.push_back(static_cast<char>(payload.size() >> 16));
  f.push_back(static_cast<char>(payload.size() >> 8));
  f.push_back(static_cast<char>(payload.size()));
  f.push_back(static_cast<char>(type));
  f.push_back(0);
  for (int shift = 24; shift >= 0; shift -= 8) f.push_back(static_cast<char>(stream >> shift));
  return f + std::string(payload);
}

// The preface, then `n` streams opened (a HEADERS frame) and at once reset (RST_STREAM).
std::string Resets(int n) {
  std::string s(kPreface);
  for (int i = 0; i < n; ++i) {
    const uint32_t stream = 1 + 2 * static_cast<uint32_t>(i);
    s += Frame(0x1, stream, "hdrs") + Frame(0x3, stream, std::string("\0\0\0\x08", 4));
  }
  return s;
}

struct Pair {
  UniqueFd client, server;
};

Pair Connected() {
  int fds[2];
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  return {UniqueFd(fds[0]), UniqueFd(fds[1])};
}

// Sends `bytes` from the client, then reads them on the server through recvmsg in reads of at
// most `chunk` bytes split over two iovecs. Returns the bytes read, or sets `*err` to the errno
// of the first failed read.
std::string SendAndRead(Pair& p, const std::string& bytes, int flags = 0, int* err = nullptr) {
  EXPECT_EQ(write(p.client.get(), bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  std::string got;
  char a[700], b[900];
  while (got.size() < bytes.size()) {
    iovec iov[2] = {{a, sizeof(a)}, {b, sizeof(b)}};
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = 2;
    const ssize_t n = recvmsg(p.server.get(), &msg, flags);
    if (n <= 0) {
      if (err != nullptr) *err = n < 0 ? errno : 0;
      break;
    }
    const size_t first = std::min(static_cast<size_t>(n), sizeof(a));
    got.append(a, first);
    got.append(b, static_cast<size_t>(n) - first);
    if (flags & MSG_PEEK) break;
  }
  return got;
}

TEST(ReadGuardTest, IsActiveInABinaryThatLinksIt) { EXPECT_TRUE(Active()); }

TEST(ReadGuardTest, ResetsWithinTheBudgetPassUntouched) {
  Pair p = Connected();
  Guard(p.server.get(), "test client", 10, 50);
  const std::string sent = Resets(40);
  EXPECT_EQ(SendAndRead(p, sent), sent);
  Forget(p.server.get());
}

TEST(ReadGuardTest, AFloodFailsTheReadAndEndsTheConnection) {
  Pair p = Connected();
  const uint64_t before = GetStats().reset_floods;
  Guard(p.server.get(), "test client", 10, 50);
  int err = 0;
  const std::string got = SendAndRead(p, Resets(200), 0, &err);
  EXPECT_EQ(err, ECONNRESET);
  EXPECT_LT(got.size(), Resets(200).size());
  EXPECT_EQ(GetStats().reset_floods, before + 1);
  // The client sees its connection shut down.
  char c;
  EXPECT_EQ(read(p.client.get(), &c, 1), 0);
}

TEST(ReadGuardTest, UnguardedAndForgottenDescriptorsPassAFloodThrough) {
  Pair plain = Connected();
  const std::string flood = Resets(200);
  EXPECT_EQ(SendAndRead(plain, flood), flood);

  Pair forgotten = Connected();
  Guard(forgotten.server.get(), "test client", 10, 50);
  Forget(forgotten.server.get());
  EXPECT_EQ(SendAndRead(forgotten, flood), flood);
}

TEST(ReadGuardTest, PeeksAreNotCounted) {
  Pair p = Connected();
  Guard(p.server.get(), "test client", 10, 50);
  const std::string sent = Resets(30);
  // Three peeks and the read see the same 30 resets (90 over the burst if peeks counted).
  ASSERT_EQ(write(p.client.get(), sent.data(), sent.size()), static_cast<ssize_t>(sent.size()));
  char buf[8192];
  for (int i = 0; i < 3; ++i) EXPECT_GT(recv(p.server.get(), buf, sizeof(buf), MSG_PEEK), 0);
  std::string got;
  while (got.size() < sent.size()) {
    iovec iov{buf, sizeof(buf)};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    const ssize_t n = recvmsg(p.server.get(), &msg, 0);
    ASSERT_GT(n, 0) << "errno " << errno;
    got.append(buf, static_cast<size_t>(n));
  }
  EXPECT_EQ(got, sent);
  Forget(p.server.get());
}

TEST(ReadGuardTest, ADescriptorReusedBySomethingElseIsNotJudgedByTheOldConnection) {
  Pair first = Connected();
  const int fd = first.server.get();
  Guard(fd, "gone client", 10, 50);
  first.server.reset();  // As gRPC does, without telling the guard.
  Pair second = Connected();
  ASSERT_TRUE(second.server.get() == fd || second.client.get() == fd);
  // The new socket on that number floods: the stale entry's verdict is not acted on (another
  // socket), and the entry is dropped.
  const uint64_t before = GetStats().reset_floods;
  Pair& p = second;
  if (second.client.get() == fd) std::swap(p.client, p.server);
  const std::string flood = Resets(200);
  EXPECT_EQ(SendAndRead(p, flood), flood);
  EXPECT_EQ(GetStats().reset_floods, before);
}

}  // namespace
}  // namespace fabric::read_guard
