#include "agent/fabric/probes/net.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "agent/fabric/probes/wire.h"

namespace fabric::probes {
namespace {

// A Channel on one end of a socketpair; the test writes raw bytes into the other.
struct Pair {
  Pair() {
    int fds[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    ch = std::make_unique<Channel>(Fd(fds[0]), absl::Seconds(1), nullptr);
    peer = Fd(fds[1]);
  }
  void Write(const std::vector<uint8_t>& bytes) const {
    ASSERT_EQ(write(peer.get(), bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  }
  std::unique_ptr<Channel> ch;
  Fd peer;
};

TEST(ChannelPeek, NothingQueued) {
  Pair p;
  EXPECT_EQ(p.ch->Peek(), Channel::Pending::kNothing);
}

TEST(ChannelPeek, SuccessfulDoneIsSeenAndLeftInPlace) {
  Pair p;
  p.Write(wire::Encode(wire::Done{true, 42, ""}));
  EXPECT_EQ(p.ch->Peek(), Channel::Pending::kSuccess);
  EXPECT_EQ(p.ch->Peek(), Channel::Pending::kSuccess);  // not consumed
  absl::StatusOr<wire::Done> d = p.ch->RecvAs<wire::Done>("done");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->count, 42u);
  EXPECT_EQ(p.ch->Peek(), Channel::Pending::kNothing);
}

TEST(ChannelPeek, FailuresEofAndOtherMessagesEndTheWait) {
  const std::vector<std::vector<uint8_t>> others = {
      wire::Encode(wire::Done{false, 0, "device removed"}),
      wire::Encode(wire::Reject{"busy: rxe0"}),
      wire::Encode(wire::Sync{3}),
      {0xde, 0xad, 0xbe, 0xef, 0, 1, 0, 6, 0, 0, 0, 0},  // bad magic
  };
  for (const auto& bytes : others) {
    Pair p;
    p.Write(bytes);
    EXPECT_EQ(p.ch->Peek(), Channel::Pending::kOther) << bytes.size() << " bytes";
  }
  Pair closed;
  closed.peer = Fd();
  EXPECT_EQ(closed.ch->Peek(), Channel::Pending::kOther);
}

TEST(ChannelPeek, PartialDoneWaitsForTheRest) {
  const std::vector<uint8_t> done = wire::Encode(wire::Done{true, 7, "all good"});
  for (size_t cut : {size_t{5}, wire::kHeaderSize, done.size() - 1}) {
    Pair q;
    q.Write(std::vector<uint8_t>(done.begin(), done.begin() + static_cast<long>(cut)));
    EXPECT_EQ(q.ch->Peek(), Channel::Pending::kPartial) << cut;
    q.Write(std::vector<uint8_t>(done.begin() + static_cast<long>(cut), done.end()));
    EXPECT_EQ(q.ch->Peek(), Channel::Pending::kSuccess) << cut;
  }
}

// A real descriptor exhaustion: the server runs in a child with a file limit of 32 and fills
// it. Clients that arrive then are shed (their connection closes) instead of the accept loop
// spinning or failing, and once descriptors are free the next client is served.
TEST(AcceptTcp, KeepsAcceptingThroughDescriptorExhaustion) {
  absl::StatusOr<Fd> listener = ListenTcp("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok()) << listener.status();
  const uint16_t port = LocalPort(listener->get());
  int to_child[2], from_child[2];
  ASSERT_EQ(pipe(to_child), 0);
  ASSERT_EQ(pipe(from_child), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    Acceptor acceptor;
    rlimit rl{32, 32};
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) _exit(10);
    std::vector<int> filler;
    for (int fd; (fd = open("/dev/null", O_RDONLY)) >= 0;) filler.push_back(fd);
    if (errno != EMFILE) _exit(11);
    char c = 'f';
    if (write(from_child[1], &c, 1) != 1) _exit(12);  // Full: connect now.
    if (read(to_child[0], &c, 1) != 1) _exit(13);
    // Three clients are waiting; each is shed within the deadline, none is served.
    absl::StatusOr<Fd> none =
        AcceptTcp(listener->get(), Deadline::In(absl::Milliseconds(300)), nullptr, &acceptor);
    if (none.ok() || !absl::IsDeadlineExceeded(none.status())) _exit(14);
    for (int fd : filler) close(fd);
    c = 'r';
    if (write(from_child[1], &c, 1) != 1) _exit(15);  // Free again: connect once more.
    absl::StatusOr<Fd> fd =
        AcceptTcp(listener->get(), Deadline::In(absl::Seconds(10)), nullptr, &acceptor);
    if (!fd.ok()) _exit(16);
    c = 'k';
    _exit(write(fd->get(), &c, 1) == 1 ? 0 : 17);
  }
  char c = 0;
  ASSERT_EQ(read(from_child[0], &c, 1), 1);
  std::vector<Fd> shed;
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<Fd> fd = ConnectTcp("127.0.0.1", port, Deadline::In(absl::Seconds(5)), nullptr);
    ASSERT_TRUE(fd.ok()) << fd.status();
    shed.push_back(std::move(*fd));
  }
  ASSERT_EQ(write(to_child[1], "g", 1), 1);
  ASSERT_EQ(read(from_child[0], &c, 1), 1);
  EXPECT_EQ(c, 'r');
  for (Fd& fd : shed) {
    char b;
    EXPECT_FALSE(ReadAll(fd.get(), &b, 1, Deadline::In(absl::Seconds(5)), nullptr, "shed").ok())
        << "a shed connection is closed without data";
  }
  absl::StatusOr<Fd> served =
      ConnectTcp("127.0.0.1", port, Deadline::In(absl::Seconds(5)), nullptr);
  ASSERT_TRUE(served.ok()) << served.status();
  char k = 0;
  ASSERT_TRUE(ReadAll(served->get(), &k, 1, Deadline::In(absl::Seconds(10)), nullptr, "k").ok());
  EXPECT_EQ(k, 'k');
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  for (int fd : {to_child[0], to_child[1], from_child[0], from_child[1]}) close(fd);
}

}  // namespace
}  // namespace fabric::probes
