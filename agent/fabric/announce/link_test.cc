// The real kernel: two throwaway network namespaces joined by a veth pair. The near end
// announces through PacketLink; the far end captures with its own packet socket and answers as a
// gateway (or owner of a conflicting address) the way Linux does.
#include "agent/fabric/announce/link.h"

#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/fabric/announce/announce.h"
#include "agent/fabric/announce/frames.h"
#include "agent/fabric/announce/test_addresses.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/subprocess.h"

namespace fabric::announce {
namespace {

using ::testing::HasSubstr;

constexpr char kIp[] = "/usr/sbin/ip";
const Mac kNearMac = {0x02, 0x00, 0x00, 0x00, 0x0a, 0x01};
const Mac kFarMac = {0x02, 0x00, 0x00, 0x00, 0x0b, 0x01};
const Mac kMacvlanMac = {0x02, 0x00, 0x00, 0x00, 0x0c, 0x01};

Plan ShortPlan() {
  Plan p;
  p.schedule.fast_count = 1;
  // Long enough that the first step is never already past the repeat (overdue rounds collapse
  // into one send by design), even under ASan in an emulated VM.
  p.schedule.fast_interval = absl::Milliseconds(300);
  p.schedule.tail = {};
  p.prime_gateway = false;
  return p;
}

// A packet socket on the far end: every frame on one interface, VLAN tags put back inline from
// the kernel's metadata (veth offloads the tag, as tcpdump's libpcap also undoes).
class Capture {
 public:
  ~Capture() {
    if (fd_ >= 0) close(fd_);
  }
  // Opened inside `netns` (then left), bound to `ifname` there.
  static std::unique_ptr<Capture> Open(const std::string& netns, const std::string& ifname) {
    auto ns = ScopedNetns::Enter("/run/netns/" + netns);
    EXPECT_TRUE(ns.ok()) << ns.status();
    if (!ns.ok()) return nullptr;
    auto c = std::make_unique<Capture>();
    c->fd_ = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, htons(ETH_P_ALL));
    EXPECT_GE(c->fd_, 0) << std::strerror(errno);
    int one = 1;
    EXPECT_EQ(setsockopt(c->fd_, SOL_PACKET, PACKET_AUXDATA, &one, sizeof(one)), 0);
    sockaddr_ll sll{};
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(ETH_P_ALL);
    sll.sll_ifindex = static_cast<int>(if_nametoindex(ifname.c_str()));
    EXPECT_GT(sll.sll_ifindex, 0) << ifname;
    EXPECT_EQ(bind(c->fd_, reinterpret_cast<sockaddr*>(&sll), sizeof(sll)), 0)
        << std::strerror(errno);
    c->ifindex_ = sll.sll_ifindex;
    return c;
  }

  // Frames received until `done` holds for the list or `timeout` passes.
  std::vector<std::vector<uint8_t>> Collect(
      absl::Duration timeout,
      const std::function<bool(const std::vector<std::vector<uint8_t>>&)>& done) {
    const absl::Time deadline = absl::Now() + timeout;
    while (!done(frames_) && absl::Now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      poll(&p, 1, 20);
      ReadAll();
    }
    return frames_;
  }

 private:
  void ReadAll() {
    for (;;) {
      uint8_t buf[2048];
      alignas(cmsghdr) char control[CMSG_SPACE(sizeof(tpacket_auxdata))];
      sockaddr_ll from{};
      iovec iov{buf, sizeof(buf)};
      msghdr msg{};
      msg.msg_name = &from;
      msg.msg_namelen = sizeof(from);
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control;
      msg.msg_controllen = sizeof(control);
      ssize_t n = recvmsg(fd_, &msg, MSG_DONTWAIT);
      if (n <= 0) return;
      if (from.sll_ifindex != ifindex_ || from.sll_pkttype == PACKET_OUTGOING) continue;
      std::vector<uint8_t> f(buf, buf + n);
      for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_PACKET || c->cmsg_type != PACKET_AUXDATA) continue;
        tpacket_auxdata aux;
        std::memcpy(&aux, CMSG_DATA(c), sizeof(aux));
        if ((aux.tp_status & TP_STATUS_VLAN_VALID) != 0 && f.size() >= 12) {
          const uint16_t tpid =
              (aux.tp_status & TP_STATUS_VLAN_TPID_VALID) ? aux.tp_vlan_tpid : 0x8100;
          const uint16_t tci = aux.tp_vlan_tci;
          f.insert(f.begin() + 12, {static_cast<uint8_t>(tpid >> 8), static_cast<uint8_t>(tpid),
                                    static_cast<uint8_t>(tci >> 8), static_cast<uint8_t>(tci)});
        }
      }
      frames_.push_back(std::move(f));
    }
  }

  int fd_ = -1;
  int ifindex_ = 0;
  std::vector<std::vector<uint8_t>> frames_;
};

bool FromMac(const std::vector<uint8_t>& f, const Mac& mac) {
  return f.size() >= 12 && std::memcmp(f.data() + 6, mac.data(), 6) == 0;
}

class LinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root for network namespaces";
    static std::atomic<int> counter{0};
    const std::string base = absl::StrCat("fabann-", getpid(), "-", counter++);
    near_ = base + "-n";
    far_ = base + "-f";
    ASSERT_NO_FATAL_FAILURE(Ip({"netns", "add", near_}));
    made_near_ = true;
    ASSERT_NO_FATAL_FAILURE(Ip({"netns", "add", far_}));
    made_far_ = true;
    ASSERT_NO_FATAL_FAILURE(
        Ip({"link", "add", "va", "netns", near_, "address", "02:00:00:00:0a:01", "type", "veth",
            "peer", "name", "vb", "netns", far_, "address", "02:00:00:00:0b:01"}));
    ASSERT_NO_FATAL_FAILURE(Near({"link", "set", "va", "up"}));
    ASSERT_NO_FATAL_FAILURE(Far({"link", "set", "vb", "up"}));
    ASSERT_NO_FATAL_FAILURE(Near({"addr", "add", "10.77.0.2/24", "dev", "va"}));
    ASSERT_NO_FATAL_FAILURE(Near({"addr", "add", "2001:db8:77::2/64", "dev", "va", "nodad"}));
    ASSERT_NO_FATAL_FAILURE(Far({"addr", "add", "10.77.0.1/24", "dev", "vb"}));
    ASSERT_NO_FATAL_FAILURE(Far({"addr", "add", "2001:db8:77::1/64", "dev", "vb", "nodad"}));
  }
  void TearDown() override {
    // Deleting a namespace deletes its interfaces (and the veth peer with them).
    if (made_near_) (void)fabric::testing::Run({kIp, "netns", "del", near_});
    if (made_far_) (void)fabric::testing::Run({kIp, "netns", "del", far_});
  }

  std::string Ip(std::vector<std::string> args) {
    args.insert(args.begin(), kIp);
    auto r = fabric::testing::Run(args, absl::Seconds(20));
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return "";
    EXPECT_EQ(r->status, 0) << absl::StrJoin(args, " ") << ": " << r->err;
    return r->out;
  }
  std::string Near(std::vector<std::string> args) {
    args.insert(args.begin(), {"-n", near_});
    return Ip(std::move(args));
  }
  std::string Far(std::vector<std::string> args) {
    args.insert(args.begin(), {"-n", far_});
    return Ip(std::move(args));
  }

  // DescribeInterface and PacketLink::Open inside the near namespace; the test thread is back in
  // its own namespace afterwards (the sockets stay bound where they were made).
  void OpenNear(const std::string& ifname, Target* target, std::unique_ptr<PacketLink>* link) {
    auto ns = ScopedNetns::Enter("/run/netns/" + near_);
    ASSERT_TRUE(ns.ok()) << ns.status();
    auto t = DescribeInterface(ifname);
    ASSERT_TRUE(t.ok()) << t.status();
    auto l = PacketLink::Open(t->ifindex);
    ASSERT_TRUE(l.ok()) << l.status();
    *target = *t;
    *link = std::move(*l);
  }

  Report Announce(Target target, const Plan& plan, std::unique_ptr<Link> link) {
    Job job(std::move(target), plan, std::move(link), MonotonicNow());
    return RunToCompletion(job);
  }

  std::string near_, far_;
  bool made_near_ = false, made_far_ = false;
};

TEST_F(LinkTest, DescribeInterfaceFindsMacAndGlobalAddresses) {
  Target t;
  std::unique_ptr<PacketLink> link;
  ASSERT_NO_FATAL_FAILURE(OpenNear("va", &t, &link));
  EXPECT_EQ(t.ifname, "va");
  EXPECT_GT(t.ifindex, 0);
  EXPECT_EQ(t.mac, kNearMac);
  EXPECT_EQ(t.parent_ifindex, 0) << "a veth's IFLA_LINK is its peer, not a lower device";
  std::vector<std::string> addrs;
  for (const Address& a : t.addresses) addrs.push_back(a.ToString());
  // No fe80:: (link scope): only what can be announced to the fabric.
  EXPECT_THAT(addrs, ::testing::UnorderedElementsAre("10.77.0.2/24", "2001:db8:77::2/64"));
  EXPECT_EQ(link->ifindex(), t.ifindex);
  EXPECT_EQ(link->ifname(), "va");
  EXPECT_GE(link->packet_fd(), 0);
  EXPECT_GE(link->netlink_fd(), 0);
}

TEST_F(LinkTest, FarEndReceivesExactArpAndNaFrames) {
  Target t;
  std::unique_ptr<PacketLink> link;
  ASSERT_NO_FATAL_FAILURE(OpenNear("va", &t, &link));
  auto cap = Capture::Open(far_, "vb");
  ASSERT_NE(cap, nullptr);
  Report r = Announce(t, ShortPlan(), std::move(link));
  EXPECT_EQ(r.arp_sent, 2);
  EXPECT_EQ(r.na_sent, 2);
  EXPECT_EQ(r.send_errors, 0) << r.last_error;

  const std::vector<uint8_t> want_arp = {
      0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0x00, 0x00, 0x00, 0x0a,
      0x01, 0x08, 0x06, 0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01,  //
      0x02, 0x00, 0x00, 0x00, 0x0a, 0x01, 0x0a, 0x4d, 0x00, 0x02,        // 10.77.0.2
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x4d, 0x00, 0x02,        //
      0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,
      0,    0,    0,    0,    0,    0,    0,
  };
  const std::vector<uint8_t> want_na = {
      0x33, 0x33, 0x00, 0x00, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x0a,
      0x01, 0x86, 0xdd, 0x60, 0x00, 0x00, 0x00, 0x00, 0x20, 0x3a, 0xff,  //
      0x20, 0x01, 0x0d, 0xb8, 0x00, 0x77, 0,    0,    0,    0,    0,
      0,    0,    0,    0,    0x02,  // src
      0xff, 0x02, 0,    0,    0,    0,    0,    0,    0,    0,    0,
      0,    0,    0,    0,    0x01,                    // ff02::1
      0x88, 0x00, 0xee, 0x3a, 0x20, 0x00, 0x00, 0x00,  //
      0x20, 0x01, 0x0d, 0xb8, 0x00, 0x77, 0,    0,    0,    0,    0,
      0,    0,    0,    0,    0x02,                    // target
      0x02, 0x01, 0x02, 0x00, 0x00, 0x00, 0x0a, 0x01,  // TLLA
  };
  auto count = [&](const std::vector<std::vector<uint8_t>>& fs, const std::vector<uint8_t>& w) {
    int n = 0;
    for (const auto& f : fs) n += f == w ? 1 : 0;
    return n;
  };
  auto frames = cap->Collect(absl::Seconds(3), [&](const auto& fs) {
    return count(fs, want_arp) >= 2 && count(fs, want_na) >= 2;
  });
  EXPECT_EQ(count(frames, want_arp), 2);
  EXPECT_EQ(count(frames, want_na), 2);
}

TEST_F(LinkTest, PeerWithAStaleEntryLearnsTheNewMac) {
  ASSERT_NO_FATAL_FAILURE(Far({"neigh", "replace", "10.77.0.2", "dev", "vb", "lladdr",
                               "02:00:00:00:00:01", "nud", "stale"}));
  ASSERT_NO_FATAL_FAILURE(Far({"-6", "neigh", "replace", "2001:db8:77::2", "dev", "vb", "lladdr",
                               "02:00:00:00:00:01", "nud", "stale"}));
  ASSERT_THAT(Far({"neigh", "show", "10.77.0.2", "dev", "vb"}), HasSubstr("02:00:00:00:00:01"));
  Target t;
  std::unique_ptr<PacketLink> link;
  ASSERT_NO_FATAL_FAILURE(OpenNear("va", &t, &link));
  Report r = Announce(t, ShortPlan(), std::move(link));
  EXPECT_EQ(r.send_errors, 0) << r.last_error;
  EXPECT_TRUE(fabric::testing::WaitFor(
      [&] {
        return absl::StrContains(Far({"neigh", "show", "10.77.0.2", "dev", "vb"}),
                                 "02:00:00:00:0a:01") &&
               absl::StrContains(Far({"-6", "neigh", "show", "2001:db8:77::2", "dev", "vb"}),
                                 "02:00:00:00:0a:01");
      },
      absl::Seconds(3)))
      << Far({"neigh", "show", "dev", "vb"});
}

TEST_F(LinkTest, NaIsHeldBackWhileDadRuns) {
  Target t;
  std::unique_ptr<PacketLink> link;
  ASSERT_NO_FATAL_FAILURE(OpenNear("va", &t, &link));
  // Capture first: the kernel may send its DAD solicitation right after the address is added.
  auto cap = Capture::Open(far_, "vb");
  ASSERT_NE(cap, nullptr);
  ASSERT_NO_FATAL_FAILURE(Near({"addr", "add", "2001:db8:77::3/64", "dev", "va"}));  // DAD on
  const Address fresh = V6("2001:db8:77::3");
  auto tentative = link->Tentative(fresh.addr);
  ASSERT_TRUE(tentative.ok()) << tentative.status();
  ASSERT_TRUE(*tentative) << Near({"addr", "show", "dev", "va"});
  PacketLink* raw = link.get();
  t.addresses = {fresh};
  Job job(t, ShortPlan(), std::move(link), MonotonicNow());
  const absl::Time began = MonotonicNow();
  Report r = RunToCompletion(job);
  const absl::Duration took = MonotonicNow() - began;
  // Both fixed rounds (0 and 20 ms) fell inside DAD; the NA went out at the first poll after it.
  EXPECT_EQ(r.na_sent, 1) << r.last_error;
  EXPECT_GE(took, absl::Milliseconds(900));  // DAD takes at least one retransmit timer (1 s)
  EXPECT_LT(took, absl::Seconds(3) + absl::Milliseconds(500));
  auto now_tentative = raw->Tentative(fresh.addr);
  ASSERT_TRUE(now_tentative.ok());
  EXPECT_FALSE(*now_tentative);
  // Far end: the kernel's DAD solicitation (from ::) comes first, our NA after it.
  int dad_ns_at = -1, na_at = -1;
  auto frames = cap->Collect(absl::Seconds(2), [&](const auto& fs) {
    for (size_t i = 0; i < fs.size(); ++i) {
      auto nd = ParseNd(AsView(fs[i]));
      if (!nd.ok() || std::memcmp(&nd->target, &fresh.addr, 16) != 0) continue;
      if (nd->type == kNeighborSolicitation && dad_ns_at < 0) dad_ns_at = static_cast<int>(i);
      if (nd->type == kNeighborAdvertisement && FromMac(fs[i], kNearMac) && na_at < 0) {
        na_at = static_cast<int>(i);
      }
    }
    return na_at >= 0;
  });
  ASSERT_GE(na_at, 0);
  EXPECT_GE(dad_ns_at, 0);
  EXPECT_LT(dad_ns_at, na_at);
}

TEST_F(LinkTest, GatewayPrimingReachable) {
  Target t;
  std::unique_ptr<PacketLink> link;
  ASSERT_NO_FATAL_FAILURE(OpenNear("va", &t, &link));
  t.addresses = {V4("10.77.0.2", "10.77.0.1"), V6("2001:db8:77::2", "2001:db8:77::1")};
  Plan plan = ShortPlan();
  plan.prime_gateway = true;
  Report r = Announce(t, plan, std::move(link));
  ASSERT_EQ(r.gateways.size(), 2u) << r.last_error;
  for (const Report::Gateway& g : r.gateways) {
    SCOPED_TRACE(g.address);
    EXPECT_TRUE(g.reachable);
    EXPECT_EQ(g.mac, kFarMac);
    EXPECT_GT(g.rtt, absl::ZeroDuration());
    EXPECT_LT(g.rtt, plan.gateway_timeout);
  }
  EXPECT_EQ(r.gateways[0].address, "10.77.0.1");
  EXPECT_EQ(r.gateways[1].address, "2001:db8:77::1");
}

TEST_F(LinkTest, GatewayPrimingUnreachableWithinTheBound) {
  Target t;
  std::unique_ptr<PacketLink> link;
  ASSERT_NO_FATAL_FAILURE(OpenNear("va", &t, &link));
  t.addresses = {V4("10.77.0.2", "10.77.0.99"), V6("2001:db8:77::2", "2001:db8:77::99")};
  Plan plan = ShortPlan();
  plan.prime_gateway = true;
  plan.gateway_timeout = absl::Milliseconds(300);
  const absl::Time began = MonotonicNow();
  Report r = Announce(t, plan, std::move(link));
  EXPECT_LT(MonotonicNow() - began, absl::Milliseconds(300 + 500));
  ASSERT_EQ(r.gateways.size(), 2u);
  EXPECT_FALSE(r.gateways[0].reachable);
  EXPECT_FALSE(r.gateways[1].reachable);
}

TEST_F(LinkTest, ConflictProbeFindsTheOwner) {
  Target t;
  std::unique_ptr<PacketLink> link;
  ASSERT_NO_FATAL_FAILURE(OpenNear("va", &t, &link));
  t.addresses = {V4("10.77.0.1"), V4("10.77.0.2")};  // the far end holds 10.77.0.1
  Plan plan = ShortPlan();
  plan.conflict_probe = true;
  auto cap = Capture::Open(far_, "vb");
  ASSERT_NE(cap, nullptr);
  Report r = Announce(t, plan, std::move(link));
  ASSERT_EQ(r.conflicts.size(), 1u);
  EXPECT_EQ(r.conflicts[0].address, "10.77.0.1");
  EXPECT_EQ(r.conflicts[0].owner, kFarMac);
  EXPECT_EQ(r.arp_sent, 2);  // 10.77.0.2 only, twice
  // Nothing claimed 10.77.0.1 from our MAC on the wire.
  auto frames = cap->Collect(absl::Milliseconds(300), [](const auto&) { return false; });
  for (const auto& f : frames) {
    auto a = ParseArp(AsView(f));
    if (!a.ok() || !FromMac(f, kNearMac)) continue;
    in_addr owned{};
    inet_pton(AF_INET, "10.77.0.1", &owned);
    EXPECT_NE(a->sender_ip.s_addr, owned.s_addr);
  }
}

TEST_F(LinkTest, VlanInterfaceSendsTaggedFrames) {
  auto vlan = fabric::testing::Run({kIp, "-n", near_, "link", "add", "link", "va", "name", "va.100",
                                    "type", "vlan", "id", "100"});
  ASSERT_TRUE(vlan.ok()) << vlan.status();
  if (vlan->status != 0 && absl::StrContains(vlan->err, "Unknown device type")) {
    GTEST_SKIP() << "this kernel has no 802.1Q support (8021q): " << vlan->err;
  }
  ASSERT_EQ(vlan->status, 0) << vlan->err;
  ASSERT_NO_FATAL_FAILURE(Near({"link", "set", "va.100", "up"}));
  ASSERT_NO_FATAL_FAILURE(Near({"addr", "add", "10.78.0.2/24", "dev", "va.100"}));
  Target t;
  std::unique_ptr<PacketLink> link;
  ASSERT_NO_FATAL_FAILURE(OpenNear("va.100", &t, &link));
  ASSERT_EQ(t.addresses.size(), 1u);
  auto cap = Capture::Open(far_, "vb");
  ASSERT_NE(cap, nullptr);
  Report r = Announce(t, ShortPlan(), std::move(link));
  EXPECT_EQ(r.arp_sent, 2);
  auto tagged = [](const std::vector<uint8_t>& f) {
    auto a = ParseArp(AsView(f));
    return f.size() >= 16 && f[12] == 0x81 && f[13] == 0x00 && a.ok() && a->vlan_id == 100 &&
           a->sender_ip.s_addr == htonl(0x0a4e0002);
  };
  auto frames = cap->Collect(absl::Seconds(3), [&](const auto& fs) {
    return std::count_if(fs.begin(), fs.end(), tagged) >= 2;
  });
  EXPECT_EQ(std::count_if(frames.begin(), frames.end(), tagged), 2);
}

TEST_F(LinkTest, MacvlanAnnouncesAndPrimes) {
  ASSERT_NO_FATAL_FAILURE(Near({"link", "add", "link", "va", "name", "mv0", "address",
                                "02:00:00:00:0c:01", "type", "macvlan", "mode", "bridge"}));
  ASSERT_NO_FATAL_FAILURE(Near({"link", "set", "mv0", "up"}));
  ASSERT_NO_FATAL_FAILURE(Near({"addr", "add", "10.77.0.5/24", "dev", "mv0"}));
  Target t;
  std::unique_ptr<PacketLink> link;
  ASSERT_NO_FATAL_FAILURE(OpenNear("mv0", &t, &link));
  EXPECT_EQ(t.mac, kMacvlanMac);
  Target lower;
  std::unique_ptr<PacketLink> lower_link;
  ASSERT_NO_FATAL_FAILURE(OpenNear("va", &lower, &lower_link));
  EXPECT_EQ(t.parent_ifindex, lower.ifindex) << "a macvlan's lower device";
  auto cap = Capture::Open(far_, "vb");
  ASSERT_NE(cap, nullptr);
  t.addresses = {V4("10.77.0.5", "10.77.0.1")};
  Plan plan = ShortPlan();
  plan.prime_gateway = true;
  Report r = Announce(t, plan, std::move(link));
  EXPECT_EQ(r.arp_sent, 2);
  ASSERT_EQ(r.gateways.size(), 1u);
  EXPECT_TRUE(r.gateways[0].reachable);
  EXPECT_EQ(r.gateways[0].mac, kFarMac);
  auto ours = [](const std::vector<uint8_t>& f) {
    auto a = ParseArp(AsView(f));
    return a.ok() && FromMac(f, kMacvlanMac) && a->sender_mac == kMacvlanMac &&
           a->sender_ip.s_addr == htonl(0x0a4d0005) && a->target_ip.s_addr == htonl(0x0a4d0005);
  };
  auto frames = cap->Collect(absl::Seconds(3), [&](const auto& fs) {
    return std::count_if(fs.begin(), fs.end(), ours) >= 2;
  });
  EXPECT_EQ(std::count_if(frames.begin(), frames.end(), ours), 2);
}

TEST_F(LinkTest, AdoptedSocketsWorkFromAnotherNamespace) {
  Target t;
  std::unique_ptr<PacketLink> opened;
  ASSERT_NO_FATAL_FAILURE(OpenNear("va", &t, &opened));
  // What the agent gets over SCM_RIGHTS: copies of both fds, used from its own namespace.
  auto adopted = PacketLink::Adopt(dup(opened->packet_fd()), dup(opened->netlink_fd()), "va");
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  opened.reset();
  EXPECT_EQ((*adopted)->ifindex(), t.ifindex);
  auto tentative = (*adopted)->Tentative(V6("2001:db8:77::2").addr);
  ASSERT_TRUE(tentative.ok()) << tentative.status();
  EXPECT_FALSE(*tentative);
  EXPECT_TRUE(absl::IsNotFound((*adopted)->Tentative(V6("2001:db8:77::42").addr).status()));
  auto cap = Capture::Open(far_, "vb");
  ASSERT_NE(cap, nullptr);
  Report r = Announce(t, ShortPlan(), std::move(*adopted));
  EXPECT_EQ(r.arp_sent, 2);
  EXPECT_EQ(r.na_sent, 2);
  auto frames = cap->Collect(absl::Seconds(3), [](const auto& fs) {
    return std::count_if(fs.begin(), fs.end(),
                         [](const auto& f) { return FromMac(f, kNearMac); }) >= 4;
  });
  EXPECT_GE(std::count_if(frames.begin(), frames.end(),
                          [](const auto& f) { return FromMac(f, kNearMac); }),
            4);
}

TEST_F(LinkTest, AdoptWithoutNetlinkTreatsAddressesAsReady) {
  Target t;
  std::unique_ptr<PacketLink> opened;
  ASSERT_NO_FATAL_FAILURE(OpenNear("va", &t, &opened));
  auto adopted = PacketLink::Adopt(dup(opened->packet_fd()), -1);
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  EXPECT_EQ((*adopted)->netlink_fd(), -1);
  auto tentative = (*adopted)->Tentative(V6("2001:db8:77::42").addr);
  ASSERT_TRUE(tentative.ok());
  EXPECT_FALSE(*tentative);
}

TEST_F(LinkTest, OpenOnADeletedInterfaceFails) {
  ASSERT_NO_FATAL_FAILURE(Near({"link", "add", "gone0", "type", "veth", "peer", "name", "gone1"}));
  auto ns = ScopedNetns::Enter("/run/netns/" + near_);
  ASSERT_TRUE(ns.ok()) << ns.status();
  const int ifindex = static_cast<int>(if_nametoindex("gone0"));
  ASSERT_GT(ifindex, 0);
  ASSERT_NO_FATAL_FAILURE(Near({"link", "del", "gone0"}));
  auto link = PacketLink::Open(ifindex);
  ASSERT_FALSE(link.ok());
  EXPECT_TRUE(absl::IsNotFound(link.status())) << link.status();
  EXPECT_THAT(std::string(link.status().message()), HasSubstr(absl::StrCat(ifindex)));
}

TEST_F(LinkTest, InterfaceDeletedMidJobEndsIt) {
  Target t;
  std::unique_ptr<PacketLink> link;
  ASSERT_NO_FATAL_FAILURE(OpenNear("va", &t, &link));
  Plan plan = ShortPlan();
  plan.schedule.fast_count = 100;  // 2 s of repeats unless the job ends early
  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    (void)fabric::testing::Run({kIp, "-n", near_, "link", "del", "va"});
  });
  const absl::Time began = MonotonicNow();
  Report r = Announce(t, plan, std::move(link));
  killer.join();
  EXPECT_LT(MonotonicNow() - began, absl::Milliseconds(1500));
  EXPECT_GE(r.send_errors, 1);
  EXPECT_THAT(r.last_error, HasSubstr("va (ifindex"));
  EXPECT_GT(r.arp_sent, 0);
}

TEST(LinkNoRootTest, DescribeMissingOrNonEthernetInterface) {
  auto missing = DescribeInterface("fabric-nope0");
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("fabric-nope0"));
  auto lo = DescribeInterface("lo");
  EXPECT_TRUE(absl::IsFailedPrecondition(lo.status())) << lo.status();
  EXPECT_THAT(std::string(lo.status().message()), HasSubstr("not Ethernet"));
}

TEST(LinkNoRootTest, MissingNamespaceIsNotFound) {
  auto ns = ScopedNetns::Enter("/run/netns/fabric-no-such-netns");
  EXPECT_TRUE(absl::IsNotFound(ns.status())) << ns.status();
  EXPECT_THAT(std::string(ns.status().message()), HasSubstr("/run/netns/fabric-no-such-netns"));
}

TEST(LinkNoRootTest, AdoptRejectsWhatIsNotAPacketSocket) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  close(fds[1]);
  auto link = PacketLink::Adopt(fds[0], -1);  // closes fds[0]
  EXPECT_TRUE(absl::IsInvalidArgument(link.status())) << link.status();
}

}  // namespace
}  // namespace fabric::announce
