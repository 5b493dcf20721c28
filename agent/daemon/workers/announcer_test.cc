// The agent's announcer with real sockets: a "pod" namespace holds eth0, a "peer" namespace the
// other end of the veth and a capture socket. The test plays fabric-cni: it opens the pod's
// PacketLink inside the pod namespace and hands it over with SendHandoff.
#include "agent/daemon/workers/announcer.h"

#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/fabric/announce/frames.h"
#include "agent/fabric/announce/handoff.h"
#include "agent/fabric/announce/link.h"
#include "agent/fabric/announce/validate.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/netns.h"
#include "tests/testing/subprocess.h"

namespace fabric {
namespace {

using announce::Handoff;

constexpr char kIp[] = "/usr/sbin/ip";

class AnnouncerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root for network namespaces";
    testing::VethPairSpec spec;
    spec.prefix = "fab-an";
    spec.pod_mac = "02:00:00:00:0a:01";
    spec.pod_cidr = "10.77.0.2/24";
    spec.peer_cidr = "10.77.0.1/24";
    auto pair = testing::VethPair::Create(spec);
    ASSERT_TRUE(pair.ok()) << pair.status();
    pair_ = *std::move(pair);
    pod_ = pair_->pod();
    peer_ = pair_->peer();
    dir_ = testing::MakeTempDir("announcer");
    socket_ = dir_ + "/announce.sock";
  }

  void TearDown() override {
    announcer_.reset();
    if (capture_ >= 0) close(capture_);
    pair_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  void Sh(const std::vector<std::string>& cmd) {
    auto r = testing::Run(cmd, absl::Seconds(30));
    ASSERT_TRUE(r.ok() && r->status == 0) << cmd[3] << ": " << (r.ok() ? r->err : "");
  }

  void StartAnnouncer(absl::Duration hold = absl::Minutes(10)) {
    AnnouncerOptions o;
    o.socket = socket_;
    o.hold = hold;
    auto a = Announcer::Start(o);
    ASSERT_TRUE(a.ok()) << a.status();
    announcer_ = *std::move(a);
  }

  // A capture socket on the peer's end, for ARP.
  void StartCapture() {
    auto in = announce::ScopedNetns::Enter("/var/run/netns/" + peer_);
    ASSERT_TRUE(in.ok()) << in.status();
    capture_ = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK, htons(ETH_P_ARP));
    ASSERT_GE(capture_, 0) << strerror(errno);
    sockaddr_ll sll{};
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(ETH_P_ARP);
    sll.sll_ifindex = static_cast<int>(if_nametoindex("peer0"));
    ASSERT_GT(sll.sll_ifindex, 0);
    ASSERT_EQ(bind(capture_, reinterpret_cast<sockaddr*>(&sll), sizeof(sll)), 0);
  }

  // Gratuitous ARPs for 10.77.0.2 seen within `window`.
  int CountGarps(absl::Duration window) {
    int n = 0;
    const absl::Time end = absl::Now() + window;
    while (absl::Now() < end) {
      pollfd p{capture_, POLLIN, 0};
      int left = static_cast<int>(absl::ToInt64Milliseconds(end - absl::Now()));
      if (poll(&p, 1, std::max(left, 1)) <= 0) continue;
      uint8_t buf[2048];
      ssize_t len = recv(capture_, buf, sizeof(buf), 0);
      if (len <= 0) continue;
      auto arp = announce::ParseArp(
          std::string_view(reinterpret_cast<const char*>(buf), static_cast<size_t>(len)));
      if (arp.ok() && arp->sender_ip.s_addr == inet_addr("10.77.0.2") &&
          arp->target_ip.s_addr == arp->sender_ip.s_addr) {
        ++n;
      }
    }
    return n;
  }

  // Every ARP frame within `window` that names `ip` as sender or target (bounded count).
  int CountArpFor(const char* ip, absl::Duration window) {
    int n = 0;
    const absl::Time end = absl::Now() + window;
    while (absl::Now() < end && n < 1000) {
      pollfd p{capture_, POLLIN, 0};
      int left = static_cast<int>(absl::ToInt64Milliseconds(end - absl::Now()));
      if (poll(&p, 1, std::max(left, 1)) <= 0) continue;
      uint8_t buf[2048];
      ssize_t len = recv(capture_, buf, sizeof(buf), 0);
      if (len <= 0) continue;
      auto arp = announce::ParseArp(
          std::string_view(reinterpret_cast<const char*>(buf), static_cast<size_t>(len)));
      if (arp.ok() &&
          (arp->sender_ip.s_addr == inet_addr(ip) || arp->target_ip.s_addr == inet_addr(ip))) {
        ++n;
      }
    }
    return n;
  }

  // The Announce RPC as the agent runs it in its own namespace (played by the pod's).
  absl::StatusOr<std::vector<v1::Announcement>> AnnounceInPod(const v1::AnnounceRequest& req) {
    absl::StatusOr<std::vector<v1::Announcement>> got;
    std::thread t([&] {
      auto in = announce::ScopedNetns::Enter("/var/run/netns/" + pod_);
      got = in.ok() ? announcer_->Announce(req) : in.status();
    });
    t.join();
    return got;
  }

  // What fabric-cni does: open the link inside the pod, describe the target, hand it over.
  absl::Status HandOff(const std::string& container, announce::Plan plan) {
    auto in = announce::ScopedNetns::Enter("/var/run/netns/" + pod_);
    if (!in.ok()) return in.status();
    auto target = announce::DescribeInterface("eth0");
    if (!target.ok()) return target.status();
    auto link = announce::PacketLink::Open(target->ifindex);
    if (!link.ok()) return link.status();
    in->reset();
    Handoff h;
    h.container_id = container;
    h.netns = "/var/run/netns/" + pod_;
    h.target = *target;
    h.plan = plan;
    h.start = announce::MonotonicNow();
    h.first_done = true;
    std::vector<int> fds = {(*link)->packet_fd()};
    if ((*link)->netlink_fd() >= 0) fds.push_back((*link)->netlink_fd());
    return announce::SendHandoff(socket_, h, fds, absl::Seconds(2));
  }

  static announce::Plan FastPlan(int repeats, absl::Duration interval) {
    announce::Plan p;
    p.schedule.fast_count = repeats;
    p.schedule.fast_interval = interval;
    p.schedule.tail.clear();
    p.prime_gateway = false;
    return p;
  }

  v1::Announcement Only(const std::string& container) {
    auto list = announcer_->List(container);
    EXPECT_EQ(list.size(), 1u);
    return list.empty() ? v1::Announcement() : list[0];
  }

  std::unique_ptr<testing::VethPair> pair_;
  std::string pod_, peer_, dir_, socket_;
  int capture_ = -1;
  std::unique_ptr<Announcer> announcer_;
};

TEST_F(AnnouncerTest, RunsTheRepeatsOfAHandOffAndHoldsTheInterface) {
  StartAnnouncer();
  StartCapture();
  ASSERT_TRUE(HandOff("c1", FastPlan(3, absl::Milliseconds(50))).ok());
  // first_done: the plugin sent offset 0, the agent sends the 3 repeats.
  EXPECT_EQ(CountGarps(absl::Milliseconds(600)), 3);
  v1::Announcement a = Only("c1");
  EXPECT_EQ(a.state(), v1::Announcement::DONE);
  EXPECT_EQ(a.arp_sent(), 3u);
  EXPECT_EQ(a.ifname(), "eth0");
  EXPECT_EQ(a.mac(), "02:00:00:00:0a:01");
  EXPECT_THAT(a.addresses(), ::testing::ElementsAre("10.77.0.2/24"));

  // Held: the agent re-announces without entering the pod's namespace.
  v1::AnnounceRequest req;
  req.set_container_id("c1");
  auto again = announcer_->Announce(req);
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_EQ(again->size(), 1u);
  EXPECT_GE((*again)[0].arp_sent(), 1u);              // answered after the first round
  EXPECT_EQ(CountGarps(absl::Milliseconds(600)), 4);  // offset 0 again, then 3 repeats
}

TEST_F(AnnouncerTest, CancelStopsPendingRepeats) {
  StartAnnouncer();
  StartCapture();
  ASSERT_TRUE(HandOff("c2", FastPlan(20, absl::Milliseconds(100))).ok());
  EXPECT_GE(CountGarps(absl::Milliseconds(250)), 1);
  Handoff cancel;
  cancel.kind = Handoff::Kind::kCancel;
  cancel.container_id = "c2";
  ASSERT_TRUE(announce::SendHandoff(socket_, cancel, {}, absl::Seconds(2)).ok());
  EXPECT_EQ(CountGarps(absl::Milliseconds(500)), 0);
  v1::Announcement cancelled = Only("c2");
  EXPECT_EQ(cancelled.state(), v1::Announcement::CANCELLED);
  EXPECT_GE(cancelled.arp_sent(), 1u);  // what was sent before the cancel is still reported
  v1::AnnounceRequest req;
  req.set_container_id("c2");
  EXPECT_EQ(announcer_->Announce(req).status().code(), absl::StatusCode::kFailedPrecondition);
  req.set_container_id("nobody");
  EXPECT_EQ(announcer_->Announce(req).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(AnnouncerTest, PodGoingAwayMidScheduleReleasesTheInterface) {
  StartAnnouncer();
  ASSERT_TRUE(HandOff("c3", FastPlan(50, absl::Milliseconds(100))).ok());
  Sh({kIp, "-n", pod_, "link", "del", "eth0"});
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        auto l = announcer_->List("c3");
        return l.size() == 1 && l[0].state() == v1::Announcement::GONE;
      },
      absl::Seconds(5)));
  // And the namespace itself can go: nothing of it is held any more.
  Sh({kIp, "netns", "del", pod_});
  pair_->ForgetPod();
}

TEST_F(AnnouncerTest, HoldTimeReleasesFinishedInterfaces) {
  StartAnnouncer(absl::Milliseconds(200));
  ASSERT_TRUE(HandOff("c4", FastPlan(1, absl::Milliseconds(10))).ok());
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        auto l = announcer_->List("c4");
        return l.size() == 1 && l[0].state() == v1::Announcement::DONE &&
               l[0].last_error() == "hold time over";
      },
      absl::Seconds(5)));
}

TEST_F(AnnouncerTest, RefusesMalformedAndOversizedHandOffs) {
  StartAnnouncer();
  // Raw bytes that are not a hand-off: the agent answers with an error and keeps serving.
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, socket_.data(), socket_.size());
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const char junk[] = "{\"v\":1,\"kind\":\"announce\",\"containerId\":\"x\",\"target\":7}";
  ASSERT_GT(send(fd, junk, sizeof(junk) - 1, 0), 0);
  char reply[512];
  pollfd p{fd, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 2000), 1);
  ssize_t n = recv(fd, reply, sizeof(reply), 0);
  ASSERT_GT(n, 0);
  EXPECT_THAT(std::string(reply, static_cast<size_t>(n)), ::testing::HasSubstr("\"ok\":false"));
  close(fd);
  // An announce without the socket is refused too.
  Handoff h;
  h.container_id = "c5";
  h.target.ifname = "eth0";
  h.target.ifindex = 2;
  auto s = announce::SendHandoff(socket_, h, {}, absl::Seconds(2));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("without a packet socket"));
  EXPECT_TRUE(announcer_->List("").empty());
}

TEST_F(AnnouncerTest, RefusesHandOffsFromOtherUsers) {
  StartAnnouncer();
  // Let the other user reach the peer check.
  ASSERT_EQ(chmod(dir_.c_str(), 0755), 0);
  ASSERT_EQ(chmod(socket_.c_str(), 0666), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0) _exit(10);
    Handoff cancel;
    cancel.kind = Handoff::Kind::kCancel;
    cancel.container_id = "x";
    auto s = announce::SendHandoff(socket_, cancel, {}, absl::Seconds(2));
    std::fprintf(stderr, "other user: %s\n", s.ToString().c_str());
    _exit(s.code() == absl::StatusCode::kFailedPrecondition &&
                  std::string(s.message()).find("may not hand off") != std::string::npos
              ? 0
              : 11);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST_F(AnnouncerTest, AnnouncesAnInterfaceOfItsOwnNamespace) {
  StartAnnouncer();
  StartCapture();
  // The RPC thread's namespace is the agent's: here the pod namespace plays the host.
  absl::StatusOr<std::vector<v1::Announcement>> got;
  std::thread t([&] {
    auto in = announce::ScopedNetns::Enter("/var/run/netns/" + pod_);
    if (!in.ok()) {
      got = in.status();
      return;
    }
    v1::AnnounceRequest req;
    req.set_ifname("eth0");
    got = announcer_->Announce(req);
  });
  t.join();
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].netns(), "host");
  EXPECT_GE(CountGarps(absl::Milliseconds(300)), 1);
  v1::AnnounceRequest bad;
  bad.set_ifname("nosuch0");
  EXPECT_EQ(announcer_->Announce(bad).status().code(), absl::StatusCode::kNotFound);
}

// The spoof of issue 12: an address that is not the interface's own must not be announced (it
// would poison the segment's ARP caches with this host's MAC), and nothing may go out.
TEST_F(AnnouncerTest, RefusesAForeignAddressAndSendsNothing) {
  StartAnnouncer();
  StartCapture();
  v1::AnnounceRequest spoof;
  spoof.set_ifname("eth0");
  spoof.add_ips("10.77.0.254");
  auto got = AnnounceInPod(spoof);
  ASSERT_EQ(got.status().code(), absl::StatusCode::kPermissionDenied) << got.status();
  EXPECT_EQ(got.status().message(),
            "10.77.0.254 is not configured on eth0: only addresses this host owns are announced");
  // One own address among them changes nothing: the request is refused whole.
  spoof.add_ips("10.77.0.2");
  EXPECT_EQ(AnnounceInPod(spoof).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(CountArpFor("10.77.0.254", absl::Milliseconds(500)), 0);
  EXPECT_EQ(CountGarps(absl::Milliseconds(100)), 0);
  EXPECT_TRUE(announcer_->List("").empty());

  // The capture works: the interface's own address, named, is announced.
  v1::AnnounceRequest own;
  own.set_ifname("eth0");
  own.add_ips("10.77.0.2");
  got = AnnounceInPod(own);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_THAT((*got)[0].addresses(), ::testing::ElementsAre("10.77.0.2/24"));
  EXPECT_GE(CountGarps(absl::Milliseconds(300)), 1);
}

TEST_F(AnnouncerTest, RefusesBadAddressesAndNamesBeforeSendingAnything) {
  StartAnnouncer();
  StartCapture();
  struct Case {
    std::string ifname;
    std::vector<std::string> ips;
    absl::StatusCode code;
    std::string message;  // substring
  };
  const std::vector<std::string> too_many(announce::kMaxAnnounceAddresses + 1, "10.77.0.2");
  const Case cases[] = {
      {"eth0", too_many, absl::StatusCode::kResourceExhausted,
       "ips: 33 addresses; at most 32 per request"},
      {"eth0", {"224.0.0.1"}, absl::StatusCode::kInvalidArgument, "multicast"},
      {"eth0", {"255.255.255.255"}, absl::StatusCode::kInvalidArgument, "broadcast"},
      {"eth0", {"10.77.0.255"}, absl::StatusCode::kInvalidArgument, "broadcast address of eth0"},
      {"eth0", {"0.0.0.0"}, absl::StatusCode::kInvalidArgument, "unspecified"},
      {"eth0", {"127.0.0.1"}, absl::StatusCode::kInvalidArgument, "loopback"},
      {"eth0", {"::"}, absl::StatusCode::kInvalidArgument, "unspecified"},
      {"eth0", {"ff02::1"}, absl::StatusCode::kInvalidArgument, "multicast"},
      {"eth0", {"fd00::77"}, absl::StatusCode::kPermissionDenied, "not configured on eth0"},
      {"eth0", {std::string(4 << 20, '1')}, absl::StatusCode::kInvalidArgument, "bytes)"},
      {std::string("eth0\0x", 6), {}, absl::StatusCode::kInvalidArgument, "NUL"},
      {"abcdefghijklmnop", {}, absl::StatusCode::kInvalidArgument, "16 bytes"},
      {"eth0:1", {}, absl::StatusCode::kInvalidArgument, "':'"},
      {"..", {}, absl::StatusCode::kInvalidArgument, "not interface names"},
  };
  for (const Case& c : cases) {
    v1::AnnounceRequest req;
    req.set_ifname(c.ifname);
    for (const std::string& ip : c.ips) req.add_ips(ip);
    auto got = AnnounceInPod(req);
    ASSERT_FALSE(got.ok()) << c.message;
    EXPECT_EQ(got.status().code(), c.code) << got.status();
    EXPECT_THAT(std::string(got.status().message()), ::testing::HasSubstr(c.message));
    EXPECT_LT(got.status().message().size(), 200u) << "input echoed as an excerpt";
  }
  // A held pod's interface is named by the same rule.
  v1::AnnounceRequest pod;
  pod.set_container_id("abc");
  pod.set_ifname("a/b");
  EXPECT_EQ(announcer_->Announce(pod).status().code(), absl::StatusCode::kInvalidArgument);
  pod.set_ifname("");
  pod.set_container_id(std::string(1 << 20, 'c'));
  auto missing = announcer_->Announce(pod);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_LT(missing.status().message().size(), 200u);
  EXPECT_EQ(CountGarps(absl::Milliseconds(300)), 0);
  EXPECT_TRUE(announcer_->List("").empty());
}

}  // namespace
}  // namespace fabric
