// What the job environment adds to a process's start: `fabric-env exec -- /bin/true` (the agent's
// published host file, no RPC) and `fabricctl exec -- /bin/true` (the published host file, the
// agent over its socket, local discovery with --sysfs) against `/bin/true` alone, interleaved run
// by run, on an example host (default the 8-GPU dgx-h100-ib). Each run is a fresh process in an
// environment holding only PATH and the launcher's LOCAL_RANK, as a launcher starts it. Prints
// medians and the added time; asserts only that every run exited 0. As root, also in a pod: a
// network namespace with fabric-cni's record of its interface (fabric-env narrows the host to the
// pod's NIC and GID), against /bin/true in that namespace.
//
// exec_bench [--runs=31] [--host=dgx-h100-ib] [--pin=CORE]
// --pin: the measured processes run on that one core (the agent started before stays free), as a
// launcher pinning its ranks starts them.
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "agent/publish/podrecord/pod_record.h"
#include "tests/hosts/hosts.h"
#include "tests/testing/binaries.h"
#include "tests/testing/netns.h"
#include "tests/testing/subprocess.h"

namespace fabric {
namespace {

namespace fs = std::filesystem;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int Main(int argc, char** argv) {
  int runs = 31;
  int pin = -1;
  std::string host = "dgx-h100-ib";
  for (int i = 1; i < argc; ++i) {
    std::vector<std::string> kv = absl::StrSplit(argv[i], absl::MaxSplits('=', 1));
    if (kv.size() == 2 && kv[0] == "--runs" && absl::SimpleAtoi(kv[1], &runs) && runs > 0) continue;
    if (kv.size() == 2 && kv[0] == "--pin" && absl::SimpleAtoi(kv[1], &pin) && pin >= 0 &&
        pin < CPU_SETSIZE) {
      continue;
    }
    if (kv.size() == 2 && kv[0] == "--host") {
      host = kv[1];
      continue;
    }
    std::fprintf(stderr, "exec_bench: bad argument %s\n", argv[i]);
    return 2;
  }
  const std::string dir = testing::MakeTempDir("exec_bench");
  const fs::path root = fs::path(dir) / host;
  if (!testing::WriteExampleHost(host, root).ok()) {
    std::fprintf(stderr, "exec_bench: no example host %s\n", host.c_str());
    return 2;
  }
  const std::string sysfs = "--sysfs=" + (root / "sys").string();
  const std::string procfs = "--procfs=" + (root / "proc").string();
  const std::string socket = dir + "/agent.sock";
  const std::string host_file = dir + "/fabric-env/host.pb";
  auto agent = testing::Subprocess::Start({testing::kAgentBinary, "--socket=" + socket, sysfs,
                                           procfs, "--host-file-dir=" + dir + "/fabric-env"});
  if (!agent.ok() || !testing::WaitForSocket(**agent, socket, absl::Seconds(60))) {
    std::fprintf(stderr, "exec_bench: the agent did not start\n");
    return 1;
  }
  const std::vector<std::string> launcher = {"/usr/bin/env", "-i", "PATH=/usr/bin:/bin",
                                             "LOCAL_RANK=3"};
  auto with = [&](std::vector<std::string> tail) {
    std::vector<std::string> cmd = launcher;
    cmd.insert(cmd.end(), tail.begin(), tail.end());
    return cmd;
  };
  std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"/bin/true", with({"/bin/true"})},
      {"fabric-env exec",
       with({testing::kFabricEnvBinary, "--host-file=" + host_file, "exec", "--", "/bin/true"})},
      {"exec host file",
       with({testing::kFabricctlBinary, "exec", "--host-file=" + host_file, "--", "/bin/true"})},
      {"exec via agent",
       with({testing::kFabricctlBinary, "exec", "--target=unix://" + socket, "--", "/bin/true"})},
      {"exec local", with({testing::kFabricctlBinary, "exec", sysfs, procfs, "--", "/bin/true"})},
  };
  // A pod: its namespace, its interface, fabric-cni's record naming the host's first RDMA device.
  std::unique_ptr<testing::VethPair> pod;
  std::vector<std::string> devices;
  for (const auto& e : fs::directory_iterator(root / "sys/class/infiniband")) {
    devices.push_back(e.path().filename());
  }
  std::sort(devices.begin(), devices.end());
  if (geteuid() == 0 && !devices.empty()) {
    testing::VethPairSpec spec;
    spec.prefix = "xbench";
    spec.pod_if = "net1";
    spec.pod_cidr = "10.50.0.11/24";
    auto made = testing::VethPair::Create(spec);
    struct stat st {};
    if (made.ok() && stat((*made)->pod_path().c_str(), &st) == 0) {
      pod = *std::move(made);
      podrecord::PodRecord r;
      r.container_id = "bench";
      r.ifname = "net1";
      r.netns_inode = st.st_ino;
      r.interfaces = {{"net1", {"10.50.0.11/24"}, ""}};
      jobenv::Pick p;
      p.device = devices.front();
      p.netdev = "net1";
      p.gid_index = 3;
      p.ipv4 = "10.50.0.11";
      r.ports = {p};
      fs::create_directories(dir + "/fabric-env/pods");
      std::ofstream(dir + "/fabric-env/pods/" + podrecord::FileName(st.st_ino, "bench", "net1"))
          << podrecord::RecordJson(r);
      auto in_pod = [&](std::vector<std::string> tail) {
        std::vector<std::string> cmd = {"/usr/sbin/ip", "netns", "exec", pod->pod()};
        tail.insert(tail.begin(), "CUDA_VISIBLE_DEVICES=0,1,2,3");
        for (const std::string& w : with(tail)) cmd.push_back(w);
        return cmd;
      };
      cases.push_back({"pod: /bin/true", in_pod({"/bin/true"})});
      cases.push_back(
          {"pod: fabric-env", in_pod({testing::kFabricEnvBinary, "--host-file=" + host_file, "exec",
                                      "--", "/bin/true"})});
    }
  }
  // The agent answers once its first inventory is published: one warm-up call.
  (void)testing::Run(cases[3].second, absl::Seconds(60));
  if (pin >= 0) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(pin, &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0) {
      std::fprintf(stderr, "exec_bench: cannot pin to core %d: %s\n", pin, std::strerror(errno));
      return 2;
    }
  }
  std::vector<std::vector<double>> ms(cases.size());
  bool ok = true;
  for (int i = 0; i < runs; ++i) {
    for (size_t c = 0; c < cases.size(); ++c) {
      const absl::Time start = absl::Now();
      auto r = testing::Run(cases[c].second, absl::Seconds(60));
      ms[c].push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
      if (!r.ok() || r->status != 0) {
        ok = false;
        std::fprintf(stderr, "%s failed: %s\n", cases[c].first.c_str(),
                     r.ok() ? r->err.c_str() : r.status().ToString().c_str());
      }
    }
  }
  std::printf("exec_bench host=%s runs=%d%s (median wall ms per process start)\n", host.c_str(),
              runs, pin >= 0 ? absl::StrCat(" pinned to core ", pin).c_str() : "");
  size_t pod_base = 0;
  for (size_t c = 0; c < cases.size(); ++c) {
    if (cases[c].first == "pod: /bin/true") pod_base = c;
  }
  for (size_t c = 0; c < cases.size(); ++c) {
    // In the pod the base is /bin/true in the pod (ip netns exec's own start included in both).
    const double base = Median(ms[cases[c].first.starts_with("pod:") ? pod_base : 0]);
    std::printf("  %-16s %8.2f ms   added %+7.2f ms\n", cases[c].first.c_str(), Median(ms[c]),
                Median(ms[c]) - base);
  }
  (*agent)->Signal(SIGTERM);
  (*agent)->Wait(absl::Seconds(10));
  std::error_code ec;
  fs::remove_all(dir, ec);
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace fabric

int main(int argc, char** argv) { return fabric::Main(argc, argv); }
