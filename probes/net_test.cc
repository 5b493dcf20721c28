#include "probes/net.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

#include "probes/wire.h"

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

}  // namespace
}  // namespace fabric::probes
