#include "agent/fabric/announce/handoff.h"

#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/subprocess.h"

namespace fabric::announce {
namespace {

using ::testing::HasSubstr;

Handoff Sample() {
  Handoff h;
  h.container_id = "abc123";
  h.netns = "/var/run/netns/pod";
  h.target.ifname = "eth0";
  h.target.ifindex = 2;
  h.target.mac = {0x02, 0, 0, 0, 0x0a, 0x01};
  Address v4;
  v4.family = AF_INET;
  inet_pton(AF_INET, "10.1.2.3", &v4.addr);
  v4.prefix_len = 24;
  v4.has_gateway = true;
  inet_pton(AF_INET, "10.1.2.1", &v4.gateway);
  Address v6;
  v6.family = AF_INET6;
  inet_pton(AF_INET6, "fd00::5", &v6.addr);
  v6.prefix_len = 64;
  h.target.addresses = {v4, v6};
  h.plan.schedule.fast_count = 2;
  h.plan.schedule.fast_interval = absl::Milliseconds(50);
  h.plan.schedule.tail = {absl::Seconds(2)};
  h.plan.arp_reply_form = true;
  h.plan.conflict_probe = true;
  h.start = absl::FromUnixNanos(987654321);
  return h;
}

TEST(HandoffSocketBeside, DefaultDeploymentKeepsItsPathOthersGetTheirOwn) {
  // fabric-cni's default agentSocket: the default agent must keep serving there.
  EXPECT_EQ(HandoffSocketBeside("/run/fabric-agent/agent.sock"), kDefaultHandoffSocket);
  EXPECT_EQ(HandoffSocketBeside("/run/x/b.sock"), "/run/x/b.announce.sock");
  EXPECT_EQ(HandoffSocketBeside("/run/x/b"), "/run/x/b.announce.sock");
  EXPECT_EQ(HandoffSocketBeside("/run/x/announce.sock"), "/run/x/announce.announce.sock");
  EXPECT_EQ(HandoffSocketBeside("/run/x/.sock"), "/run/x/.sock.announce.sock");
  EXPECT_EQ(HandoffSocketBeside("agent.sock"), "announce.sock");
  EXPECT_EQ(HandoffSocketBeside("c.sock"), "c.announce.sock");
}

TEST(HandoffCodec, RoundTripsEveryField) {
  const Handoff h = Sample();
  auto back = DecodeHandoff(EncodeHandoff(h));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->kind, Handoff::Kind::kAnnounce);
  EXPECT_EQ(back->container_id, "abc123");
  EXPECT_EQ(back->netns, "/var/run/netns/pod");
  EXPECT_EQ(back->target.ifname, "eth0");
  EXPECT_EQ(back->target.ifindex, 2);
  EXPECT_EQ(back->target.mac, h.target.mac);
  ASSERT_EQ(back->target.addresses.size(), 2u);
  EXPECT_EQ(back->target.addresses[0].ToString(), "10.1.2.3/24 via 10.1.2.1");
  EXPECT_EQ(back->target.addresses[1].family, AF_INET6);
  EXPECT_EQ(back->target.addresses[1].prefix_len, 64);
  EXPECT_FALSE(back->target.addresses[1].has_gateway);
  EXPECT_EQ(back->plan.schedule.Offsets(), h.plan.schedule.Offsets());
  EXPECT_TRUE(back->plan.arp_reply_form);
  EXPECT_TRUE(back->plan.conflict_probe);
  EXPECT_EQ(back->start, h.start);
  EXPECT_TRUE(back->first_done);
  EXPECT_EQ(EncodeHandoff(*back), EncodeHandoff(h));
}

TEST(HandoffCodec, CancelNeedsOnlyTheContainer) {
  auto c = DecodeHandoff(R"({"v":1,"kind":"cancel","containerId":"abc"})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->kind, Handoff::Kind::kCancel);
  EXPECT_EQ(c->container_id, "abc");
  EXPECT_TRUE(c->target.ifname.empty());  // every interface of the container
  Handoff one;
  one.kind = Handoff::Kind::kCancel;
  one.container_id = "abc";
  one.target.ifname = "net1";
  auto back = DecodeHandoff(EncodeHandoff(one));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->target.ifname, "net1");
}

TEST(HandoffCodec, RefusesDeepNestingBeforeParsing) {
  std::string deep = R"({"v":1,"kind":"cancel","containerId":"a","x":)" + std::string(20000, '[') +
                     std::string(20000, ']') + "}";
  EXPECT_THAT(std::string(DecodeHandoff(deep).status().message()), HasSubstr("nested too deeply"));
  // Brackets inside strings do not count.
  auto ok = DecodeHandoff(R"({"v":1,"kind":"cancel","containerId":"[[[[[[[[[[[[[[[[[[[[[["})");
  EXPECT_TRUE(ok.ok()) << ok.status();
}

// Each case breaks one thing in a valid message; the error names it.
TEST(HandoffCodec, RejectsMalformedMessagesNamingTheField) {
  const std::string good = EncodeHandoff(Sample());
  struct Case {
    std::string from, to, want;
  };
  const Case cases[] = {
      {R"("v":1)", R"("v":2)", "version 2"},
      {R"("v":1)", R"("v":"1")", "v: not an integer"},
      {R"("kind":"announce")", R"("kind":"explode")", "unknown kind"},
      {R"("containerId":"abc123")", R"("containerId":"")", "containerId: empty"},
      {R"("containerId":"abc123")", R"("containerId":7)", "containerId: not a string"},
      {R"("ifname":"eth0")", R"("ifname":"a-name-far-too-long")", "target.ifname"},
      {R"("ifindex":2)", R"("ifindex":0)", "ifindex: 0 outside"},
      // Found by handoff_fuzz: a missing ifindex must not default to 0 (which then does not
      // decode again).
      {R"("ifindex":2)", R"("fniidex":2)", "ifindex: missing"},
      {R"("prefix":24)", R"("pref-x":24)", "prefix: missing"},
      {R"("mac":"02:00:00:00:0a:01")", R"("mac":"02:00:00:00:0a")", "target.mac"},
      {R"("mac":"02:00:00:00:0a:01")", R"("mac":"02:00:00:00:0a:zz")", "target.mac"},
      {R"("ip":"10.1.2.3")", R"("ip":"10.1.2.300")", "not an IP address"},
      {R"("prefix":24)", R"("prefix":33)", "prefix: 33 outside"},
      {R"("gateway":"10.1.2.1")", R"("gateway":"fd00::1")", "family"},
      {R"("fastCount":2)", R"("fastCount":1000)", "fastCount"},
      {R"("fastIntervalMs":50)", R"("fastIntervalMs":0)", "fastIntervalMs"},
      {R"("tailMs":[2000])", R"("tailMs":[-1])", "tailMs"},
      {R"("tailMs":[2000])", R"("tailMs":"soon")", "tailMs"},
      {R"("arpReply":true)", R"("arpReply":1)", "arpReply: not a boolean"},
      {R"("startNs":987654321)", R"("startNs":-5)", "startNs"},
  };
  for (const Case& c : cases) {
    ASSERT_THAT(good, HasSubstr(c.from));
    std::string bad = absl::StrReplaceAll(good, {{c.from, c.to}});
    auto h = DecodeHandoff(bad);
    EXPECT_FALSE(h.ok()) << bad;
    EXPECT_THAT(std::string(h.status().message()), HasSubstr(c.want)) << bad;
  }
  for (const char* junk : {"", "null", "[]", "{", "{\"v\":1}", "\xff\xfe",
                           "{\"v\":1,\"kind\":\"announce\",\"containerId\":\"a\"}"}) {
    EXPECT_FALSE(DecodeHandoff(junk).ok()) << junk;
  }
  // Too many addresses.
  std::string many =
      R"({"v":1,"kind":"announce","containerId":"a","target":{"ifname":"eth0","ifindex":2,"mac":"02:00:00:00:00:01","addresses":[)";
  for (int i = 0; i < 65; ++i)
    absl::StrAppend(&many, i ? "," : "", R"({"ip":"10.0.0.1","prefix":8})");
  absl::StrAppend(&many, R"(]},"plan":{}})");
  EXPECT_THAT(std::string(DecodeHandoff(many).status().message()), HasSubstr("too many"));
}

// A stand-in agent: accepts one connection, records the message and fds, answers `answer`
// (or nothing when empty).
class FakeAgent {
 public:
  explicit FakeAgent(const std::string& path, std::string answer) : path_(path) {
    fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.data(), path.size());
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(listen(fd_, 4), 0);
    thread_ = std::thread([this, answer] {
      int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) return;
      char buf[8192];
      alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int) * 4)];
      iovec iov{buf, sizeof(buf)};
      msghdr mh{};
      mh.msg_iov = &iov;
      mh.msg_iovlen = 1;
      mh.msg_control = ctl;
      mh.msg_controllen = sizeof(ctl);
      ssize_t n = recvmsg(c, &mh, MSG_CMSG_CLOEXEC);
      if (n > 0) message = std::string(buf, static_cast<size_t>(n));
      for (cmsghdr* cm = CMSG_FIRSTHDR(&mh); cm != nullptr; cm = CMSG_NXTHDR(&mh, cm)) {
        int count = static_cast<int>((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        for (int i = 0; i < count; ++i) {
          int fd;
          std::memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
          fds.push_back(fd);
        }
      }
      if (!answer.empty()) (void)send(c, answer.data(), answer.size(), MSG_NOSIGNAL);
      absl::SleepFor(absl::Milliseconds(answer.empty() ? 500 : 0));
      close(c);
    });
  }
  // After this, `message` and `fds` are final.
  void Join() {
    if (thread_.joinable()) thread_.join();
  }
  ~FakeAgent() {
    Join();
    for (int fd : fds) close(fd);
    close(fd_);
    unlink(path_.c_str());
  }
  std::string message;
  std::vector<int> fds;

 private:
  std::string path_;
  int fd_;
  std::thread thread_;
};

class SendHandoffTest : public ::testing::Test {
 protected:
  ~SendHandoffTest() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::string dir_ = testing::MakeTempDir("handoff");
  std::string sock_ = dir_ + "/announce.sock";
};

TEST_F(SendHandoffTest, AgentReceivesTheDecodableMessageWithTwoFds) {
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  std::string message;
  size_t nfds = 0;
  {
    FakeAgent agent(sock_, R"({"ok":true})");
    EXPECT_TRUE(SendHandoff(sock_, Sample(), {pipefd[0], pipefd[1]}, absl::Seconds(2)).ok());
    agent.Join();
    message = agent.message;
    nfds = agent.fds.size();
  }
  close(pipefd[0]);
  close(pipefd[1]);
  EXPECT_EQ(nfds, 2u);
  auto h = DecodeHandoff(message);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->container_id, "abc123");
}

TEST_F(SendHandoffTest, RefusalCarriesTheAgentsReason) {
  FakeAgent agent(sock_, R"({"ok":false,"error":"agent holds 4096 interfaces"})");
  auto s = SendHandoff(sock_, Sample(), {}, absl::Seconds(2));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("4096 interfaces"));
}

TEST_F(SendHandoffTest, MalformedAnswerIsAnError) {
  FakeAgent agent(sock_, "yes please");
  EXPECT_EQ(SendHandoff(sock_, Sample(), {}, absl::Seconds(2)).code(), absl::StatusCode::kInternal);
}

TEST_F(SendHandoffTest, SilentAgentTimesOutWithinTheBound) {
  FakeAgent agent(sock_, "");
  const absl::Time start = absl::Now();
  auto s = SendHandoff(sock_, Sample(), {}, absl::Milliseconds(100));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));  // a bound, not a speed target
}

TEST_F(SendHandoffTest, NoAgentIsUnavailable) {
  auto s = SendHandoff(dir_ + "/nobody.sock", Sample(), {}, absl::Seconds(1));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(s.message()), HasSubstr("nobody.sock"));
  EXPECT_EQ(SendHandoff(std::string(200, 'x'), Sample(), {}, absl::Seconds(1)).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace fabric::announce
