// What the kernel log costs the health monitor, in lines per second, at bounded memory: one
// record parsed and matched against the NIC rules (a line no rule matches, the common case, and
// an mlx5 fault line); a flood drained through the reader's rate bound (100,000 records queued,
// the bound keeps 10,000 and counts the rest); and batches of 4,096 matched lines about one of the
// host's NICs through HealthMonitor::OnKernelLog (deduplicated: one finding), without and with
// records lost in every batch (the kmsg_access.lost finding updated each time). The last prints
// the process's RSS growth over the run as a counter: a flood must not grow memory.
//
//   kmsg_bench [benchmark flags]
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/daemon/workers/health_monitor.h"
#include "agent/hostfs/kmsg.h"
#include "agent/inventory/discovery/discovery.h"
#include "agent/policy/health/log_rules.h"
#include "tests/hosts/hosts.h"
#include "tests/testing/hostile.h"
#include "tests/testing/subprocess.h"

namespace fabric {
namespace {

constexpr char kQuiet[] =
    "6,4521,81234567,-;EXT4-fs (nvme0n1p2): re-mounted. Opts: errors=remount-ro. Quota mode: "
    "none.\n";

std::string FaultLine(const std::string& pci) {
  return absl::StrCat("2,4522,81234568,-;mlx5_core ", pci,
                      ": poll_health:801:(pid 0): device's health compromised - reached miss "
                      "count\n SUBSYSTEM=pci\n DEVICE=+pci:",
                      pci, "\n");
}

void ParseAndMatch(benchmark::State& state, const std::string& record) {
  for (auto _ : state) {
    absl::StatusOr<KmsgRecord> r = ParseKmsgRecord(record);
    benchmark::DoNotOptimize(MatchNicLog(r->message, r->device));
  }
  state.SetItemsProcessed(state.iterations());
}
void BM_ParseAndMatchQuietLine(benchmark::State& state) { ParseAndMatch(state, kQuiet); }
BENCHMARK(BM_ParseAndMatchQuietLine);
void BM_ParseAndMatchFaultLine(benchmark::State& state) {
  ParseAndMatch(state, FaultLine("0000:3b:00.0"));
}
BENCHMARK(BM_ParseAndMatchFaultLine);

// A source with `n` copies of one record, as a flood leaves them in the ring buffer.
class Flood : public KmsgSource {
 public:
  Flood(std::string record, size_t n) : record_(std::move(record)), left_(n) {}
  absl::StatusOr<std::optional<std::string>> Next() override {
    if (left_ == 0) return std::nullopt;
    --left_;
    return record_;
  }

 private:
  std::string record_;
  size_t left_;
};

void BM_DrainFloodUnderTheRateBound(benchmark::State& state) {
  uint64_t kept = 0, dropped = 0;
  for (auto _ : state) {
    Flood flood(FaultLine("0000:3b:00.0"), 100000);
    KmsgReader reader(&flood);
    const absl::Time now = absl::FromUnixSeconds(1700000000);
    for (;;) {
      std::vector<KmsgRecord> batch = reader.Drain(now, 4096);
      kept += batch.size();
      if (reader.read() >= 100000) break;
    }
    dropped += reader.dropped();
  }
  state.SetItemsProcessed(state.iterations() * 100000);
  state.counters["kept_per_flood"] = static_cast<double>(kept) / state.iterations();
  state.counters["dropped_per_flood"] = static_cast<double>(dropped) / state.iterations();
}
BENCHMARK(BM_DrainFloodUnderTheRateBound)->Unit(benchmark::kMillisecond);

void BM_MonitorOnKernelLog(benchmark::State& state) {
  const std::string dir = testing::MakeTempDir("kmsg_bench");
  if (dir.empty() || !testing::WriteExampleHost("dgx-h100-ib", dir + "/host").ok()) {
    state.SkipWithError("cannot write the example host");
    return;
  }
  HostFsImpl sys(dir + "/host/sys"), proc(dir + "/host/proc");
  absl::StatusOr<v1::Host> host = Discover(sys, proc);
  if (!host.ok() || host->rdma_devices().empty()) {
    state.SkipWithError("cannot discover the example host");
    return;
  }
  const std::string pci = host->rdma_devices(0).pci().address();
  absl::StatusOr<KmsgRecord> record = ParseKmsgRecord(FaultLine(pci));
  MemoryClock clock{absl::Seconds(1000), absl::FromUnixSeconds(1700000000)};
  HealthMonitor monitor(&sys, {}, [&clock] { return clock; });
  monitor.Start();
  monitor.Follow(*host);
  const std::vector<KmsgRecord> batch(4096, *record);
  // range(0) 1: every batch comes with more records lost (the reader's totals grow by a batch
  // dropped over the rate bound), the worst case of the kmsg_access.lost finding and its log.
  const bool losing = state.range(0) != 0;
  KmsgCounts counts;
  const testing::ProcStats before = testing::ReadProcStats(getpid());
  for (auto _ : state) {
    clock.boot += absl::Milliseconds(1);
    if (losing) counts.rate_dropped += batch.size();
    benchmark::DoNotOptimize(monitor.OnKernelLog(batch, counts));
  }
  const testing::ProcStats after = testing::ReadProcStats(getpid());
  state.SetItemsProcessed(state.iterations() * batch.size());
  state.counters["rss_growth_kb"] = static_cast<double>(after.rss_kb - before.rss_kb);
  state.counters["matched"] = static_cast<double>(monitor.stats().kmsg_matched);
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_MonitorOnKernelLog)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace fabric

BENCHMARK_MAIN();
