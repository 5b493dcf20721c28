// The guard on the process's recvmsg, over real socket pairs: this binary links the guard as the
// agent does, so its recvmsg is the guard's (and so is libgrpc's in the agent).
#include "agent/daemon/transport/read_guard.h"

#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "agent/common/fd.h"
#include "gtest/gtest.h"
#include "tests/testing/hostile.h"

namespace fabric::read_guard {
namespace {

// `n` streams opened (a HEADERS frame) and at once reset (RST_STREAM), after the preface when
// `preface`.
std::string Resets(int n, bool preface = true) {
  std::string s(preface ? testing::kH2Preface : "");
  for (int i = 0; i < n; ++i) {
    const uint32_t stream = 1 + 2 * static_cast<uint32_t>(i);
    s += testing::H2Frame(0x1, 0x4, stream, "hdrs") + testing::H2RstStream(stream);
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

// Sends `bytes` from the client, then reads them on the server through recvmsg, each read split
// over two iovecs. Returns the bytes read; a failed read ends it, its errno in `*err`.
std::string SendAndRead(Pair& p, const std::string& bytes, int* err = nullptr) {
  EXPECT_EQ(write(p.client.get(), bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  std::string got;
  char a[700], b[900];
  while (got.size() < bytes.size()) {
    iovec iov[2] = {{a, sizeof(a)}, {b, sizeof(b)}};
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = 2;
    const ssize_t n = recvmsg(p.server.get(), &msg, 0);
    if (n <= 0) {
      if (err != nullptr) *err = n < 0 ? errno : 0;
      break;
    }
    const size_t first = std::min(static_cast<size_t>(n), sizeof(a));
    got.append(a, first);
    got.append(b, static_cast<size_t>(n) - first);
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
  const uint64_t before = ResetFloods();
  Guard(p.server.get(), "test client", 10, 50);
  int err = 0;
  const std::string got = SendAndRead(p, Resets(200), &err);
  EXPECT_EQ(err, ECONNRESET);
  EXPECT_LT(got.size(), Resets(200).size());
  EXPECT_EQ(ResetFloods(), before + 1);
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
  // The preface read first, so that the peeks below see frames from their first byte.
  const std::string preface(testing::kH2Preface);
  EXPECT_EQ(SendAndRead(p, preface), preface);
  const std::string sent = Resets(30, /*preface=*/false);
  // Three peeks and the read see the same 30 resets (120 over the burst of 50 if peeks counted).
  ASSERT_EQ(write(p.client.get(), sent.data(), sent.size()), static_cast<ssize_t>(sent.size()));
  char buf[8192];
  // Through recvmsg, as gRPC reads (recv(2) would not reach the guard at all).
  auto read = [&](int flags) {
    iovec iov{buf, sizeof(buf)};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    return recvmsg(p.server.get(), &msg, flags);
  };
  for (int i = 0; i < 3; ++i) EXPECT_EQ(read(MSG_PEEK), static_cast<ssize_t>(sent.size()));
  std::string got;
  while (got.size() < sent.size()) {
    const ssize_t n = read(0);
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
  const uint64_t before = ResetFloods();
  Pair& p = second;
  if (second.client.get() == fd) std::swap(p.client, p.server);
  const std::string flood = Resets(200);
  EXPECT_EQ(SendAndRead(p, flood), flood);
  EXPECT_EQ(ResetFloods(), before);
}

}  // namespace
}  // namespace fabric::read_guard
