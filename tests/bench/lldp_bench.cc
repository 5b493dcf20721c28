// What listening for LLDP costs the agent, and how soon a neighbour shows: the agent in a
// throwaway network namespace on roce-9port, whose 9 physical netdevs (eth0-eth8) are veths to a
// second namespace where Debian's lldpd plays the switch. Prints, in ms of CPU per second (utime +
// stime, and the live threads' schedstat): the idle agent without LLDP (--lldp=false), listening
// on the 9 netdevs with nothing arriving, and hearing a frame a second on each. Then the time from
// a frame's arrival on eth1 (a packet socket of this bench in the agent's namespace sees it too)
// to the watch event naming the neighbour it carried, for renames of the switch.
//
// usage: lldp_bench [--idle=SECONDS] [--renames=N]      (root; lldpd installed)
#include <grpcpp/grpcpp.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/fabric/announce/link.h"
#include "agent/fabric/neighbors/lldp.h"
#include "agent/fabric/neighbors/lldp_socket.h"
#include "fabric/v1/agent.grpc.pb.h"
#include "tests/hosts/hosts.h"
#include "tests/testing/binaries.h"
#include "tests/testing/hostile.h"
#include "tests/testing/subprocess.h"

namespace fabric {
namespace {

namespace fs = std::filesystem;
constexpr char kIp[] = "/usr/sbin/ip";
constexpr int kPorts = 9;

bool Sh(std::vector<std::string> args) {
  auto r = testing::Run(args, absl::Seconds(20));
  if (!r.ok() || r->status != 0) {
    std::fprintf(stderr, "lldp_bench: %s failed: %s\n", args[0].c_str(),
                 r.ok() ? r->err.c_str() : r.status().ToString().c_str());
    return false;
  }
  return true;
}

struct Bench {
  std::string dir, agent_ns, switch_ns;
  std::unique_ptr<testing::Subprocess> agent, lldpd;
  std::unique_ptr<v1::FabricAgent::Stub> stub;

  ~Bench() {
    lldpd.reset();
    agent.reset();
    if (!agent_ns.empty()) (void)testing::Run({kIp, "netns", "del", agent_ns});
    if (!switch_ns.empty()) (void)testing::Run({kIp, "netns", "del", switch_ns});
    if (!dir.empty()) fs::remove_all(dir);
  }

  bool Setup() {
    dir = testing::MakeTempDir("lldp_bench");
    if (dir.empty() || !testing::WriteExampleHost("roce-9port", dir + "/host").ok()) return false;
    fs::permissions(dir, fs::perms::others_exec | fs::perms::group_exec, fs::perm_options::add);
    agent_ns = absl::StrCat("lldpb-a-", getpid());
    switch_ns = absl::StrCat("lldpb-s-", getpid());
    if (!Sh({kIp, "netns", "add", agent_ns}) || !Sh({kIp, "netns", "add", switch_ns})) return false;
    for (int k = 0; k < kPorts; ++k) {
      const std::string eth = absl::StrCat("eth", k), sw = absl::StrCat("sw", k);
      if (!Sh({kIp, "link", "add", eth, "netns", agent_ns, "type", "veth", "peer", "name", sw,
               "netns", switch_ns}) ||
          !Sh({kIp, "-n", agent_ns, "link", "set", eth, "up"}) ||
          !Sh({kIp, "-n", switch_ns, "link", "set", sw, "up"})) {
        return false;
      }
    }
    return true;
  }

  bool StartAgent(bool lldp) {
    agent.reset();
    const std::string socket = dir + "/agent.sock";
    auto p = testing::Subprocess::Start({kIp, "netns", "exec", agent_ns, testing::kAgentBinary,
                                         "--socket=" + socket, "--sysfs=" + dir + "/host/sys",
                                         "--procfs=" + dir + "/host/proc", "--rescan-interval=3600",
                                         absl::StrCat("--lldp=", lldp ? "true" : "false")});
    if (!p.ok()) return false;
    agent = std::move(*p);
    if (!testing::WaitForSocket(*agent, socket)) return false;
    stub = v1::FabricAgent::NewStub(
        grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials()));
    absl::SleepFor(absl::Seconds(2));  // Start-up done.
    return true;
  }

  bool StartLldpd() {
    fs::create_directories("/run/lldpd");
    std::ofstream(dir + "/lldpd.conf") << "configure lldp tx-interval 1\n";
    std::vector<std::string> args = {kIp,
                                     "netns",
                                     "exec",
                                     switch_ns,
                                     "/usr/sbin/lldpd",
                                     "-d",
                                     "-u",
                                     dir + "/lldpd.ctl",
                                     "-O",
                                     dir + "/lldpd.conf",
                                     "-I",
                                     "sw*"};
    auto p = testing::Subprocess::Start(args);
    if (!p.ok()) return false;
    lldpd = std::move(*p);
    return true;
  }

  bool Rename(const std::string& name) {
    return Sh({kIp, "netns", "exec", switch_ns, "/usr/sbin/lldpcli", "-u", dir + "/lldpd.ctl",
               "configure", "system", "hostname", name});
  }

  // CPU of the agent per second of wall time over `idle`: its CPU clock and the live threads'
  // schedstat.
  std::pair<double, double> Idle(absl::Duration idle) {
    const pid_t pid = AgentPid();
    const testing::ProcStats a = testing::ReadProcStats(pid);
    const absl::Time t0 = absl::Now();
    absl::SleepFor(idle);
    const testing::ProcStats b = testing::ReadProcStats(pid);
    const double s = absl::ToDoubleSeconds(absl::Now() - t0);
    return {(b.cpu_s - a.cpu_s) * 1e3 / s, (b.live_threads_cpu_s - a.live_threads_cpu_s) * 1e3 / s};
  }

  // `ip netns exec` execs the agent: the same pid.
  pid_t AgentPid() const { return agent->pid(); }
};

int Main(int argc, char** argv) {
  double idle_s = 10;
  int renames = 20;
  for (int i = 1; i < argc; ++i) {
    absl::string_view a = argv[i];
    if (absl::StartsWith(a, "--idle=")) {
      if (!absl::SimpleAtod(a.substr(7), &idle_s)) return 2;
    } else if (absl::StartsWith(a, "--renames=")) {
      if (!absl::SimpleAtoi(a.substr(10), &renames)) return 2;
    } else {
      std::fprintf(stderr, "usage: lldp_bench [--idle=SECONDS] [--renames=N]\n");
      return 2;
    }
  }
  if (geteuid() != 0 || access("/usr/sbin/lldpd", X_OK) != 0) {
    std::fprintf(stderr, "lldp_bench: needs root and lldpd\n");
    return 77;
  }
  Bench b;
  if (!b.Setup()) return 1;
  const absl::Duration idle = absl::Seconds(idle_s);
  std::printf("lldp_bench: roce-9port, %d physical netdevs as veths; idle %.0f s each\n", kPorts,
              idle_s);
  std::printf("  %-52s %12s %12s\n", "agent", "CPU ms/s", "(schedstat)");
  if (!b.StartAgent(false)) return 1;
  auto off = b.Idle(idle);
  std::printf("  %-52s %12.3f %12.3f\n", "--lldp=false", off.first, off.second);
  if (!b.StartAgent(true)) return 1;
  auto quiet = b.Idle(idle);
  std::printf("  %-52s %12.3f %12.3f\n", "listening on 9 netdevs, nothing arriving", quiet.first,
              quiet.second);
  if (!b.StartLldpd()) return 1;
  absl::SleepFor(absl::Seconds(3));
  auto heard = b.Idle(idle);
  std::printf("  %-52s %12.3f %12.3f\n", "hearing 9 neighbours, a frame a second each", heard.first,
              heard.second);

  // Frame arrival (this bench's own socket on eth1, in the agent's namespace) to watch event.
  std::unique_ptr<neighbors::LldpSocketImpl> sock;
  {
    auto ns = announce::ScopedNetns::Enter("/var/run/netns/" + b.agent_ns);
    if (!ns.ok()) return 1;
    auto s = neighbors::LldpSocketImpl::Open("eth1");
    if (!s.ok()) return 1;
    sock = std::move(*s);
  }
  grpc::ClientContext ctx;
  auto reader = b.stub->WatchInventory(&ctx, {});
  v1::InventoryEvent ev;
  if (!reader->Read(&ev)) return 1;
  std::vector<double> ms;
  for (int i = 0; i < renames; ++i) {
    const std::string name = absl::StrCat("leaf-", i + 1);
    if (!b.Rename(name)) return 1;
    std::optional<absl::Time> arrived;
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (!arrived && absl::Now() < deadline) {
      pollfd p{sock->fd(), POLLIN, 0};
      (void)poll(&p, 1, 100);
      for (;;) {
        auto f = sock->Receive();
        if (!f.ok() || !f->has_value()) break;
        const absl::Time at = absl::Now();
        auto n = neighbors::ParseLldpFrame((*f)->bytes);
        if (n.ok() && n->system_name == name && !arrived) arrived = at;
      }
    }
    if (!arrived) return 1;
    std::optional<absl::Time> shown;
    while (!shown && reader->Read(&ev)) {
      for (const v1::InventoryChange& c : ev.changes()) {
        if (c.kind() == v1::InventoryChange::KIND_NEIGHBOR && c.subject() == "eth1" &&
            absl::StartsWith(c.new_value(), name + " ")) {
          shown = absl::Now();
        }
      }
    }
    if (!shown) return 1;
    ms.push_back(absl::ToDoubleMilliseconds(*shown - *arrived));
    absl::SleepFor(absl::Milliseconds(300));
  }
  std::sort(ms.begin(), ms.end());
  std::printf("  frame on eth1 -> watch event naming it (%zu renames): p50 %.2f ms, max %.2f ms\n",
              ms.size(), ms[ms.size() / 2], ms.back());
  ctx.TryCancel();
  return 0;
}

}  // namespace
}  // namespace fabric

int main(int argc, char** argv) { return fabric::Main(argc, argv); }
