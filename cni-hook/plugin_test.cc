// The real fabric-cni binary, run as libcni runs it (CNI_* environment, config on stdin), against
// throwaway network namespaces: a "pod" namespace holding eth0 and a "host" namespace holding the
// far end of the veth, where a packet socket sees what the plugin sends. Needs root.
#include "cni-hook/plugin.h"

#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "agent/fabric/announce/frames.h"
#include "agent/fabric/announce/link.h"
#include "agent/publish/podrecord/pod_record.h"
#include "cni-hook/cni.h"
#include "gtest/gtest.h"
#include "tests/testing/subprocess.h"

namespace fabric::cni {
namespace {

namespace fs = std::filesystem;
using testing::RunResult;

constexpr char kPodIp[] = "10.77.0.2";
constexpr char kMarkerIp[] = "10.77.0.254";  // never assigned

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

RunResult Ip(std::vector<std::string> args) {
  args.insert(args.begin(), "/usr/sbin/ip");
  auto r = testing::Run(args, absl::Seconds(30));
  return r.ok() ? *r : RunResult{-1, "", std::string(r.status().message())};
}

// One pod: namespace P with eth0 (10.77.0.2/24), namespace H with h0, the other end.
struct PodNet {
  std::string pod_ns, host_ns;
  int capture = -1;  // AF_PACKET on h0, ARP only

  ~PodNet() {
    if (capture >= 0) close(capture);
    if (!pod_ns.empty()) Ip({"netns", "del", pod_ns});
    if (!host_ns.empty()) Ip({"netns", "del", host_ns});
  }
  std::string netns_path() const { return "/var/run/netns/" + pod_ns; }

  // Creates both namespaces and the veth; a failure message, or "".
  std::string Create(const std::string& suffix) {
    pod_ns = "fcni-p" + suffix;
    host_ns = "fcni-h" + suffix;
    for (auto* ns : {&pod_ns, &host_ns}) {
      RunResult r = Ip({"netns", "add", *ns});
      if (r.status != 0) {
        ns->clear();
        return "ip netns add: " + r.err;
      }
    }
    const std::vector<std::vector<std::string>> steps = {
        {"-n", host_ns, "link", "add", "h0", "type", "veth", "peer", "name", "eth0", "netns",
         pod_ns},
        {"-n", pod_ns, "addr", "add", std::string(kPodIp) + "/24", "dev", "eth0"},
        {"-n", pod_ns, "link", "set", "eth0", "up"},
        {"-n", pod_ns, "link", "set", "lo", "up"},
        {"-n", host_ns, "link", "set", "h0", "up"},
    };
    for (const auto& s : steps) {
      RunResult r = Ip(s);
      if (r.status != 0) return absl::StrCat("ip ", absl::StrJoin(s, " "), ": ", r.err);
    }
    return OpenCapture();
  }

  std::string OpenCapture() {
    auto ns = announce::ScopedNetns::Enter("/var/run/netns/" + host_ns);
    if (!ns.ok()) return std::string(ns.status().message());
    capture = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, htons(ETH_P_ARP));
    if (capture < 0) return absl::StrCat("packet socket: ", std::strerror(errno));
    sockaddr_ll sll{};
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(ETH_P_ARP);
    sll.sll_ifindex = static_cast<int>(if_nametoindex("h0"));
    if (bind(capture, reinterpret_cast<sockaddr*>(&sll), sizeof(sll)) != 0) {
      return absl::StrCat("bind: ", std::strerror(errno));
    }
    int on = 1;
    if (setsockopt(capture, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof(on)) != 0) {
      return absl::StrCat("SO_TIMESTAMPNS: ", std::strerror(errno));
    }
    return AwaitLiveStamps();
  }

  // The kernel stamps a frame on arrival only while its timestamp static key is on, and the
  // first SO_TIMESTAMPNS turns it on from a workqueue: until that runs (late under load) frames
  // are stamped when read, after ADD has exited. So wait until a frame sent from the pod side
  // carries a stamp from before send() returned, as ADD's frames will.
  std::string AwaitLiveStamps() {
    absl::StatusOr<std::unique_ptr<announce::PacketLink>> tx;
    {
      auto ns = announce::ScopedNetns::Enter("/var/run/netns/" + pod_ns);
      if (!ns.ok()) return std::string(ns.status().message());
      tx = announce::PacketLink::Open(static_cast<int>(if_nametoindex("eth0")),
                                      /*dad_state=*/false);
    }
    if (!tx.ok()) return std::string(tx.status().message());
    // An ARP probe (sender 0.0.0.0) for kMarkerIp: not a gratuitous ARP, so Garps() skips it.
    in_addr marker{};
    inet_pton(AF_INET, kMarkerIp, &marker);
    const std::vector<uint8_t> probe = announce::BuildArpProbe({0x02, 0, 0, 0, 0, 1}, marker);
    const absl::Time deadline = absl::Now() + absl::Seconds(5);
    while (absl::Now() < deadline) {
      if (absl::Status st = (*tx)->Send(probe); !st.ok()) return std::string(st.message());
      const absl::Time sent = absl::Now();
      std::optional<absl::Time> stamp;
      uint8_t buf[2048];
      absl::Time at;
      for (const absl::Time until = sent + absl::Milliseconds(200);
           !stamp && absl::Now() < until;) {
        const ssize_t n = Read(buf, &at);
        if (n < 0) {
          pollfd p{capture, POLLIN, 0};
          poll(&p, 1, 10);
        } else if (n >= 42 && std::memcmp(buf + 38, &marker, 4) == 0) {
          stamp = at;
        }
      }
      if (stamp && *stamp <= sent) return "";
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return "kernel receive timestamps still off after 5 s";
  }

  // Gratuitous ARPs for the pod's address (sender IP == target IP) received so far, with the
  // kernel's receive time of each; waits up to `wait` for the first when none is queued.
  std::vector<absl::Time> Garps(absl::Duration wait = absl::ZeroDuration()) {
    std::vector<absl::Time> out;
    in_addr pod{};
    inet_pton(AF_INET, kPodIp, &pod);
    const absl::Time deadline = absl::Now() + wait;
    for (;;) {
      uint8_t buf[2048];
      absl::Time t;
      const ssize_t n = Read(buf, &t);
      if (n < 0) {
        if (!out.empty() || absl::Now() >= deadline) break;
        pollfd p{capture, POLLIN, 0};
        poll(&p, 1, 10);
        continue;
      }
      // Ethernet(14) + ARP: op at 20, sender IP at 28, target IP at 38.
      if (n < 42 || buf[12] != 0x08 || buf[13] != 0x06) continue;
      if (std::memcmp(buf + 28, &pod, 4) != 0 || std::memcmp(buf + 38, &pod, 4) != 0) continue;
      out.push_back(t);
    }
    return out;
  }

 private:
  // One queued frame into `buf` (2048 bytes) and the kernel's receive time; -1 when none.
  ssize_t Read(uint8_t* buf, absl::Time* at) const {
    alignas(cmsghdr) char control[256];
    iovec iov{buf, 2048};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = control;
    mh.msg_controllen = sizeof(control);
    const ssize_t n = recvmsg(capture, &mh, 0);
    if (n < 0) return n;
    *at = absl::Now();
    for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c != nullptr; c = CMSG_NXTHDR(&mh, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_TIMESTAMPNS) {
        timespec ts;
        std::memcpy(&ts, CMSG_DATA(c), sizeof(ts));
        *at = absl::TimeFromTimespec(ts);
      }
    }
    return n;
  }
};

// A stand-in for the agent's hand-off socket: accepts, records each message and how many fds
// came with it, answers {"ok":true}.
class FakeAgent {
 public:
  explicit FakeAgent(std::string path) : path_(std::move(path)) {
    fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
    ok_ = fd_ >= 0 && bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
          listen(fd_, 16) == 0;
    thread_ = std::thread([this] { Serve(); });
  }
  ~FakeAgent() {
    stop_ = true;
    thread_.join();
    close(fd_);
    unlink(path_.c_str());
  }
  bool ok() const { return ok_; }
  std::vector<std::pair<Json, int>> messages() {
    std::lock_guard<std::mutex> l(mu_);
    return messages_;
  }

 private:
  void Serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 20) != 1) continue;
      int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      char buf[65536];
      alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
      iovec iov{buf, sizeof(buf)};
      msghdr mh{};
      mh.msg_iov = &iov;
      mh.msg_iovlen = 1;
      mh.msg_control = control;
      mh.msg_controllen = sizeof(control);
      const ssize_t n = recvmsg(c, &mh, MSG_CMSG_CLOEXEC);
      int fds = 0;
      for (cmsghdr* cm = CMSG_FIRSTHDR(&mh); cm != nullptr; cm = CMSG_NXTHDR(&mh, cm)) {
        if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
          fds = static_cast<int>((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
          for (int i = 0; i < fds; ++i) {
            int f;
            std::memcpy(&f, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
            close(f);
          }
        }
      }
      if (n > 0) {
        std::lock_guard<std::mutex> l(mu_);
        messages_.emplace_back(
            Json::parse(std::string(buf, static_cast<size_t>(n)), nullptr, false), fds);
      }
      const std::string ans = R"({"ok":true})";
      (void)!send(c, ans.data(), ans.size(), MSG_NOSIGNAL);
      close(c);
    }
  }

  std::string path_;
  int fd_ = -1;
  bool ok_ = false;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::pair<Json, int>> messages_;
};

class PluginTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root for network namespaces";
    dir_ = testing::MakeTempDir("fabric-cni");
    ASSERT_FALSE(dir_.empty());
    state_dir_ = dir_ + "/state";
    env_dir_ = dir_ + "/env";
    socket_ = dir_ + "/announce.sock";
  }
  void TearDown() override {
    // Whatever a failed test left running: stop it by its recorded pid.
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(state_dir_, ec)) {
      int pid = 0;
      std::istringstream(ReadFile(e.path())) >> pid;
      if (pid > 1 &&
          absl::StrContains(ReadFile(absl::StrCat("/proc/", pid, "/comm")), "fabric-cni-bg")) {
        kill(pid, SIGKILL);
      }
    }
    pods_.clear();
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }

  PodNet* NewPod() {
    auto pod = std::make_unique<PodNet>();
    const std::string err = pod->Create(absl::StrCat(getpid() % 100000, "-", pods_.size()));
    pods_.push_back(std::move(pod));
    if (!err.empty()) {
      ADD_FAILURE() << err;
      return nullptr;
    }
    return pods_.back().get();
  }

  std::string Version() const { return GetParam(); }

  std::string PrevResult(const PodNet& pod) const {
    const std::string v4 = Version() == "0.4.0" ? R"("version":"4",)" : "";
    return absl::StrCat(R"({"cniVersion":")", Version(), R"(","interfaces":[{"name":"h0"},)",
                        R"({"name":"eth0","mac":"0a:58:0a:4d:00:02","sandbox":")", pod.netns_path(),
                        R"("}],"ips":[{)", v4, R"("interface":1,"address":")", kPodIp,
                        R"(/24","gateway":"10.77.0.1"}],"dns":{}})");
  }

  // The config: our dirs and socket, a fast schedule unless `extra` says otherwise.
  std::string Config(const std::string& prev, const std::string& extra = "") const {
    std::string s = absl::StrCat(
        R"({"cniVersion":")", Version(), R"(","name":"fabnet","type":"fabric-cni","stateDir":")",
        state_dir_, R"(","envDir":")", env_dir_, R"(","agentSocket":")", socket_, R"(")");
    if (!absl::StrContains(extra, "\"announce\"")) {
      absl::StrAppend(&s, R"(,"announce":{"count":3,"intervalMs":100,"tailMs":[600]})");
    }
    if (!prev.empty()) absl::StrAppend(&s, R"(,"prevResult":)", prev);
    if (!extra.empty()) absl::StrAppend(&s, ",", extra);
    return s + "}";
  }

  std::vector<std::string> Env(const std::string& command, const std::string& id,
                               const std::string& netns) const {
    return {"CNI_COMMAND=" + command,
            "CNI_CONTAINERID=" + id,
            "CNI_NETNS=" + netns,
            "CNI_IFNAME=eth0",
            "CNI_PATH=/opt/cni/bin",
            "CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAMESPACE=jobs;K8S_POD_NAME=job-0;"
            "K8S_POD_UID=5d0c7a0e-91b2-4c36-9d5f-0a8e1c2b3d4f"};
  }

  RunResult Cni(const std::string& command, const std::string& id, const std::string& netns,
                const std::string& config) {
    auto r = testing::Run({FABRIC_CNI_BINARY}, absl::Seconds(30), Env(command, id, netns), config);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : RunResult{};
  }

  // The error JSON on stdout.
  static Json ErrorOf(const RunResult& r) { return Json::parse(r.out, nullptr, false); }

  std::string StateFile(const std::string& id) const {
    return state_dir_ + "/" + StateFileName(id, "eth0");
  }
  std::string EnvFile(const std::string& id) const { return env_dir_ + "/" + id + ".env"; }
  // The pod record of container `id` (eth0) in the namespace at `netns`.
  std::string RecordFile(const std::string& id, const std::string& netns) const {
    struct stat st {};
    EXPECT_EQ(stat(netns.c_str(), &st), 0) << netns;
    return absl::StrCat(env_dir_, "/pods/", podrecord::FileName(st.st_ino, id, "eth0"));
  }
  static bool Exists(const std::string& p) { return access(p.c_str(), F_OK) == 0; }
  int RecordedPid(const std::string& id) const {
    int pid = 0;
    std::istringstream(ReadFile(StateFile(id))) >> pid;
    return pid;
  }
  // Running (a zombie is not: nothing here may reap the reparented repeater).
  static bool Alive(int pid) {
    if (pid <= 0) return false;
    const std::string stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
    const size_t paren = stat.rfind(')');
    return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z' &&
           stat[paren + 2] != 'X';
  }

  std::string dir_, state_dir_, env_dir_, socket_;
  std::vector<std::unique_ptr<PodNet>> pods_;
};

// ADD announces before it returns and prints prevResult; the detached repeater sends the rest
// of the schedule after ADD has exited; CHECK passes; DEL stops everything and is repeatable.
TEST_P(PluginTest, AddCheckDel) {
  PodNet* pod = NewPod();
  ASSERT_NE(pod, nullptr);
  const std::string prev = PrevResult(*pod);
  const std::string conf = Config(prev);
  RunResult add = Cni("ADD", "ctr1", pod->netns_path(), conf);
  const absl::Time exited = absl::Now();
  ASSERT_EQ(add.status, 0) << add.out << add.err;
  EXPECT_EQ(Json::parse(add.out), Json::parse(prev)) << add.out;
  auto first = pod->Garps(absl::Seconds(1));
  ASSERT_FALSE(first.empty()) << add.err;
  EXPECT_LE(first[0], exited) << "the first gratuitous ARP arrived after ADD exited";
  EXPECT_TRUE(absl::StrContains(add.err, "announced 10.77.0.2/24 on eth0")) << add.err;

  // Detached mode (no agent socket): 0, 100, 200, 300 and 600 ms.
  const int pid = RecordedPid("ctr1");
  EXPECT_TRUE(Alive(pid)) << ReadFile(StateFile("ctr1"));
  EXPECT_TRUE(testing::WaitFor([&] { return !Alive(pid); }, absl::Seconds(3)));
  std::vector<absl::Time> rest = pod->Garps(absl::Milliseconds(100));
  EXPECT_EQ(first.size() + rest.size(), 5u);

  // The env file: no RDMA behind a veth.
  const std::string env = ReadFile(EnvFile("ctr1"));
  EXPECT_TRUE(absl::StrContains(env, "# no RDMA device found behind eth0\n")) << env;
  EXPECT_TRUE(absl::StrContains(env, "NCCL_SOCKET_IFNAME==eth0\n")) << env;
  EXPECT_TRUE(absl::StrContains(env, "FABRIC_POD_IPS=10.77.0.2\n")) << env;
  struct stat st;
  ASSERT_EQ(stat(EnvFile("ctr1").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  // The pod record, named by the namespace's inode: the interface and address, no RDMA port.
  const std::string record_path = RecordFile("ctr1", pod->netns_path());
  absl::StatusOr<podrecord::PodRecord> record = podrecord::ParseRecord(ReadFile(record_path));
  ASSERT_TRUE(record.ok()) << record.status() << " " << record_path;
  EXPECT_EQ(record->container_id, "ctr1");
  EXPECT_EQ(record->netns, pod->netns_path());
  // The pod's UID and the interface's MAC, for the DRA driver's networkData.
  EXPECT_EQ(record->pod_uid, "5d0c7a0e-91b2-4c36-9d5f-0a8e1c2b3d4f");
  ASSERT_EQ(record->interfaces.size(), 1u);
  EXPECT_EQ(record->interfaces[0].name, "eth0");
  EXPECT_EQ(record->interfaces[0].mac, "0a:58:0a:4d:00:02");
  EXPECT_EQ(record->interfaces[0].addresses, std::vector<std::string>{"10.77.0.2/24"});
  EXPECT_TRUE(record->ports.empty());
  ASSERT_EQ(stat(record_path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);

  RunResult check = Cni("CHECK", "ctr1", pod->netns_path(), conf);
  EXPECT_EQ(check.status, 0) << check.out << check.err;
  EXPECT_EQ(check.out, "");

  for (int i = 0; i < 3; ++i) {
    RunResult del = Cni("DEL", "ctr1", pod->netns_path(), conf);
    EXPECT_EQ(del.status, 0) << del.out << del.err;
    EXPECT_EQ(del.out, "");
  }
  EXPECT_FALSE(Exists(EnvFile("ctr1")));
  EXPECT_FALSE(Exists(StateFile("ctr1")));
  EXPECT_FALSE(Exists(record_path));
}

TEST_P(PluginTest, CheckNoticesALostAddressAndEnvFile) {
  PodNet* pod = NewPod();
  ASSERT_NE(pod, nullptr);
  const std::string conf = Config(PrevResult(*pod), R"("announce":{"count":0,"tailMs":[]})");
  ASSERT_EQ(Cni("ADD", "ctr2", pod->netns_path(), conf).status, 0);
  ASSERT_EQ(unlink(EnvFile("ctr2").c_str()), 0);
  RunResult check = Cni("CHECK", "ctr2", pod->netns_path(), conf);
  EXPECT_NE(check.status, 0);
  EXPECT_TRUE(absl::StrContains(check.out, "env file")) << check.out;
  ASSERT_EQ(Ip({"-n", pod->pod_ns, "addr", "flush", "dev", "eth0"}).status, 0);
  check = Cni("CHECK", "ctr2", pod->netns_path(), conf);
  EXPECT_NE(check.status, 0);
  EXPECT_EQ(ErrorOf(check)["code"], 103) << check.out;
  EXPECT_TRUE(absl::StrContains(check.out, "no longer holds 10.77.0.2/24")) << check.out;
  // CHECK without prevResult is a config error.
  check = Cni("CHECK", "ctr2", pod->netns_path(), Config(""));
  EXPECT_EQ(ErrorOf(check)["code"], 7) << check.out;
}

// DEL must succeed with no or an empty prevResult, and after the netns is gone (with CNI_NETNS
// still naming it, or empty); it stops the repeater so no frame follows it.
TEST_P(PluginTest, DelCancelsTheRepeaterAndToleratesMissingPieces) {
  PodNet* pod = NewPod();
  ASSERT_NE(pod, nullptr);
  const std::string conf =
      Config(PrevResult(*pod), R"("announce":{"count":3,"intervalMs":100,"tailMs":[1500]})");
  ASSERT_EQ(Cni("ADD", "ctr3", pod->netns_path(), conf).status, 0);
  const int pid = RecordedPid("ctr3");
  ASSERT_TRUE(Alive(pid));
  absl::SleepFor(absl::Milliseconds(400));
  const size_t before = pod->Garps().size();
  EXPECT_EQ(before, 4u);
  RunResult del = Cni("DEL", "ctr3", pod->netns_path(), Config(""));  // no prevResult
  EXPECT_EQ(del.status, 0) << del.out << del.err;
  EXPECT_FALSE(Alive(pid));
  absl::SleepFor(absl::Milliseconds(1400));  // past the 1.5 s tail
  EXPECT_TRUE(pod->Garps().empty()) << "frames after DEL";
  EXPECT_FALSE(Exists(StateFile("ctr3")));

  EXPECT_EQ(Cni("DEL", "ctr3", pod->netns_path(), Config("{}")).status, 0);
  const std::string gone = pod->netns_path();
  ASSERT_EQ(Ip({"netns", "del", pod->pod_ns}).status, 0);
  pod->pod_ns.clear();
  for (const std::string& netns : {gone, std::string()}) {
    del = Cni("DEL", "ctr3", netns, Config(""));
    EXPECT_EQ(del.status, 0) << del.out << del.err;
    EXPECT_EQ(del.out, "");
  }
}

TEST_P(PluginTest, Errors) {
  PodNet* pod = NewPod();
  ASSERT_NE(pod, nullptr);
  struct Case {
    std::string name, netns, config;
    int code;
    std::string in_msg;
  };
  const std::string missing = absl::StrCat("/var/run/netns/fcni-missing-", getpid());
  const std::vector<Case> cases = {
      {"missing netns", missing, Config(PrevResult(*pod)), kInvalidEnv, missing},
      {"malformed stdin", pod->netns_path(), "{\"cniVersion\": \"1.0.0\", ", kDecodeFailure,
       "JSON"},
      {"wrong key type", pod->netns_path(), Config(PrevResult(*pod), R"("requireAgent":"yes")"),
       kInvalidConfig, "requireAgent"},
      {"no prevResult", pod->netns_path(), Config(""), kInvalidConfig, "prevResult"},
      {"missing interface", pod->netns_path(),
       Config(absl::StrReplaceAll(PrevResult(*pod), {{"\"eth0\"", "\"eth9\""}})), kInvalidConfig,
       "eth9"},
      {"unsupported version", pod->netns_path(),
       absl::StrReplaceAll(Config(PrevResult(*pod)), {{Version(), "0.3.1"}}), kIncompatibleVersion,
       "0.3.1"},
      {"agent required", pod->netns_path(), Config(PrevResult(*pod), R"("requireAgent":true)"),
       kTryAgain, "agent"},
  };
  for (const Case& c : cases) {
    RunResult r = Cni("ADD", "ctr4", c.netns, c.config);
    EXPECT_NE(r.status, 0) << c.name;
    Json err = ErrorOf(r);
    ASSERT_TRUE(err.is_object()) << c.name << ": " << r.out;
    EXPECT_EQ(err["code"], c.code) << c.name << ": " << r.out;
    EXPECT_TRUE(absl::StrContains(err.value("msg", ""), c.in_msg)) << c.name << ": " << r.out;
    EXPECT_TRUE(err.contains("cniVersion")) << c.name;
    EXPECT_FALSE(r.err.empty()) << c.name << ": nothing logged";
    // Nothing half-done.
    EXPECT_FALSE(Exists(EnvFile("ctr4"))) << c.name;
    EXPECT_FALSE(Exists(StateFile("ctr4"))) << c.name;
  }
}

TEST_P(PluginTest, Version) {
  RunResult r = Cni("VERSION", "", "", absl::StrCat(R"({"cniVersion":")", Version(), "\"}"));
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(Json::parse(r.out),
            Json::parse(R"({"cniVersion":"1.1.0","supportedVersions":["0.4.0","1.0.0","1.1.0"]})"));
}

// The agent takes the repeats: the fds travel, no repeater is started, DEL cancels there.
TEST_P(PluginTest, HandsOffToTheAgent) {
  PodNet* pod = NewPod();
  ASSERT_NE(pod, nullptr);
  FakeAgent agent(socket_);
  ASSERT_TRUE(agent.ok());
  const std::string conf = Config(PrevResult(*pod), R"("requireAgent":true)");
  RunResult add = Cni("ADD", "ctr5", pod->netns_path(), conf);
  ASSERT_EQ(add.status, 0) << add.out << add.err;
  EXPECT_EQ(pod->Garps(absl::Seconds(1)).size(), 1u);
  EXPECT_FALSE(Exists(StateFile("ctr5")));
  auto msgs = agent.messages();
  ASSERT_EQ(msgs.size(), 1u);
  EXPECT_EQ(msgs[0].first["kind"], "announce") << msgs[0].first.dump();
  EXPECT_EQ(msgs[0].first["containerId"], "ctr5") << msgs[0].first.dump();
  EXPECT_EQ(msgs[0].first["firstDone"], true);
  // The packet socket only: an IPv4-only pod needs no DAD-state (netlink) socket.
  EXPECT_EQ(msgs[0].second, 1);
  absl::SleepFor(absl::Milliseconds(700));
  EXPECT_TRUE(pod->Garps().empty()) << "the plugin itself repeated";
  EXPECT_EQ(Cni("CHECK", "ctr5", pod->netns_path(), conf).status, 0);
  EXPECT_EQ(Cni("DEL", "ctr5", pod->netns_path(), conf).status, 0);
  msgs = agent.messages();
  ASSERT_EQ(msgs.size(), 2u);
  EXPECT_EQ(msgs[1].first["kind"], "cancel") << msgs[1].first.dump();
  EXPECT_EQ(msgs[1].first["ifname"], "eth0") << "only this attachment is cancelled";
  EXPECT_EQ(msgs[1].second, 0);
}

// ADDs for different containers run in parallel (libcni does that).
TEST_P(PluginTest, ParallelAdds) {
  constexpr int kPods = 8;
  std::vector<PodNet*> pods;
  for (int i = 0; i < kPods; ++i) {
    pods.push_back(NewPod());
    ASSERT_NE(pods.back(), nullptr);
  }
  std::vector<std::unique_ptr<testing::Subprocess>> procs;
  for (int i = 0; i < kPods; ++i) {
    auto p = testing::Subprocess::Start({FABRIC_CNI_BINARY},
                                        Env("ADD", absl::StrCat("par", i), pods[i]->netns_path()),
                                        Config(PrevResult(*pods[i])));
    ASSERT_TRUE(p.ok());
    procs.push_back(std::move(*p));
  }
  for (int i = 0; i < kPods; ++i) {
    EXPECT_EQ(procs[i]->Wait(absl::Seconds(20)), 0) << procs[i]->Stdout() << procs[i]->Stderr();
    EXPECT_FALSE(pods[i]->Garps(absl::Seconds(1)).empty()) << "pod " << i;
  }
  for (int i = 0; i < kPods; ++i) {
    RunResult del = Cni("DEL", absl::StrCat("par", i), pods[i]->netns_path(), Config(""));
    EXPECT_EQ(del.status, 0) << del.err;
    EXPECT_FALSE(Exists(StateFile(absl::StrCat("par", i))));
  }
}

INSTANTIATE_TEST_SUITE_P(Versions, PluginTest, ::testing::Values("0.4.0", "1.0.0", "1.1.0"),
                         [](const auto& param_info) {
                           return absl::StrReplaceAll(param_info.param, {{".", "_"}});
                         });

// STATUS and GC exist from 1.1.0.
class Plugin11Test : public PluginTest {};

TEST_P(Plugin11Test, Status) {
  RunResult r = Cni("STATUS", "", "", Config(""));
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "");
  r = Cni("STATUS", "", "", Config("", R"("requireAgent":true)"));
  EXPECT_NE(r.status, 0);
  EXPECT_EQ(ErrorOf(r)["code"], kNotAvailable) << r.out;
  FakeAgent agent(socket_);
  ASSERT_TRUE(agent.ok());
  r = Cni("STATUS", "", "", Config("", R"("requireAgent":true)"));
  EXPECT_EQ(r.status, 0) << r.out << r.err;
}

TEST_P(Plugin11Test, GcRemovesWhatIsNotValid) {
  PodNet* pod = NewPod();
  ASSERT_NE(pod, nullptr);
  const std::string conf =
      Config(PrevResult(*pod), R"("announce":{"count":1,"intervalMs":100,"tailMs":[5000]})");
  ASSERT_EQ(Cni("ADD", "keep", pod->netns_path(), conf).status, 0);
  ASSERT_EQ(Cni("ADD", "stale", pod->netns_path(), conf).status, 0);
  const int keep = RecordedPid("keep"), stale = RecordedPid("stale");
  ASSERT_TRUE(Alive(keep));
  ASSERT_TRUE(Alive(stale));
  RunResult gc = Cni("GC", "", "", Config("", R"("cni.dev/valid-attachments":[
      {"containerID":"keep","ifname":"eth0"}])"));
  EXPECT_EQ(gc.status, 0) << gc.out << gc.err;
  EXPECT_TRUE(Alive(keep));
  EXPECT_FALSE(Alive(stale)) << "GC stderr: " << gc.err
                             << "\nstat: " << ReadFile(absl::StrCat("/proc/", stale, "/stat"));
  EXPECT_TRUE(Exists(StateFile("keep")));
  EXPECT_TRUE(Exists(EnvFile("keep")));
  EXPECT_FALSE(Exists(StateFile("stale")));
  EXPECT_FALSE(Exists(EnvFile("stale")));
  EXPECT_TRUE(Exists(RecordFile("keep", pod->netns_path())));
  EXPECT_FALSE(Exists(RecordFile("stale", pod->netns_path())));
  EXPECT_EQ(Cni("DEL", "keep", pod->netns_path(), conf).status, 0);
  EXPECT_FALSE(Alive(keep));
}

TEST_P(Plugin11Test, StatusAndGcNeed110) {
  for (const char* v : {"0.4.0", "1.0.0"}) {
    const std::string conf = absl::StrReplaceAll(Config(""), {{"1.1.0", v}});
    EXPECT_EQ(ErrorOf(Cni("STATUS", "", "", conf))["code"], kIncompatibleVersion) << v;
    EXPECT_EQ(ErrorOf(Cni("GC", "", "", conf))["code"], kIncompatibleVersion) << v;
  }
}

INSTANTIATE_TEST_SUITE_P(V110, Plugin11Test, ::testing::Values("1.1.0"),
                         [](const auto&) { return std::string("1_1_0"); });

}  // namespace
}  // namespace fabric::cni
