// Pod routing (issue 16) with the real fabric-cni binary and real ARP: a pod namespace with two
// (and four) interfaces in one subnet, each a veth to a bridge in a "switch" namespace, and a
// "far" namespace on the same bridge that arpings the pod's addresses. Checks that each address
// is answered only by its own MAC, that `ip route get ... from <addr>` leaves through the right
// interface, and that CHECK, a repeated ADD, DEL and GC leave the namespace as they should.
// Needs root and arping (scripts/install-deps.sh).
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "agent/fabric/announce/pod_routing.h"
#include "cni-hook/cni.h"
#include "gtest/gtest.h"
#include "tests/testing/subprocess.h"

namespace fabric::cni {
namespace {

using testing::RunResult;

RunResult Cmd(std::vector<std::string> args) {
  auto r = testing::Run(args, absl::Seconds(30));
  return r.ok() ? *r : RunResult{-1, "", std::string(r.status().message())};
}

std::string Mac(int i) { return absl::StrCat("02:00:00:00:50:0", i); }
std::string V4(int i) { return absl::StrCat("10.50.0.", 10 + i); }
std::string V6(int i) { return absl::StrCat("fd50::", 10 + i); }

class PodRoutingSystemTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (network namespaces)";
    if (access("/usr/sbin/arping", X_OK) != 0) GTEST_SKIP() << "needs arping (install-deps.sh)";
    const std::string id = absl::StrCat(getpid(), "-", counter_++);
    pod_ = "fpr-p-" + id;
    sw_ = "fpr-s-" + id;
    far_ = "fpr-f-" + id;
    state_dir_ = testing::MakeTempDir("fpr");
  }
  void TearDown() override {
    for (const std::string* ns : {&pod_, &sw_, &far_}) {
      if (!ns->empty()) Cmd({"/usr/sbin/ip", "netns", "del", *ns});
    }
    if (!state_dir_.empty()) std::filesystem::remove_all(state_dir_);
  }

  void Ip(const std::vector<std::string>& args) {
    std::vector<std::string> a = {"/usr/sbin/ip"};
    a.insert(a.end(), args.begin(), args.end());
    RunResult r = Cmd(a);
    ASSERT_EQ(r.status, 0) << absl::StrJoin(a, " ") << ": " << r.err;
  }
  std::string IpOut(const std::vector<std::string>& args) {
    std::vector<std::string> a = {"/usr/sbin/ip"};
    a.insert(a.end(), args.begin(), args.end());
    RunResult r = Cmd(a);
    EXPECT_EQ(r.status, 0) << absl::StrJoin(a, " ") << ": " << r.err;
    return r.out;
  }

  // n pod interfaces net1..netN (10.50.0.1i/24, fd50::1i/64) and far0 (10.50.0.1/24) on br0.
  void Build(int n) {
    for (const std::string& ns : {pod_, sw_, far_})
      ASSERT_NO_FATAL_FAILURE(Ip({"netns", "add", ns}));
    Ip({"-n", sw_, "link", "add", "br0", "type", "bridge"});
    Ip({"-n", sw_, "link", "set", "br0", "up"});
    Ip({"-n", pod_, "link", "set", "lo", "up"});
    for (int i = 1; i <= n; ++i) {
      const std::string ifname = absl::StrCat("net", i), port = absl::StrCat("s", i);
      Ip({"-n", sw_, "link", "add", port, "type", "veth", "peer", "name", ifname, "netns", pod_});
      Ip({"-n", sw_, "link", "set", port, "master", "br0", "up"});
      Ip({"-n", pod_, "link", "set", ifname, "address", Mac(i), "up"});
      Ip({"-n", pod_, "addr", "add", V4(i) + "/24", "dev", ifname});
      Ip({"-n", pod_, "-6", "addr", "add", V6(i) + "/64", "dev", ifname, "nodad"});
    }
    Ip({"-n", sw_, "link", "add", "sf", "type", "veth", "peer", "name", "far0", "netns", far_});
    Ip({"-n", sw_, "link", "set", "sf", "master", "br0", "up"});
    Ip({"-n", far_, "addr", "add", "10.50.0.1/24", "dev", "far0"});
    Ip({"-n", far_, "-6", "addr", "add", "fd50::1/64", "dev", "far0", "nodad"});
    Ip({"-n", far_, "link", "set", "far0", "up"});
  }

  // Rules and routes of every table, both families, sorted (rules of one priority list in the
  // order they were added): what DEL must give back. The kernel adds the local route of an IPv6
  // link-local address once its DAD ends, at a time of its own: those lines are left out.
  std::string Snapshot() {
    const std::string all =
        absl::StrCat(IpOut({"-n", pod_, "-4", "rule"}), IpOut({"-n", pod_, "-6", "rule"}),
                     IpOut({"-n", pod_, "-4", "route", "show", "table", "all"}),
                     IpOut({"-n", pod_, "-6", "route", "show", "table", "all"}));
    std::vector<std::string> lines;
    for (absl::string_view l : absl::StrSplit(all, '\n', absl::SkipEmpty())) {
      if (!absl::StartsWith(l, "local fe80:")) lines.emplace_back(l);
    }
    std::sort(lines.begin(), lines.end());
    return absl::StrJoin(lines, "\n");
  }

  std::string Conf(int i, const std::string& mode, const std::string& extra = "") {
    const std::string prev =
        absl::StrCat(R"({"cniVersion":"1.0.0","interfaces":[{"name":"net)", i, R"(","mac":")",
                     Mac(i), R"(","sandbox":"/var/run/netns/)", pod_, R"("}],"ips":[{"address":")",
                     V4(i), R"(/24","gateway":"10.50.0.1","interface":0},{"address":")", V6(i),
                     R"(/64","interface":0}]})");
    return absl::StrCat(R"({"cniVersion":"1.1.0","name":"rails","type":"fabric-cni",)",
                        R"("agentSocket":")", state_dir_, R"(/none.sock","stateDir":")", state_dir_,
                        R"(","announce":{"count":0,"tailMs":[]},)",
                        R"("gateway":{"prime":false},"podRouting":{"mode":")", mode, "\"", extra,
                        R"(},"prevResult":)", prev, "}");
  }
  RunResult Cni(const std::string& command, const std::string& id, int i,
                const std::string& config) {
    std::vector<std::string> env = {"CNI_COMMAND=" + command, "CNI_CONTAINERID=" + id,
                                    "CNI_NETNS=/var/run/netns/" + pod_,
                                    absl::StrCat("CNI_IFNAME=net", i), "CNI_PATH=/opt/cni/bin"};
    if (command == "GC") env[2] = "CNI_NETNS=";
    auto r = testing::Run({FABRIC_CNI_BINARY}, absl::Seconds(30), env, config);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : RunResult{};
  }
  void Add(int i, const std::string& mode, const std::string& id = "pod1") {
    RunResult r = Cni("ADD", id, i, Conf(i, mode));
    ASSERT_EQ(r.status, 0) << r.out << r.err;
  }

  // The MACs that answer an ARP request for `ip` from the far side.
  std::set<std::string> ArpAnswers(const std::string& ip) {
    Cmd({"/usr/sbin/ip", "-n", far_, "neigh", "flush", "dev", "far0"});
    RunResult r = Cmd({"/usr/sbin/ip", "netns", "exec", far_, "/usr/sbin/arping", "-i", "far0",
                       "-c", "3", "-w", "0.3", ip});
    std::set<std::string> macs;
    for (absl::string_view line : absl::StrSplit(r.out, '\n')) {
      // "60 bytes from 02:00:00:00:50:01 (10.50.0.11): index=0 time=..."
      std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
      if (f.size() > 3 && f[1] == "bytes" && f[2] == "from") macs.insert(std::string(f[3]));
    }
    return macs;
  }
  std::string RouteDev(const std::string& family, const std::string& to, const std::string& from) {
    std::string out = IpOut({"-n", pod_, family, "route", "get", to, "from", from});
    std::vector<absl::string_view> f =
        absl::StrSplit(out, absl::ByAnyChar(" \n"), absl::SkipEmpty());
    for (size_t k = 0; k + 1 < f.size(); ++k) {
      if (f[k] == "dev") return std::string(f[k + 1]);
    }
    return out;
  }
  std::string Sysctl(int i, const std::string& key) {
    RunResult r = Cmd({"/usr/sbin/ip", "netns", "exec", pod_, "cat",
                       absl::StrCat("/proc/sys/net/ipv4/conf/net", i, "/", key)});
    return std::string(absl::StripAsciiWhitespace(r.out));
  }
  int OurRules() {
    const std::string all = IpOut({"-n", pod_, "-4", "rule"}) + IpOut({"-n", pod_, "-6", "rule"});
    int n = 0;
    for (absl::string_view line : absl::StrSplit(all, '\n')) {
      n += absl::StrContains(line, "lookup 10") && !absl::StrContains(line, "proto static");
    }
    return n;
  }

  void ExpectEachAddressOnItsOwnRail(int n) {
    for (int i = 1; i <= n; ++i) {
      EXPECT_EQ(ArpAnswers(V4(i)), std::set<std::string>{Mac(i)}) << V4(i);
      EXPECT_EQ(RouteDev("-4", "10.50.0.1", V4(i)), absl::StrCat("net", i));
      EXPECT_EQ(RouteDev("-4", "192.0.2.9", V4(i)), absl::StrCat("net", i));  // default via gw
      EXPECT_EQ(RouteDev("-6", "fd50::1", V6(i)), absl::StrCat("net", i));
      EXPECT_EQ(Sysctl(i, "arp_ignore"), "1");
      EXPECT_EQ(Sysctl(i, "arp_announce"), "2");
      EXPECT_EQ(Sysctl(i, "rp_filter"), "2");
    }
  }

  static inline int counter_ = 0;
  std::string pod_, sw_, far_, state_dir_;
};

TEST_F(PodRoutingSystemTest, TwoRailsAnswerForThemselvesAndDelRestores) {
  ASSERT_NO_FATAL_FAILURE(Build(2));
  // Linux's defaults: both interfaces answer for net1's address (the flux the plugin removes).
  EXPECT_EQ(ArpAnswers(V4(1)).size(), 2u);
  EXPECT_EQ(RouteDev("-4", "10.50.0.1", V4(2)), "net1");
  const std::string before = Snapshot();
  ASSERT_NO_FATAL_FAILURE(Add(1, "on"));
  ASSERT_NO_FATAL_FAILURE(Add(2, "on"));
  ExpectEachAddressOnItsOwnRail(2);
  EXPECT_EQ(OurRules(), 4);
  for (int i = 1; i <= 2; ++i) {
    RunResult r = Cni("CHECK", "pod1", i, Conf(i, "on"));
    EXPECT_EQ(r.status, 0) << r.out << r.err;
  }
  // A repeated ADD changes nothing.
  const std::string added = Snapshot();
  ASSERT_NO_FATAL_FAILURE(Add(1, "on"));
  EXPECT_EQ(Snapshot(), added);
  // CHECK sees a rule that went missing; ADD puts it back.
  const uint32_t t1 = announce::PreferredTable("net1", 10000, 10999);
  Ip({"-n", pod_, "-4", "rule", "del", "from", V4(1), "lookup", std::to_string(t1)});
  RunResult r = Cni("CHECK", "pod1", 1, Conf(1, "on"));
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(absl::StrContains(r.out, "\"code\":103")) << r.out;
  ASSERT_NO_FATAL_FAILURE(Add(1, "on"));
  EXPECT_EQ(Snapshot(), added);
  for (int i = 2; i >= 1; --i) {
    r = Cni("DEL", "pod1", i, Conf(i, "on"));
    EXPECT_EQ(r.status, 0) << r.out << r.err;
  }
  EXPECT_EQ(Snapshot(), before);
  EXPECT_EQ(Sysctl(1, "arp_ignore"), "0");
  // DEL again (nothing left) still succeeds.
  r = Cni("DEL", "pod1", 1, Conf(1, "on"));
  EXPECT_EQ(r.status, 0) << r.out;
}

TEST_F(PodRoutingSystemTest, FourRailsAutoModeAndGc) {
  ASSERT_NO_FATAL_FAILURE(Build(4));
  const std::string before = Snapshot();
  // auto: each interface has siblings in its subnet, so each gets the steps.
  for (int i = 1; i <= 4; ++i) ASSERT_NO_FATAL_FAILURE(Add(i, "auto"));
  ExpectEachAddressOnItsOwnRail(4);
  EXPECT_EQ(OurRules(), 8);
  // GC with net1..net3 valid removes net4's rules and table only.
  RunResult r = Cni("GC", "", 1,
                    absl::StrCat(R"({"cniVersion":"1.1.0","name":"rails",)",
                                 R"("type":"fabric-cni","stateDir":")", state_dir_,
                                 R"(","cni.dev/valid-attachments":[)",
                                 R"({"containerID":"pod1","ifname":"net1"},)",
                                 R"({"containerID":"pod1","ifname":"net2"},)",
                                 R"({"containerID":"pod1","ifname":"net3"}]})"));
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(OurRules(), 6);
  EXPECT_FALSE(absl::StrContains(IpOut({"-n", pod_, "-4", "rule"}), V4(4) + " "));
  for (int i = 1; i <= 3; ++i) {
    r = Cni("DEL", "pod1", i, Conf(i, "auto"));
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    // net1's ADD set net2's sysctls too (a sibling); its DEL leaves them to net2 (and turns
    // net1's own back, as the interface's plugin is about to delete it).
    if (i == 1) {
      EXPECT_EQ(Sysctl(2, "arp_ignore"), "1");
    }
  }
  EXPECT_EQ(OurRules(), 0);
  // Routes and rules as before; net4's sysctls are not GC's to restore.
  EXPECT_EQ(Snapshot(), before);
}

TEST_F(PodRoutingSystemTest, ForeignTablesAreAvoidedAndNeverRemoved) {
  ASSERT_NO_FATAL_FAILURE(Build(2));
  const uint32_t t1 = announce::PreferredTable("net1", 10000, 10999);
  Ip({"-n", pod_, "rule", "add", "from", "192.0.2.7", "lookup", std::to_string(t1), "priority",
      "900", "proto", "static"});
  const std::string before = Snapshot();
  ASSERT_NO_FATAL_FAILURE(Add(1, "on"));
  EXPECT_FALSE(absl::StrContains(IpOut({"-n", pod_, "-4", "rule"}),
                                 absl::StrCat("from ", V4(1), " lookup ", t1)));
  EXPECT_EQ(RouteDev("-4", "10.50.0.1", V4(1)), "net1");
  // A range of one table, taken: a clear error and nothing left behind.
  RunResult r =
      Cni("ADD", "pod1", 2, Conf(2, "on", absl::StrCat(R"(,"tableRange":[)", t1, ",", t1, "]")));
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(absl::StrContains(r.out, "\"code\":104")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "tableRange")) << r.out;
  EXPECT_EQ(Sysctl(2, "arp_ignore"), "0");  // rolled back
  r = Cni("DEL", "pod1", 1, Conf(1, "on"));
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(Snapshot(), before);  // the foreign rule stays
}

TEST_F(PodRoutingSystemTest, DelWithoutTheRecordFindsTheTableByItsInterface) {
  ASSERT_NO_FATAL_FAILURE(Build(2));
  const std::string before = Snapshot();
  ASSERT_NO_FATAL_FAILURE(Add(1, "on"));
  ASSERT_NO_FATAL_FAILURE(Add(2, "on"));
  ASSERT_EQ(unlink((state_dir_ + "/" + RoutingFileName("pod1", "net1")).c_str()), 0);
  RunResult r = Cni("DEL", "pod1", 1, Conf(1, "on"));
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(OurRules(), 2);  // net2's stay
  EXPECT_EQ(RouteDev("-4", "10.50.0.1", V4(2)), "net2");
  r = Cni("DEL", "pod1", 2, Conf(2, "on"));
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(Snapshot(), before);
}

TEST_F(PodRoutingSystemTest, NoAddressesAndLinkLocalOnlyAreLoggedSkips) {
  ASSERT_NO_FATAL_FAILURE(Build(2));
  const std::string before = Snapshot();
  for (const std::string& ips : {std::string("[]"), std::string(R"([{"address":"fe80::5/64"}])")}) {
    const std::string conf = absl::StrCat(
        R"({"cniVersion":"1.0.0","name":"rails","type":"fabric-cni","stateDir":")", state_dir_,
        R"(","agentSocket":")", state_dir_, R"(/none.sock","announce":{"count":0,"tailMs":[]},)",
        R"("podRouting":{"mode":"on"},"prevResult":{"interfaces":[{"name":"net1","sandbox":"x"}],)",
        R"("ips":)", ips, "}}");
    RunResult r = Cni("ADD", "pod1", 1, conf);
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, "no routable address")) << r.err;
    EXPECT_EQ(Snapshot(), before);
    EXPECT_EQ(Sysctl(1, "arp_ignore"), "1");
    r = Cni("DEL", "pod1", 1, conf);
    EXPECT_EQ(r.status, 0) << r.out;
    EXPECT_EQ(Sysctl(1, "arp_ignore"), "0");
  }
}

TEST_F(PodRoutingSystemTest, ReadOnlyProcSysIsAClearErrorWithNothingLeft) {
  ASSERT_NO_FATAL_FAILURE(Build(2));
  const std::string before = Snapshot();
  // A private mount namespace in which /proc/sys is read-only.
  auto r =
      testing::Run({"/usr/bin/unshare", "-m", "--propagation", "private", "/bin/sh", "-c",
                    "mount --bind /proc/sys /proc/sys && mount -o remount,bind,ro /proc/sys && "
                    "exec " FABRIC_CNI_BINARY},
                   absl::Seconds(30),
                   {"CNI_COMMAND=ADD", "CNI_CONTAINERID=pod1", "CNI_NETNS=/var/run/netns/" + pod_,
                    "CNI_IFNAME=net1", "CNI_PATH=/opt/cni/bin"},
                   Conf(1, "on"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NE(r->status, 0) << r->out;
  EXPECT_TRUE(absl::StrContains(r->out, "not writable")) << r->out << r->err;
  EXPECT_EQ(Snapshot(), before);
  EXPECT_EQ(Sysctl(1, "arp_ignore"), "0");
}

}  // namespace
}  // namespace fabric::cni
