// What the health monitor costs an idle agent on an example host (default sriov-512vf: 32 PFs
// whose ports are polled, 512 VFs that are not): the agent's CPU per second of wall time with the
// counters polled every second (NVSentinel's cadence; the bound is 1% of a core), and
// with polling an hour away, plus the polls and counter-file reads the monitor made. Asserts only
// that the monitor polled.
//
// health_bench [--idle=SECONDS (30)] [--host=sriov-512vf]
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "tests/hosts/hosts.h"
#include "tests/testing/binaries.h"
#include "tests/testing/hostile.h"
#include "tests/testing/scrape.h"
#include "tests/testing/subprocess.h"

namespace fabric {
namespace {

namespace fs = std::filesystem;

struct Figures {
  double cpu_ms_per_s = -1, polls = -1, reads = -1;
};

// One agent with polls every `interval_s`, idle for `idle` after its first poll (or start-up).
bool Measure(const std::string& dir, const fs::path& root, double interval_s, absl::Duration idle,
             Figures* out) {
  const std::string config = absl::StrCat(dir, "/config-", interval_s, ".json");
  std::ofstream(config) << "{\"health\": {\"pollIntervalS\": " << interval_s << "}}";
  const std::string socket = absl::StrCat(dir, "/agent-", interval_s, ".sock");
  auto agent = testing::Subprocess::Start(
      {testing::kAgentBinary, "--socket=" + socket, "--sysfs=" + (root / "sys").string(),
       "--procfs=" + (root / "proc").string(), "--config=" + config, "--lldp=false",
       "--ib-neighbors=false", "--announce-socket=", "--rescan-interval=3600",
       "--metrics=127.0.0.1:0"});
  if (!agent.ok() || !testing::WaitForSocket(**agent, socket)) {
    std::fprintf(stderr, "health_bench: the agent did not start\n");
    return false;
  }
  auto port = testing::WaitForLogged(**agent, "metrics on http://127.0.0.1:", absl::Seconds(10));
  if (!port) return false;
  const int metrics = std::stoi(*port);
  // Past start-up (the first inventory, the first poll's baseline) before the clock starts.
  absl::SleepFor(absl::Seconds(2));
  const testing::ProcStats a = testing::ReadProcStats((*agent)->pid());
  const absl::Time t0 = absl::Now();
  absl::SleepFor(idle);
  const testing::ProcStats b = testing::ReadProcStats((*agent)->pid());
  const double s = absl::ToDoubleSeconds(absl::Now() - t0);
  out->cpu_ms_per_s = (b.cpu_s - a.cpu_s) * 1e3 / s;
  auto [status, text] = testing::HttpGet(metrics, "/metrics");
  out->polls = testing::Sample(text, "fabric_health_polls_total");
  out->reads = testing::Sample(text, "fabric_health_counter_reads_total");
  (*agent)->Signal(SIGTERM);
  return (*agent)->Wait(absl::Seconds(20)) == 0;
}

int Main(int argc, char** argv) {
  double idle_s = 30;
  std::string host = "sriov-512vf";
  for (int i = 1; i < argc; ++i) {
    std::vector<std::string> kv = absl::StrSplit(argv[i], absl::MaxSplits('=', 1));
    if (kv.size() == 2 && kv[0] == "--idle" && absl::SimpleAtod(kv[1], &idle_s) && idle_s > 0) {
      continue;
    }
    if (kv.size() == 2 && kv[0] == "--host") {
      host = kv[1];
      continue;
    }
    std::fprintf(stderr, "usage: health_bench [--idle=SECONDS] [--host=NAME]\n");
    return 2;
  }
  const std::string dir = testing::MakeTempDir("health_bench");
  const fs::path root = fs::path(dir) / host;
  if (dir.empty() || !testing::WriteExampleHost(host, root).ok()) {
    std::fprintf(stderr, "health_bench: cannot write example host %s\n", host.c_str());
    return 2;
  }
  std::printf("health_bench: %s, idle %.0f s each\n", host.c_str(), idle_s);
  std::printf("  %-28s %10s %10s %8s %12s\n", "polling", "CPU ms/s", "% of core", "polls",
              "reads/poll");
  bool polled = false;
  for (double interval : {1.0, 3600.0}) {
    Figures f;
    if (!Measure(dir, root, interval, absl::Seconds(idle_s), &f)) {
      fs::remove_all(dir);
      return 1;
    }
    std::printf("  %-28s %10.3f %10.3f %8.0f %12.1f\n",
                interval == 1.0 ? "every 1 s" : "every hour (none)", f.cpu_ms_per_s,
                f.cpu_ms_per_s / 10, f.polls, f.polls > 0 ? f.reads / f.polls : 0.0);
    if (interval == 1.0) polled = f.polls >= 1;
  }
  fs::remove_all(dir);
  if (!polled) {
    std::fprintf(stderr, "health_bench: the monitor did not poll\n");
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace fabric

int main(int argc, char** argv) { return fabric::Main(argc, argv); }
