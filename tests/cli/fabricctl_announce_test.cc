// `fabricctl announce` by hand, as an operator runs it: the real binary announces an interface
// in a throwaway "pod" namespace, a capture on the far end of its veth sees the frames, and the
// report says whether the gateway answered. Needs root (namespaces, packet sockets).
#include <gmock/gmock.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "fabric/v1/agent.pb.h"
#include "tests/testing/netns.h"
#include "tests/testing/subprocess.h"

namespace fabric {
namespace {

constexpr char kIp[] = "/usr/sbin/ip";
const std::string kFabricctl = FABRICCTL;

class FabricctlAnnounceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root for network namespaces";
    testing::VethPairSpec spec;
    spec.prefix = "fab-ctl";
    spec.pod_mac = "02:00:00:00:0c:01";
    spec.pod_cidr = "10.78.0.2/24";
    spec.peer_if = "gw0";
    spec.peer_cidr = "10.78.0.1/24";
    auto pair = testing::VethPair::Create(spec);
    ASSERT_TRUE(pair.ok()) << pair.status();
    pair_ = *std::move(pair);
    pod_ = pair_->pod();
    peer_ = pair_->peer();
  }

  void TearDown() override { pair_.reset(); }

  testing::RunResult Fabricctl(std::vector<std::string> args) {
    args.insert(args.begin(), kFabricctl);
    auto r = testing::Run(args, absl::Seconds(30));
    return r.ok() ? *r : testing::RunResult{};
  }

  std::unique_ptr<testing::VethPair> pair_;
  std::string pod_, peer_;
};

TEST_F(FabricctlAnnounceTest, AnnouncesInANamespaceAndReportsTheGateway) {
  // The peer learns the pod's MAC from the announcement: seed a stale entry, then check it.
  auto stale = testing::Run({kIp, "-n", peer_, "neigh", "replace", "10.78.0.2", "lladdr",
                             "02:00:00:00:00:99", "dev", "gw0", "nud", "stale"});
  ASSERT_TRUE(stale.ok() && stale->status == 0);
  auto r = Fabricctl({"announce", "--ifname=eth0", "--netns=/var/run/netns/" + pod_,
                      "--gateway=10.78.0.1", "--json"});
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  v1::Announcement a;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(r.out, &a).ok()) << r.out;
  EXPECT_EQ(a.ifname(), "eth0");
  EXPECT_EQ(a.mac(), "02:00:00:00:0c:01");
  EXPECT_THAT(a.addresses(), ::testing::ElementsAre("10.78.0.2/24"));
  EXPECT_EQ(a.arp_sent(), 1u);
  ASSERT_EQ(a.gateways_size(), 1);
  EXPECT_TRUE(a.gateways(0).reachable());
  EXPECT_EQ(a.gateways(0).gateway(), "10.78.0.1");
  auto neigh = testing::Run({kIp, "-n", peer_, "neigh", "show", "10.78.0.2", "dev", "gw0"});
  ASSERT_TRUE(neigh.ok());
  EXPECT_THAT(neigh->out, ::testing::HasSubstr("02:00:00:00:0c:01")) << neigh->out;

  // The text form names the gateway and the interface.
  auto text = Fabricctl({"announce", "--ifname=eth0", "--netns=/var/run/netns/" + pod_,
                         "--ip=10.78.0.2", "--gateway=10.78.0.1"});
  EXPECT_EQ(text.status, 0) << text.err;
  EXPECT_THAT(text.out, ::testing::HasSubstr("gateway 10.78.0.1: reachable"));
}

TEST_F(FabricctlAnnounceTest, UnansweredGatewayIsReportedNotFatal) {
  auto r = Fabricctl({"announce", "--ifname=eth0", "--netns=/var/run/netns/" + pod_,
                      "--gateway=10.78.0.254", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  v1::Announcement a;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(r.out, &a).ok()) << r.out;
  ASSERT_EQ(a.gateways_size(), 1);
  EXPECT_FALSE(a.gateways(0).reachable());
}

TEST_F(FabricctlAnnounceTest, ConflictProbeRefusesAnAddressSomeoneHolds) {
  // 10.78.0.1 belongs to the peer; configured on the pod too (only an interface's own addresses
  // are announced), the probe finds the peer holding it and nothing is announced.
  auto add = testing::Run({kIp, "-n", pod_, "addr", "add", "10.78.0.1/32", "dev", "eth0"});
  ASSERT_TRUE(add.ok() && add->status == 0);
  auto r = Fabricctl({"announce", "--ifname=eth0", "--netns=/var/run/netns/" + pod_,
                      "--ip=10.78.0.1", "--conflict-probe"});
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  EXPECT_THAT(r.out, ::testing::HasSubstr("CONFLICT 10.78.0.1"));
}

TEST_F(FabricctlAnnounceTest, BadInputGetsClearErrors) {
  const std::string netns = "--netns=/var/run/netns/" + pod_;
  auto missing = Fabricctl({"announce", "--ifname=nosuch0", netns});
  EXPECT_EQ(missing.status, 1);
  EXPECT_THAT(missing.err, ::testing::HasSubstr("nosuch0"));
  auto bad_ip = Fabricctl({"announce", "--ifname=eth0", netns, "--ip=10.78.0.300"});
  EXPECT_EQ(bad_ip.status, 2);
  EXPECT_THAT(bad_ip.err, ::testing::HasSubstr("10.78.0.300"));
  auto no_ns = Fabricctl({"announce", "--ifname=eth0", "--netns=/var/run/netns/nosuch-ns"});
  EXPECT_EQ(no_ns.status, 1);
  EXPECT_THAT(no_ns.err, ::testing::HasSubstr("nosuch-ns"));
  // Only the interface's own addresses: the peer's is refused, and nothing goes out.
  auto foreign = Fabricctl({"announce", "--ifname=eth0", netns, "--ip=10.78.0.1"});
  EXPECT_EQ(foreign.status, 2);
  EXPECT_THAT(foreign.err, ::testing::HasSubstr("10.78.0.1 is not configured on eth0"));
  auto multicast = Fabricctl({"announce", "--ifname=eth0", netns, "--ip=224.0.0.1"});
  EXPECT_EQ(multicast.status, 2);
  EXPECT_THAT(multicast.err, ::testing::HasSubstr("multicast"));
  auto bad_name = Fabricctl({"announce", "--ifname=eth0:1", netns});
  EXPECT_EQ(bad_name.status, 2);
  EXPECT_THAT(bad_name.err, ::testing::HasSubstr("--ifname \"eth0:1\": contains ':'"));
  auto no_if = Fabricctl({"announce"});
  EXPECT_EQ(no_if.status, 2);
  auto mixed = Fabricctl({"announce", "--container=abc", netns});
  EXPECT_EQ(mixed.status, 2);
  // Through an agent that is not there: "cannot be read" (3), bounded by --timeout.
  auto no_agent = Fabricctl(
      {"announce", "--container=abc", "--target=unix:///nonexistent.sock", "--timeout=1"});
  EXPECT_EQ(no_agent.status, 3) << no_agent.err;
}

}  // namespace
}  // namespace fabric
