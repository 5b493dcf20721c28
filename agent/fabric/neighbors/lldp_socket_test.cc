// The real kernel and a real LLDP agent: Debian's lldpd plays the switch on the far end of a veth
// in throwaway network namespaces (test-rigs section 5); the socket under test is opened on the
// near end. Skipped unless root (and, for the lldpd cases, unless lldpd is installed).
#include "agent/fabric/neighbors/lldp_socket.h"

#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/common/fd.h"
#include "agent/fabric/announce/link.h"
#include "agent/fabric/neighbors/lldp.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/netns.h"
#include "tests/testing/subprocess.h"

namespace fabric::neighbors {
namespace {

using ::fabric::announce::ScopedNetns;

constexpr char kIp[] = "/usr/sbin/ip";
constexpr char kLldpd[] = "/usr/sbin/lldpd";
constexpr char kLldpcli[] = "/usr/sbin/lldpcli";
constexpr char kSwitchMac[] = "02:00:00:00:0b:01";

std::string Bytes(std::initializer_list<int> b) {
  std::string s;
  for (int x : b) s.push_back(static_cast<char>(x));
  return s;
}
std::string Tlv(int type, const std::string& body) {
  return Bytes({type << 1 | static_cast<int>(body.size() >> 8),
                static_cast<int>(body.size() & 0xff)}) +
         body;
}
const std::string kNearestBridge(reinterpret_cast<const char*>(kLldpNearestBridge.data()), 6);

// An LLDP frame from the switch's MAC to `dst` with `ethertype`, `pad` bytes of padding.
std::string Frame(const std::string& name, const std::string& dst = kNearestBridge,
                  uint16_t ethertype = kEtherTypeLldp, size_t pad = 0) {
  return dst + Bytes({0x02, 0, 0, 0, 0x0b, 0x01, ethertype >> 8, ethertype & 0xff}) +
         Tlv(kTlvChassisId, Bytes({4, 0x02, 0, 0, 0, 0x0b, 0x01})) + Tlv(kTlvPortId, "\x05swp12") +
         Tlv(kTlvTtl, Bytes({0, 120})) + Tlv(kTlvSystemName, name) + Tlv(kTlvEnd, "") +
         std::string(pad, '\0');
}

class LldpSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root for network namespaces";
    fabric::testing::VethPairSpec spec;
    spec.prefix = "fablldp";
    spec.pod_if = "eth0";
    spec.peer_if = "swp12";
    spec.pod_cidr = "10.77.0.2/24";
    spec.peer_cidr = "10.77.0.1/24";
    auto pair = fabric::testing::VethPair::Create(spec);
    ASSERT_TRUE(pair.ok()) << pair.status();
    pair_ = std::move(*pair);
    ASSERT_NO_FATAL_FAILURE(
        Ip({"-n", pair_->peer(), "link", "set", "swp12", "address", kSwitchMac}));
    ASSERT_NO_FATAL_FAILURE(OpenHostSocket());
  }
  void TearDown() override {
    StopLldpd();
    socket_.reset();
    pair_.reset();  // deletes both namespaces and the veth with them
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  void Ip(std::vector<std::string> args) {
    args.insert(args.begin(), kIp);
    auto r = fabric::testing::Run(args, absl::Seconds(20));
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->status, 0) << absl::StrJoin(args, " ") << ": " << r->err;
  }

  // The socket lives in the host namespace; this thread only visits it to open it.
  void OpenHostSocket() {
    auto ns = ScopedNetns::Enter(pair_->pod_path());
    ASSERT_TRUE(ns.ok()) << ns.status();
    auto s = LldpSocketImpl::Open("eth0");
    ASSERT_TRUE(s.ok()) << s.status();
    socket_ = std::move(*s);
  }

  // Sends `frame` out of `ifname` in namespace `ns_path` through a raw packet socket.
  void Send(const std::string& ns_path, const std::string& ifname, const std::string& frame) {
    auto ns = ScopedNetns::Enter(ns_path);
    ASSERT_TRUE(ns.ok()) << ns.status();
    UniqueFd fd(socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0));
    ASSERT_TRUE(fd.valid()) << std::strerror(errno);
    sockaddr_ll sll{};
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(ETH_P_LLDP);
    sll.sll_ifindex = static_cast<int>(if_nametoindex(ifname.c_str()));
    ASSERT_GT(sll.sll_ifindex, 0) << ifname;
    ASSERT_EQ(sendto(fd.get(), frame.data(), frame.size(), 0, reinterpret_cast<sockaddr*>(&sll),
                     sizeof(sll)),
              static_cast<ssize_t>(frame.size()))
        << std::strerror(errno);
  }
  void SendFromSwitch(const std::string& frame) { Send(pair_->peer_path(), "swp12", frame); }

  bool Readable(absl::Duration timeout) {
    pollfd p{socket_->fd(), POLLIN, 0};
    return poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) > 0;
  }

  // Frames until one parses and satisfies `done`, or `timeout` passes (then nullopt). Receive
  // errors end the wait and land in `error`.
  std::optional<LldpNeighbor> Await(const std::function<bool(const LldpNeighbor&)>& done,
                                    absl::Duration timeout, absl::Status* error = nullptr) {
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      (void)Readable(absl::Milliseconds(50));
      for (;;) {
        auto f = socket_->Receive();
        if (!f.ok()) {
          if (error == nullptr) ADD_FAILURE() << f.status();
          if (error != nullptr) *error = f.status();
          return std::nullopt;
        }
        if (!f->has_value()) break;
        last_frame_ = **f;
        auto n = ParseLldpFrame((*f)->bytes);
        if (n.ok() && done(*n)) return *n;
      }
    }
    return std::nullopt;
  }

  void StartLldpd() {
    std::filesystem::create_directories("/run/lldpd");  // its privilege-separation chroot
    dir_ = fabric::testing::MakeTempDir("fablldp");
    ASSERT_FALSE(dir_.empty());
    // lldpd runs lldpcli for the config as its own user (_lldpd): it must reach the socket.
    std::filesystem::permissions(
        dir_, std::filesystem::perms::others_exec | std::filesystem::perms::group_exec,
        std::filesystem::perm_options::add);
    ctl_ = dir_ + "/lldpd.ctl";
    std::ofstream(dir_ + "/lldpd.conf") << "configure system hostname leaf-07\n"
                                           "configure lldp tx-interval 1\n"
                                           "configure ports swp12 lldp portdescription "
                                           "\"to host eth0\"\n";
    auto p = fabric::testing::Subprocess::Start(
        {kIp, "netns", "exec", pair_->peer(), kLldpd, "-d", "-u", ctl_, "-I", "swp12", "-O",
         dir_ + "/lldpd.conf", "-S", "fabric test switch", "-m", "10.77.0.1"});
    ASSERT_TRUE(p.ok()) << p.status();
    lldpd_ = std::move(*p);
  }
  // SIGTERM: lldpd sends its shutdown LLDPDU and exits; SIGKILL (the destructor) if it does not.
  void StopLldpd() {
    if (lldpd_ == nullptr) return;
    lldpd_->Signal(SIGTERM);
    if (!lldpd_->Wait(absl::Seconds(5)).has_value()) ADD_FAILURE() << "lldpd ignored SIGTERM";
    lldpd_.reset();
  }
  void Lldpcli(std::vector<std::string> args) {
    args.insert(args.begin(), {kIp, "netns", "exec", pair_->peer(), kLldpcli, "-u", ctl_});
    auto r = fabric::testing::Run(args, absl::Seconds(10));
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->status, 0) << absl::StrJoin(args, " ") << ": " << r->err;
  }

  std::unique_ptr<fabric::testing::VethPair> pair_;
  std::unique_ptr<LldpSocketImpl> socket_;
  std::unique_ptr<fabric::testing::Subprocess> lldpd_;
  std::string dir_, ctl_;
  LldpFrame last_frame_;
};

TEST_F(LldpSocketTest, LldpdAsTheSwitchRenamedThenStopped) {
  if (access(kLldpd, X_OK) != 0 || access(kLldpcli, X_OK) != 0) {
    GTEST_SKIP() << "lldpd is not installed";
  }
  ASSERT_NO_FATAL_FAILURE(StartLldpd());
  auto n =
      Await([](const LldpNeighbor& x) { return x.system_name == "leaf-07"; }, absl::Seconds(20));
  ASSERT_TRUE(n.has_value()) << "no LLDPDU naming leaf-07; lldpd said: " << lldpd_->Stderr();
  EXPECT_EQ(n->port_description, "to host eth0");
  EXPECT_EQ(n->system_description, "fabric test switch");
  EXPECT_EQ(n->chassis_id_subtype, kChassisIdMac);
  EXPECT_EQ(n->chassis_id, kSwitchMac);
  EXPECT_EQ(n->port_id_subtype, kPortIdMac);
  EXPECT_EQ(n->port_id, kSwitchMac);
  EXPECT_EQ(n->source_mac, (std::array<uint8_t, 6>{0x02, 0, 0, 0, 0x0b, 0x01}));
  EXPECT_EQ(n->management_address, "10.77.0.1");
  EXPECT_EQ(n->ttl_s, 4u);  // tx-interval 1 x tx-hold 4
  EXPECT_EQ(SwitchLabelValue(*n), "leaf-07");
  EXPECT_FALSE(last_frame_.truncated());

  ASSERT_NO_FATAL_FAILURE(Lldpcli({"configure", "system", "hostname", "leaf-08"}));
  n = Await([](const LldpNeighbor& x) { return x.system_name == "leaf-08"; }, absl::Seconds(10));
  ASSERT_TRUE(n.has_value()) << "the rename never arrived";
  EXPECT_EQ(n->chassis_id, kSwitchMac);

  lldpd_->Signal(SIGTERM);
  n = Await([](const LldpNeighbor& x) { return x.ttl_s == 0; }, absl::Seconds(10));
  ASSERT_TRUE(n.has_value()) << "no shutdown LLDPDU";
  EXPECT_EQ(n->chassis_id, kSwitchMac);
  EXPECT_EQ(n->system_name, "");  // a shutdown LLDPDU has the mandatory TLVs only
}

// The kernel filter: other ethertypes, other group addresses and this host's own LLDP frames
// never wake the socket; a jumbo frame arrives cut and marked.
TEST_F(LldpSocketTest, OnlyLldpToTheNearestBridgeWakesIt) {
  ASSERT_NO_FATAL_FAILURE(SendFromSwitch(Frame("wrong-dst", std::string(6, '\xff'))));
  ASSERT_NO_FATAL_FAILURE(
      SendFromSwitch(Frame("tpmr", std::string("\x01\x80\xc2\x00\x00\x03", 6))));
  ASSERT_NO_FATAL_FAILURE(SendFromSwitch(Frame("ipv4", kNearestBridge, 0x0800, 30)));
  ASSERT_NO_FATAL_FAILURE(Send(pair_->pod_path(), "eth0", Frame("ours")));
  EXPECT_FALSE(Readable(absl::Milliseconds(500))) << "a filtered frame woke the socket";
  auto none = socket_->Receive();
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());

  ASSERT_NO_FATAL_FAILURE(SendFromSwitch(Frame("leaf-01")));
  auto n =
      Await([](const LldpNeighbor& x) { return x.system_name == "leaf-01"; }, absl::Seconds(5));
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->port_id, "swp12");
  EXPECT_FALSE(n->frame_vlan.has_value());

  // 802.1Q VID 10 (no such VLAN netdev here): the kernel takes the tag off and delivers it.
  std::string tagged = Frame("leaf-tagged");
  tagged.insert(12, Bytes({0x81, 0x00, 0x00, 0x0a}));
  ASSERT_NO_FATAL_FAILURE(SendFromSwitch(tagged));
  n = Await([](const LldpNeighbor& x) { return x.system_name == "leaf-tagged"; }, absl::Seconds(5));
  ASSERT_TRUE(n.has_value());

  ASSERT_NO_FATAL_FAILURE(Ip({"-n", pair_->peer(), "link", "set", "swp12", "mtu", "9000"}));
  ASSERT_NO_FATAL_FAILURE(Ip({"-n", pair_->pod(), "link", "set", "eth0", "mtu", "9000"}));
  ASSERT_NO_FATAL_FAILURE(
      SendFromSwitch(Frame("leaf-jumbo", kNearestBridge, kEtherTypeLldp, 3000)));
  n = Await([](const LldpNeighbor& x) { return x.system_name == "leaf-jumbo"; }, absl::Seconds(5));
  ASSERT_TRUE(n.has_value());
  EXPECT_TRUE(last_frame_.truncated());
  EXPECT_EQ(last_frame_.bytes.size(), kLldpMaxFrame);
  EXPECT_EQ(last_frame_.wire_length, Frame("leaf-jumbo").size() + 3000);
}

TEST_F(LldpSocketTest, NetdevDownThenGone) {
  ASSERT_NO_FATAL_FAILURE(Ip({"-n", pair_->pod(), "link", "set", "eth0", "down"}));
  absl::Status error;
  EXPECT_FALSE(Await([](const LldpNeighbor&) { return true; }, absl::Seconds(2), &error));
  EXPECT_EQ(error.code(), absl::StatusCode::kUnavailable) << error;
  EXPECT_THAT(error.message(), ::testing::HasSubstr("went down"));

  // Up again: the same socket receives again.
  ASSERT_NO_FATAL_FAILURE(Ip({"-n", pair_->pod(), "link", "set", "eth0", "up"}));
  ASSERT_NO_FATAL_FAILURE(Ip({"-n", pair_->peer(), "link", "set", "swp12", "up"}));
  ASSERT_TRUE(fabric::testing::WaitFor(
      [&] {
        SendFromSwitch(Frame("leaf-back"));
        return Await([](const LldpNeighbor& x) { return x.system_name == "leaf-back"; },
                     absl::Milliseconds(200))
            .has_value();
      },
      absl::Seconds(5)));

  ASSERT_NO_FATAL_FAILURE(Ip({"-n", pair_->pod(), "link", "del", "eth0"}));
  error = absl::OkStatus();
  EXPECT_FALSE(Await([](const LldpNeighbor&) { return true; }, absl::Seconds(2), &error));
  EXPECT_EQ(error.code(), absl::StatusCode::kNotFound) << error;
  EXPECT_THAT(error.message(), ::testing::HasSubstr("is gone"));

  // Opening on a netdev that does not exist is NotFound too.
  auto ns = ScopedNetns::Enter(pair_->pod_path());
  ASSERT_TRUE(ns.ok());
  EXPECT_EQ(LldpSocketImpl::Open("eth0").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(LldpSocketImpl::Open(99999).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace fabric::neighbors
