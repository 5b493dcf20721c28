// The doctor's whole run on an example host (default sriov-512vf: 32 PFs, 512 VFs, 544 RDMA
// devices): `fabricctl doctor` and `fabric-env doctor` with the agent's answer from its published
// host (the job comparison and every rank's lines included), with the agent's own answer as the
// job's variables, and with hostile variables (5,000 HCA entries, a 100 KB UCX_TLS, garbage GID
// variables; the largest env file accepted, and a 16,000-entry UCX_NET_DEVICES refused before the
// work). Each run is a fresh process, as a job's pre-flight check runs; the bound is
// a second or two per run. Prints medians and maxima; asserts only that every run judged (exit
// 0-3, a verdict line).
//
// doctor_bench [--runs=11] [--host=sriov-512vf]
#include <sys/resource.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "tests/hosts/hosts.h"
#include "tests/testing/binaries.h"
#include "tests/testing/subprocess.h"

namespace fabric {
namespace {

namespace fs = std::filesystem;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int Main(int argc, char** argv) {
  int runs = 11;
  std::string host = "sriov-512vf";
  for (int i = 1; i < argc; ++i) {
    std::vector<std::string> kv = absl::StrSplit(argv[i], absl::MaxSplits('=', 1));
    if (kv.size() == 2 && kv[0] == "--runs" && absl::SimpleAtoi(kv[1], &runs) && runs > 0) continue;
    if (kv.size() == 2 && kv[0] == "--host") {
      host = kv[1];
      continue;
    }
    std::fprintf(stderr, "doctor_bench: bad argument %s\n", argv[i]);
    return 2;
  }
  const std::string dir = testing::MakeTempDir("doctor_bench");
  const fs::path root = fs::path(dir) / host;
  if (!testing::WriteExampleHost(host, root).ok()) {
    std::fprintf(stderr, "doctor_bench: no example host %s\n", host.c_str());
    return 2;
  }
  const std::string sysfs = "--sysfs=" + (root / "sys").string();
  const std::string procfs = "--procfs=" + (root / "proc").string();
  const std::string socket = dir + "/agent.sock";
  const std::string host_file = dir + "/fabric-env/host.pb";
  auto agent = testing::Subprocess::Start({testing::kAgentBinary, "--socket=" + socket, sysfs,
                                           procfs, "--host-file-dir=" + dir + "/fabric-env"});
  if (!agent.ok() || !testing::WaitForSocket(**agent, socket, absl::Seconds(120))) {
    std::fprintf(stderr, "doctor_bench: the agent did not start\n");
    return 1;
  }
  for (int i = 0; i < 600 && !fs::exists(host_file); ++i) absl::SleepFor(absl::Milliseconds(100));
  // The agent's answer for the whole host, as an env file; and a hostile one.
  auto answer = testing::Run({testing::kFabricctlBinary, "--target=unix://" + socket, "env",
                              "--gpus=all", "--format=shell"},
                             absl::Seconds(60));
  if (!answer.ok() || answer->status != 0) {
    std::fprintf(stderr, "doctor_bench: no answer from the agent\n");
    return 1;
  }
  const std::string good = dir + "/good.env", hostile = dir + "/hostile.env";
  std::ofstream(good) << answer->out;
  {
    std::string hcas;
    for (int i = 0; i < 5000; ++i) absl::StrAppend(&hcas, "mlx5_", i, ":1,");
    std::ofstream(hostile) << "NCCL_IB_HCA=" << hcas << "\nUCX_TLS=" << std::string(100000, 'x')
                           << "\nNCCL_IB_GID_INDEX=0x\nNCCL_IB_ADDR_RANGE=/999\n"
                           << "NCCL_SOCKET_IFNAME='^;rm -rf /'\n";
  }
  // The largest env file the doctor accepts (issue 51): 1 MiB at most, UCX's lists at their
  // bound (256 entries), NCCL's past theirs (NCCL ignores the rest), the remainder in filler
  // variables; and the 16,000-entry UCX_NET_DEVICES it refuses before the work.
  const std::string largest = dir + "/largest.env", refused = dir + "/refused.env";
  {
    std::string text = "UCX_NET_DEVICES=";
    for (int i = 0; i < 256; ++i) absl::StrAppend(&text, i ? "," : "", "mlx5_", i, ":1");
    text += "\nUCX_TLS=";
    for (int i = 0; i < 256; ++i) absl::StrAppend(&text, i ? "," : "", i % 2 ? "rc" : "bogus");
    text += "\nNCCL_IB_HCA=";
    for (int i = 0; i < 5000; ++i) absl::StrAppend(&text, "mlx5_", i, ":1,");
    text += "\nNCCL_SOCKET_IFNAME=";
    for (int i = 0; i < 5000; ++i) absl::StrAppend(&text, "eth", i, ",");
    text += "\n";
    // 960 KiB: a 1 MiB file encodes past the agent's 1 MiB request bound (gRPC's framing).
    for (int i = 0; text.size() < (960 << 10); ++i) {
      absl::StrAppend(&text, "FILLER_", i, "=", std::string(110, 'x'), "\n");
    }
    std::ofstream(largest) << text;
    std::string ucx = "UCX_NET_DEVICES=";
    for (int i = 0; i < 16000; ++i) absl::StrAppend(&ucx, i ? "," : "", "mlx5_", i % 8, ":1");
    std::ofstream(refused) << ucx << "\n";
  }
  const std::vector<std::string> launcher = {"/usr/bin/env", "-i", "PATH=/usr/bin:/bin"};
  auto with = [&](std::vector<std::string> tail) {
    std::vector<std::string> cmd = launcher;
    cmd.insert(cmd.end(), tail.begin(), tail.end());
    return cmd;
  };
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"fabricctl doctor (the answer)",
       with({testing::kFabricctlBinary, "doctor", "--host-file=" + host_file, sysfs, procfs,
             "--env-file=" + good})},
      {"fabric-env doctor (the answer)",
       with({testing::kFabricEnvBinary, "--host-file=" + host_file, "doctor", sysfs, procfs,
             "--env-file=" + good})},
      {"fabric-env doctor (hostile)", with({testing::kFabricEnvBinary, "--host-file=" + host_file,
                                            "doctor", sysfs, procfs, "--env-file=" + hostile})},
      {"fabricctl doctor --agent", with({testing::kFabricctlBinary, "--target=unix://" + socket,
                                         "doctor", "--agent", "--env-file=" + good})},
      {"fabric-env doctor (largest accepted)",
       with({testing::kFabricEnvBinary, "--host-file=" + host_file, "doctor", sysfs, procfs,
             "--env-file=" + largest})},
      {"fabricctl doctor --agent (largest)",
       with({testing::kFabricctlBinary, "--target=unix://" + socket, "doctor", "--agent",
             "--env-file=" + largest})},
      {"fabric-env doctor (16,000 refused)",
       with({testing::kFabricEnvBinary, "--host-file=" + host_file, "doctor", sysfs, procfs,
             "--env-file=" + refused})},
      {"fabricctl doctor --agent (refused)",
       with({testing::kFabricctlBinary, "--target=unix://" + socket, "doctor", "--agent",
             "--env-file=" + refused})},
  };
  std::vector<std::vector<double>> ms(cases.size());
  bool ok = true;
  for (int i = 0; i < runs; ++i) {
    for (size_t c = 0; c < cases.size(); ++c) {
      const absl::Time start = absl::Now();
      auto r = testing::Run(cases[c].second, absl::Seconds(60));
      ms[c].push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
      // A refusal is UNKNOWN (3) naming the bound; every other run judges.
      const bool refusal = absl::StrContains(cases[c].first, "refused");
      if (!r.ok() || r->status < 0 || r->status > 3 ||
          (refusal ? !absl::StrContains(r->err, "at most 256")
                   : !absl::StrContains(r->out, "DOCTOR "))) {
        ok = false;
        std::fprintf(
            stderr, "doctor_bench: %s: %s\n", cases[c].first.c_str(),
            r.ok() ? (r->out + r->err).c_str() : std::string(r.status().message()).c_str());
      }
    }
  }
  std::printf("doctor on %s, %d runs, each a fresh process\n", host.c_str(), runs);
  std::printf("%-34s %12s %12s\n", "", "median ms", "max ms");
  for (size_t c = 0; c < cases.size(); ++c) {
    std::printf("%-34s %12.1f %12.1f\n", cases[c].first.c_str(), Median(ms[c]),
                *std::max_element(ms[c].begin(), ms[c].end()));
  }
  // Peak memory: the largest of the doctors' processes, and the agent's after every call.
  rusage children{};
  getrusage(RUSAGE_CHILDREN, &children);
  std::printf("peak RSS of one doctor process: %ld KiB\n", children.ru_maxrss);
  std::ifstream status(absl::StrCat("/proc/", (*agent)->pid(), "/status"));
  for (std::string line; std::getline(status, line);) {
    if (absl::StartsWith(line, "VmHWM:")) std::printf("agent peak RSS (%s)\n", line.c_str());
  }
  (*agent)->Signal(SIGTERM);
  (*agent)->Wait(absl::Seconds(20));
  fs::remove_all(dir);
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace fabric

int main(int argc, char** argv) { return fabric::Main(argc, argv); }
