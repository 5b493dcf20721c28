// End to end with a real container runtime: podman (CNI backend, runc) runs a conflist of the
// reference bridge (or macvlan) plugin with fabric-cni chained after it, and the host side of the
// pod's link sees the announcements. Once with no agent (fabric-cni's detached child runs the
// repeats) and once with a real fabric-agent holding them (re-announce through fabricctl).
//
// Then pod routing (issue 16) with two attachments: two macvlan networks in one subnet, each
// conflist ending in fabric-cni, on one pod; the rules, tables and ARP sysctls are checked inside
// the pod's namespace, and after CNI DEL that nothing of them is left.
//
// Needs root, podman, runc and containernetworking-plugins (scripts/install-deps.sh installs
// them); skips with the reason otherwise. Everything podman writes lives in a temp dir: its own
// storage, its own containers.conf (CONTAINERS_CONF) and its own CNI config directory.
#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/podman_rig.h"
#include "tests/hosts/hosts.h"
#include "tests/testing/binaries.h"
#include "tests/testing/subprocess.h"

namespace fabric {
namespace {

namespace fs = std::filesystem;

constexpr char kIp[] = "/usr/sbin/ip";
const std::string kPluginDir = testing::kCniPluginDir;
const std::string kAgent = testing::kAgentBinary;
const std::string kFabricctl = testing::kFabricctlBinary;

struct Frame {
  absl::Time at;
  std::string bytes;
};

class PodmanCniTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string why = testing::PodmanRig::Missing(); !why.empty()) GTEST_SKIP() << why;
    ASSERT_EQ(access((kPluginDir + "/fabric-cni").c_str(), X_OK), 0) << "fabric-cni not built";
    static int counter = 0;
    tag_ = absl::StrCat(getpid() % 10000, counter++);
    rig_ =
        std::make_unique<testing::PodmanRig>(absl::StrCat("/var/tmp/fabric-podman-", tag_),
                                             std::vector<std::string>{"sh", "sleep", "ip", "cat"});
    ASSERT_TRUE(rig_->imported());
    dir_ = rig_->dir();
    fs::create_directories(dir_ + "/env");
  }

  void TearDown() override {
    if (!rig_) return;
    (void)Podman({"rm", "-a", "-f", "-t", "0"});  // Before the links the pods' macvlans sit on.
    agent_.reset();
    if (capture_ >= 0) close(capture_);
    for (const std::string& link : links_) (void)testing::Run({kIp, "link", "del", link});
    for (const std::string& ns : netns_) (void)testing::Run({kIp, "netns", "del", ns});
    rig_.reset();
  }

  absl::StatusOr<testing::RunResult> Podman(std::vector<std::string> args) {
    return rig_->Podman(std::move(args), absl::Seconds(60));
  }

  void Sh(const std::vector<std::string>& cmd) {
    auto r = testing::Run(cmd, absl::Seconds(30));
    ASSERT_TRUE(r.ok() && r->status == 0)
        << cmd[1] << " " << cmd[2] << ": " << (r.ok() ? r->err : "");
  }

  // The network is "fab<tag><suffix>".
  void WriteConflist(const std::string& first_plugin, const std::string& fabric_extra,
                     const std::string& suffix = "") {
    std::ofstream(dir_ + "/net.d/fab" + tag_ + suffix + ".conflist") << absl::StrCat(
        R"({"cniVersion":"1.0.0","name":"fab)", tag_, suffix, R"(","plugins":[)", first_plugin,
        R"(,{"type":"fabric-cni","announce":{"count":3,"intervalMs":100,"tailMs":[1000]},)",
        R"("stateDir":")", dir_, R"(/state","envDir":")", dir_, R"(/env")", fabric_extra, "}]}");
  }

  // Bridge mode: the bridge exists before the pod, so the capture on it sees the first frame.
  std::string BridgePlugin() {
    bridge_ = "fabbr" + tag_;
    Sh({kIp, "link", "add", bridge_, "type", "bridge"});
    links_.push_back(bridge_);
    Sh({kIp, "link", "set", bridge_, "up"});
    StartCapture(bridge_);
    return absl::StrCat(R"({"type":"bridge","bridge":")", bridge_,
                        R"(","isGateway":true,"ipMasq":false,"ipam":{"type":"host-local",)",
                        R"("ranges":[[{"subnet":"10.89.)", Octet(),
                        R"(.0/24","rangeStart":"10.89.)", Octet(), R"(.10","rangeEnd":"10.89.)",
                        Octet(), R"(.10"}]]}})");
  }

  std::string Octet() const { return absl::StrCat(std::stoi(tag_) % 200 + 20); }
  std::string PodIp() const { return absl::StrCat("10.89.", Octet(), ".10"); }

  void StartCapture(const std::string& ifname) {
    capture_ = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, htons(ETH_P_ARP));
    ASSERT_GE(capture_, 0);
    sockaddr_ll sll{};
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(ETH_P_ARP);
    sll.sll_ifindex = static_cast<int>(if_nametoindex(ifname.c_str()));
    ASSERT_GT(sll.sll_ifindex, 0) << ifname;
    ASSERT_EQ(bind(capture_, reinterpret_cast<sockaddr*>(&sll), sizeof(sll)), 0);
  }

  // Gratuitous ARP requests for the pod's IP (sender IP = target IP) seen until `until`.
  // Until the plugin's last frame (1 s after its ADD) is surely out, but before the agent's 5 s
  // one: the ADD came before RunPod returned, late on a loaded machine (podman's start).
  static absl::Time Window(absl::Time start) {
    return std::max(start + absl::Milliseconds(2500), absl::Now() + absl::Milliseconds(1200));
  }
  std::vector<Frame> Garps(absl::Time until) {
    std::vector<Frame> out;
    const in_addr_t ip = inet_addr(PodIp().c_str());
    while (absl::Now() < until) {
      pollfd p{capture_, POLLIN, 0};
      int left = static_cast<int>(absl::ToInt64Milliseconds(until - absl::Now()));
      if (poll(&p, 1, std::max(left, 1)) <= 0) continue;
      char buf[2048];
      ssize_t n = recv(capture_, buf, sizeof(buf), 0);
      if (n < 42) continue;
      // Ethernet (14) + ARP: op at 20, sender IP at 28, target IP at 38.
      in_addr_t sip, tip;
      std::memcpy(&sip, buf + 28, 4);
      std::memcpy(&tip, buf + 38, 4);
      if (buf[12] == 0x08 && buf[13] == 0x06 && sip == ip && tip == ip) {
        out.push_back({absl::Now(), std::string(buf, static_cast<size_t>(n))});
      }
    }
    return out;
  }

  std::string RunPod(const std::string& seconds, const std::vector<std::string>& suffixes = {""}) {
    std::vector<std::string> args = {"run", "-d"};
    for (const std::string& s : suffixes) {
      args.push_back("--network");
      args.push_back("fab" + tag_ + s);
    }
    for (const char* a : {testing::PodmanRig::kImage, "/bin/sleep"}) args.push_back(a);
    args.push_back(seconds);
    auto r = Podman(args);
    EXPECT_TRUE(r.ok() && r->status == 0) << (r.ok() ? r->err : std::string(r.status().message()));
    return r.ok() ? std::string(absl::StripAsciiWhitespace(r->out)) : "";
  }

  // `ip ARGS` in the named namespace ("": the host's); its stdout, a test failure otherwise.
  std::string IpOut(const std::string& ns, const std::vector<std::string>& args) {
    std::vector<std::string> argv = {kIp};
    if (!ns.empty()) argv.insert(argv.end(), {"-n", ns});
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = testing::Run(argv, absl::Seconds(30));
    EXPECT_TRUE(r.ok() && r->status == 0)
        << absl::StrJoin(argv, " ") << ": " << (r.ok() ? r->err : "");
    return r.ok() ? r->out : "";
  }

  // A file read inside a namespace: /proc/sys/net is the reader's namespace's.
  std::string ReadIn(const std::string& ns, const std::string& path) {
    auto r = testing::Run({kIp, "netns", "exec", ns, "/bin/cat", path}, absl::Seconds(30));
    EXPECT_TRUE(r.ok() && r->status == 0) << path << ": " << (r.ok() ? r->err : "");
    return r.ok() ? std::string(absl::StripAsciiWhitespace(r->out)) : "";
  }

  // Files in stateDir whose names end with `suffix`.
  int StateFiles(const std::string& suffix) {
    int n = 0;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir_ + "/state", ec)) {
      n += absl::EndsWith(e.path().filename().string(), suffix);
    }
    return n;
  }

  std::unique_ptr<testing::PodmanRig> rig_;
  std::string tag_, dir_, bridge_;
  std::vector<std::string> links_, netns_;
  int capture_ = -1;
  std::unique_ptr<testing::Subprocess> agent_;
};

TEST_F(PodmanCniTest, BridgePodIsAnnouncedByTheDetachedChildAndDelCleansUp) {
  WriteConflist(BridgePlugin(), R"(,"agentSocket":"/nonexistent/announce.sock")");
  ASSERT_FALSE(HasFatalFailure());
  const absl::Time start = absl::Now();
  std::string id = RunPod("30");
  ASSERT_FALSE(id.empty());
  // Offsets 0, 100, 200, 300 ms and 1 s: five from fabric-cni (the kernel's arp_notify may add
  // one of its own, 42 bytes: ours are padded to 60).
  std::vector<Frame> seen = Garps(Window(start));
  int ours = 0;
  bool late = false;
  for (const Frame& f : seen) {
    if (f.bytes.size() >= 60) ++ours;
    late = late || f.at - start > absl::Milliseconds(900);
  }
  EXPECT_EQ(ours, 5) << seen.size() << " gratuitous ARPs in all";
  EXPECT_TRUE(late) << "no repeat after ADD returned";
  // The env file for launchers, then DEL removes it with the rest of the pod's state.
  std::ifstream env(absl::StrCat(dir_, "/env/", id, ".env"));
  std::string text((std::istreambuf_iterator<char>(env)), std::istreambuf_iterator<char>());
  EXPECT_THAT(text, ::testing::HasSubstr("FABRIC_POD_IPS"));
  auto rm = Podman({"rm", "-f", "-t", "0", id});
  ASSERT_TRUE(rm.ok() && rm->status == 0) << (rm.ok() ? rm->err : "");
  EXPECT_FALSE(fs::exists(absl::StrCat(dir_, "/env/", id, ".env")));
}

TEST_F(PodmanCniTest, AgentHoldsThePodAndReannouncesIt) {
  ASSERT_TRUE(testing::WriteExampleHost("roce-9port", dir_ + "/host").ok());
  const std::string socket = dir_ + "/agent/agent.sock";
  agent_ =
      *testing::Subprocess::Start({kAgent, "--socket=" + socket, "--sysfs=" + dir_ + "/host/sys",
                                   "--procfs=" + dir_ + "/host/proc", "--log-level=debug"});
  ASSERT_TRUE(
      testing::WaitFor([&] { return testing::UnixSocketAccepts(socket); }, absl::Seconds(20)))
      << agent_->Stderr();
  WriteConflist(BridgePlugin(), absl::StrCat(R"(,"agentSocket":")", dir_,
                                             R"(/agent/announce.sock","requireAgent":true)"));
  ASSERT_FALSE(HasFatalFailure());
  const absl::Time start = absl::Now();
  std::string id = RunPod("30");
  ASSERT_FALSE(id.empty());
  std::vector<Frame> seen = Garps(Window(start));
  int ours = 0;
  for (const Frame& f : seen) ours += f.bytes.size() >= 60;
  EXPECT_EQ(ours, 5) << agent_->Stderr();

  const std::string target = "--target=unix://" + socket;
  auto list = testing::Run({kFabricctl, "announcements", target, "--container=" + id});
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->status, 0) << list->err;
  EXPECT_THAT(list->out, ::testing::HasSubstr(PodIp()));
  EXPECT_THAT(list->out, ::testing::HasSubstr("done"));

  // Re-announce by hand: the agent still holds the pod's socket.
  const absl::Time again = absl::Now();
  auto re = testing::Run({kFabricctl, "announce", target, "--container=" + id});
  ASSERT_TRUE(re.ok());
  EXPECT_EQ(re->status, 0) << re->err;
  EXPECT_GE(Garps(again + absl::Milliseconds(1500)).size(), 4u);

  auto rm = Podman({"rm", "-f", "-t", "0", id});
  ASSERT_TRUE(rm.ok() && rm->status == 0);
  auto after = testing::Run({kFabricctl, "announcements", target, "--container=" + id, "--json"});
  ASSERT_TRUE(after.ok());
  EXPECT_THAT(after->out,
              ::testing::AnyOf(::testing::HasSubstr("CANCELLED"), ::testing::HasSubstr("GONE")));
}

TEST_F(PodmanCniTest, MacvlanPodIsAnnouncedOnTheMastersWire) {
  // macvlan needs a master whose frames reach somewhere: one end of a veth pair, captured at
  // the other.
  const std::string master = "fabmv" + tag_;
  const std::string far = "fabmw" + tag_;
  Sh({kIp, "link", "add", master, "type", "veth", "peer", "name", far});
  links_.push_back(master);
  Sh({kIp, "link", "set", master, "up"});
  Sh({kIp, "link", "set", far, "up"});
  StartCapture(far);
  WriteConflist(
      absl::StrCat(R"({"type":"macvlan","master":")", master,
                   R"(","mode":"bridge","ipam":{"type":"host-local","ranges":[[{"subnet":"10.89.)",
                   Octet(), R"(.0/24","rangeStart":"10.89.)", Octet(), R"(.10","rangeEnd":"10.89.)",
                   Octet(), R"(.10"}]]}})"),
      R"(,"agentSocket":"/nonexistent/announce.sock")");
  const absl::Time start = absl::Now();
  std::string id = RunPod("30");
  ASSERT_FALSE(id.empty());
  std::vector<Frame> seen = Garps(Window(start));
  int ours = 0;
  for (const Frame& f : seen) ours += f.bytes.size() >= 60;
  EXPECT_EQ(ours, 5);
}

// Two attachments of one pod in one subnet, the multi-rail case: two macvlan networks on one
// wire (podman runs each network's conflist on its own, so each ends in fabric-cni). Inside the
// pod: a rule and table per routed address, replies leave by their own interface, the ARP
// sysctls on both; after CNI DEL no rule is left in the pod's namespace or on the host, and the
// records are gone.
class PodRoutingPodmanTest : public PodmanCniTest {
 protected:
  // `both_routed`: whether both attachments get a rule and table. In auto mode the one ADDed
  // first does not: it has no sibling yet (podman ADDs the networks in no fixed order).
  void RunTwoAttachments(const std::string& mode, bool both_routed) {
    const std::string master = "fabmv" + tag_;
    Sh({kIp, "link", "add", master, "type", "veth", "peer", "name", "fabmw" + tag_});
    links_.push_back(master);
    Sh({kIp, "link", "set", master, "up"});
    Sh({kIp, "link", "set", "fabmw" + tag_, "up"});
    const std::string net = "10.89." + Octet();
    // The gateway puts a default route into each table (none goes into the main table, where two
    // default routes would collide).
    auto macvlan = [&](const std::string& host) {
      return absl::StrCat(R"({"type":"macvlan","master":")", master,
                          R"(","mode":"bridge","ipam":{"type":"host-local","ranges":[[{"subnet":")",
                          net, R"(.0/24","rangeStart":")", net, ".", host, R"(","rangeEnd":")", net,
                          ".", host, R"(","gateway":")", net, R"(.1"}]]}})");
    };
    const std::string fabric = absl::StrCat(
        R"(,"agentSocket":"/nonexistent/announce.sock","podRouting":{"mode":")", mode, R"("})");
    WriteConflist(macvlan("10"), fabric, "a");
    WriteConflist(macvlan("11"), fabric, "b");
    const std::string host4 = IpOut("", {"-4", "rule", "show"});
    const std::string host6 = IpOut("", {"-6", "rule", "show"});
    const std::string fresh = "fabfresh" + tag_;
    Sh({kIp, "netns", "add", fresh});
    netns_.push_back(fresh);

    std::string id = RunPod("60", {"a", "b"});
    ASSERT_FALSE(id.empty());
    // Hold the pod's namespace past DEL (podman drops its own handle then) to look into it after.
    auto pid = Podman({"inspect", "-f", "{{.State.Pid}}", id});
    ASSERT_TRUE(pid.ok() && pid->status == 0);
    const std::string ns = "fabpod" + tag_;
    Sh({kIp, "netns", "attach", ns, std::string(absl::StripAsciiWhitespace(pid->out))});
    netns_.push_back(ns);

    // "2: eth0    inet 10.89.x.10/24 brd ... scope global eth0 ..." -> address: interface.
    std::map<std::string, std::string> ifname_of;
    for (absl::string_view line : absl::StrSplit(IpOut(ns, {"-4", "-o", "addr", "show"}), '\n')) {
      std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
      if (f.size() > 3 && f[2] == "inet") ifname_of[f[3].substr(0, f[3].find('/'))] = f[1];
    }
    const std::string a = net + ".10", b = net + ".11";
    ASSERT_TRUE(ifname_of.count(a) && ifname_of.count(b)) << IpOut(ns, {"addr"});
    ASSERT_NE(ifname_of[a], ifname_of[b]);

    const std::string rules = IpOut(ns, {"-4", "rule", "show"});
    std::set<std::string> tables;
    for (const std::string& addr : {a, b}) {
      const std::string& ifname = ifname_of[addr];
      SCOPED_TRACE(addr + " on " + ifname);
      std::string table;
      for (absl::string_view line : absl::StrSplit(rules, '\n')) {
        const std::string want = absl::StrCat("from ", addr, " lookup ");
        const size_t at = line.find(want);
        if (at == absl::string_view::npos) continue;
        EXPECT_TRUE(absl::StartsWith(line, "1000:")) << line;
        EXPECT_THAT(std::string(line), ::testing::HasSubstr("proto 245"));
        absl::string_view rest = line.substr(at + want.size());
        table = std::string(rest.substr(0, rest.find_first_of(" \t")));
      }
      // Either way a reply from this address leaves through its own interface (unrouted: by the
      // main table, where the connected route of the attachment ADDed first comes first).
      EXPECT_THAT(IpOut(ns, {"-4", "route", "get", net + ".1", "from", addr}),
                  ::testing::HasSubstr("dev " + ifname));
      EXPECT_EQ(ReadIn(ns, "/proc/sys/net/ipv4/conf/" + ifname + "/arp_ignore"), "1");
      EXPECT_EQ(ReadIn(ns, "/proc/sys/net/ipv4/conf/" + ifname + "/arp_announce"), "2");
      if (table.empty() && !both_routed) continue;
      ASSERT_FALSE(table.empty()) << rules;
      tables.insert(table);
      const std::string routes = IpOut(ns, {"-4", "route", "show", "table", table});
      EXPECT_THAT(routes, ::testing::HasSubstr(absl::StrCat(net, ".0/24 dev ", ifname)));
      EXPECT_THAT(routes,
                  ::testing::HasSubstr(absl::StrCat("default via ", net, ".1 dev ", ifname)));
    }
    EXPECT_EQ(tables.size(), both_routed ? 2u : 1u) << rules;
    EXPECT_EQ(StateFiles(".routes"), both_routed ? 2 : 1);
    EXPECT_EQ(IpOut("", {"-4", "rule", "show"}), host4);

    // CNI DEL of both attachments.
    auto rm = Podman({"rm", "-f", "-t", "0", id});
    ASSERT_TRUE(rm.ok() && rm->status == 0) << (rm.ok() ? rm->err : "");
    // Rules outlive the interfaces macvlan's DEL removes: only fabric-cni's DEL takes them away.
    EXPECT_EQ(IpOut(ns, {"-4", "rule", "show"}), IpOut(fresh, {"-4", "rule", "show"}));
    EXPECT_EQ(IpOut(ns, {"-6", "rule", "show"}), IpOut(fresh, {"-6", "rule", "show"}));
    EXPECT_THAT(IpOut(ns, {"route", "show", "table", "all"}),
                ::testing::Not(::testing::HasSubstr("proto 245")));
    EXPECT_EQ(IpOut("", {"-4", "rule", "show"}), host4);
    EXPECT_EQ(IpOut("", {"-6", "rule", "show"}), host6);
    EXPECT_EQ(StateFiles(".routes"), 0);
    EXPECT_EQ(StateFiles(".pid"), 0);
  }
};

TEST_F(PodRoutingPodmanTest, TwoAttachmentsInOneSubnetGetSourceRoutingAndDelRemovesIt) {
  RunTwoAttachments("on", /*both_routed=*/true);
}

// The default mode: the second attachment finds its sibling in the subnet, routes itself and
// sets the ARP sysctls on both.
TEST_F(PodRoutingPodmanTest, AutoModeRoutesTheAttachmentThatFindsASibling) {
  RunTwoAttachments("auto", /*both_routed=*/false);
}

}  // namespace
}  // namespace fabric
