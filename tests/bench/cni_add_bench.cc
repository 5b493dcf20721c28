// CNI ADD end to end, as libcni runs it: the reference bridge plugin (with host-local) alone, then
// fabric-cni chained after it with bridge's result as prevResult, in the same run, alternating
// per pod. Times each plugin process from spawn to exit, and the time from fabric-cni's spawn to
// its first gratuitous ARP on the wire (the kernel's receive timestamp on the bridge).
//
//   cni_add_bench [--pods=50] [--plugin=PATH] [--cni-path=/usr/lib/cni] [--agent-socket=PATH]
//                 [--fabric-keys=JSON]   (extra keys of fabric-cni's config, e.g.
//                                         '"podRouting":{"mode":"on"}')
//
// Without --agent-socket fabric-cni hands its repeats to a detached child; with it, to the agent
// listening there. Prints p50/p99 of: bridge ADD, fabric-cni ADD, the chain, first packet.
// Needs root; asserts nothing about speed.
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/net_tstamp.h>
#include <net/if.h>
#include <poll.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "tests/testing/binaries.h"
#include "tests/testing/subprocess.h"

extern char** environ;

namespace fabric {
namespace {

namespace fs = std::filesystem;
constexpr char kIp[] = "/usr/sbin/ip";

struct Spawned {
  int status = -1;
  std::string out;
  absl::Duration took;
  timespec started_realtime{};
};

// posix_spawn with stdin/stdout pipes: the least overhead between our clock and the plugin's.
Spawned Spawn(const std::string& path, const std::vector<std::string>& env,
              const std::string& stdin_data) {
  Spawned r;
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) return r;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  std::vector<char*> argv = {const_cast<char*>(path.c_str()), nullptr};
  std::vector<std::string> envs = env;
  envs.push_back("PATH=/usr/sbin:/usr/bin:/sbin:/bin");
  std::vector<char*> envp;
  for (auto& e : envs) envp.push_back(e.data());
  envp.push_back(nullptr);
  // Fill the pipe first (configs are far below the pipe's 64 KiB) so the plugin never waits.
  (void)!write(in[1], stdin_data.data(), stdin_data.size());
  close(in[1]);
  pid_t pid;
  clock_gettime(CLOCK_REALTIME, &r.started_realtime);
  const absl::Time t0 = absl::Now();
  int rc = posix_spawn(&pid, path.c_str(), &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  close(in[0]);
  close(out[1]);
  if (rc != 0) {
    close(out[0]);
    return r;
  }
  char buf[4096];
  ssize_t n;
  while ((n = read(out[0], buf, sizeof(buf))) > 0) r.out.append(buf, static_cast<size_t>(n));
  int status = 0;
  waitpid(pid, &status, 0);
  r.took = absl::Now() - t0;
  close(out[0]);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

double Pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

int Main(int argc, char** argv) {
  int pods = 50;
  std::string plugin = testing::kCniBinary;
  std::string cni_path = "/usr/lib/cni";
  std::string agent_socket = "/nonexistent/announce.sock";
  std::string fabric_keys;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&](const char* name) -> const char* {
      std::string p = absl::StrCat(name, "=");
      return a.rfind(p, 0) == 0 ? argv[i] + p.size() : nullptr;
    };
    if (const char* v = val("--pods")) {
      if (!absl::SimpleAtoi(v, &pods) || pods < 1) return 2;
    } else if (const char* v2 = val("--plugin")) {
      plugin = v2;
    } else if (const char* v3 = val("--cni-path")) {
      cni_path = v3;
    } else if (const char* v4 = val("--agent-socket")) {
      agent_socket = v4;
    } else if (const char* v5 = val("--fabric-keys")) {
      fabric_keys = absl::StrCat(",", v5);
    } else {
      std::fprintf(stderr,
                   "usage: cni_add_bench [--pods=N] [--plugin=PATH] [--cni-path=DIR] "
                   "[--agent-socket=PATH] [--fabric-keys=JSON]\n");
      return 2;
    }
  }
  if (geteuid() != 0) {
    std::fprintf(stderr, "cni_add_bench: needs root (namespaces, bridge)\n");
    return 77;
  }
  if (access((cni_path + "/bridge").c_str(), X_OK) != 0) {
    std::fprintf(stderr, "cni_add_bench: no %s/bridge (containernetworking-plugins)\n",
                 cni_path.c_str());
    return 77;
  }
  const std::string tag = absl::StrCat(getpid() % 100000);
  const std::string bridge = "fabbb" + tag;
  const std::string dir = testing::MakeTempDir("cni-bench");
  const std::string bridge_conf =
      absl::StrCat(R"({"cniVersion":"1.0.0","name":"bench","type":"bridge","bridge":")", bridge,
                   R"(","isGateway":true,"ipMasq":false,"ipam":{"type":"host-local","dataDir":")",
                   dir, R"(/ipam","ranges":[[{"subnet":"10.90.0.0/16"}]]}})");
  (void)testing::Run({kIp, "link", "add", bridge, "type", "bridge"});
  (void)testing::Run({kIp, "link", "set", bridge, "up"});

  int cap = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, htons(ETH_P_ARP));
  sockaddr_ll sll{};
  sll.sll_family = AF_PACKET;
  sll.sll_protocol = htons(ETH_P_ARP);
  sll.sll_ifindex = static_cast<int>(if_nametoindex(bridge.c_str()));
  int on = 1;
  if (cap < 0 || bind(cap, reinterpret_cast<sockaddr*>(&sll), sizeof(sll)) != 0 ||
      setsockopt(cap, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof(on)) != 0) {
    std::fprintf(stderr, "cni_add_bench: capture on %s: %s\n", bridge.c_str(), strerror(errno));
    return 1;
  }

  std::vector<double> t_bridge, t_fabric, t_chain, t_first;
  int failures = 0;
  for (int i = 0; i < pods; ++i) {
    const std::string ns = absl::StrCat("fab-bench-", tag, "-", i);
    (void)testing::Run({kIp, "netns", "add", ns});
    const std::vector<std::string> env = {
        "CNI_COMMAND=ADD", absl::StrCat("CNI_CONTAINERID=bench", tag, "x", i),
        "CNI_NETNS=/var/run/netns/" + ns, "CNI_IFNAME=eth0", "CNI_PATH=" + cni_path};
    Spawned b = Spawn(cni_path + "/bridge", env, bridge_conf);
    if (b.status != 0) {
      std::fprintf(stderr, "bridge ADD failed (%d): %s\n", b.status, b.out.c_str());
      ++failures;
      (void)testing::Run({kIp, "netns", "del", ns});
      continue;
    }
    // Drop earlier frames (the kernel's arp_notify for this pod) before fabric-cni runs.
    char drain[2048];
    while (recv(cap, drain, sizeof(drain), 0) > 0) {
    }
    const std::string fabric_conf = absl::StrCat(
        R"({"cniVersion":"1.0.0","name":"bench","type":"fabric-cni","agentSocket":")", agent_socket,
        R"(","stateDir":")", dir, R"(/state")", fabric_keys, R"(,"prevResult":)", b.out, "}");
    Spawned f = Spawn(plugin, env, fabric_conf);
    if (f.status != 0) {
      std::fprintf(stderr, "fabric-cni ADD failed (%d): %s\n", f.status, f.out.c_str());
      ++failures;
    } else {
      t_bridge.push_back(absl::ToDoubleMilliseconds(b.took));
      t_fabric.push_back(absl::ToDoubleMilliseconds(f.took));
      t_chain.push_back(absl::ToDoubleMilliseconds(b.took + f.took));
      // The first padded (60-byte) gratuitous ARP: fabric-cni's.
      const absl::Time until = absl::Now() + absl::Milliseconds(500);
      while (absl::Now() < until) {
        pollfd p{cap, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0) continue;
        char buf[2048];
        alignas(cmsghdr) char ctl[256];
        iovec iov{buf, sizeof(buf)};
        msghdr mh{};
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        mh.msg_control = ctl;
        mh.msg_controllen = sizeof(ctl);
        ssize_t n = recvmsg(cap, &mh, 0);
        if (n < 60 || std::memcmp(buf + 28, buf + 38, 4) != 0) continue;
        for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c != nullptr; c = CMSG_NXTHDR(&mh, c)) {
          if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_TIMESTAMPNS) {
            timespec ts;
            std::memcpy(&ts, CMSG_DATA(c), sizeof(ts));
            double ms = static_cast<double>(ts.tv_sec - f.started_realtime.tv_sec) * 1e3 +
                        static_cast<double>(ts.tv_nsec - f.started_realtime.tv_nsec) / 1e6;
            t_first.push_back(ms);
          }
        }
        break;
      }
    }
    std::vector<std::string> del = env;
    del[0] = "CNI_COMMAND=DEL";
    (void)Spawn(plugin, del, fabric_conf);
    (void)Spawn(cni_path + "/bridge", del, bridge_conf);
    (void)testing::Run({kIp, "netns", "del", ns});
  }
  close(cap);
  (void)testing::Run({kIp, "link", "del", bridge});
  fs::remove_all(dir);

  auto row = [](const char* name, const std::vector<double>& v) {
    std::printf("%-34s n=%-4zu p50 %7.2f ms   p99 %7.2f ms\n", name, v.size(), Pct(v, 0.5),
                Pct(v, 0.99));
  };
  std::printf("CNI ADD, %d pods (%s)\n", pods,
              agent_socket == "/nonexistent/announce.sock" ? "repeats in a detached child"
                                                           : "repeats handed to the agent");
  row("bridge+host-local ADD", t_bridge);
  row("fabric-cni ADD (chained)", t_fabric);
  row("bridge+host-local+fabric-cni", t_chain);
  row("fabric-cni start -> first GARP", t_first);
  std::printf(
      "added by fabric-cni at p50: %.2f ms (goal < 3 ms); first packet p50 %.2f ms "
      "(goal < 1 ms)\n",
      Pct(t_chain, 0.5) - Pct(t_bridge, 0.5), Pct(t_first, 0.5));
  if (failures > 0) std::printf("%d failed ADDs\n", failures);
  return failures > 0 || t_first.size() != t_fabric.size() ? 1 : 0;
}

}  // namespace
}  // namespace fabric

int main(int argc, char** argv) { return fabric::Main(argc, argv); }
