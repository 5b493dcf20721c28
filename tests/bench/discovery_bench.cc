// Whole-host discovery against the plain cost of reading every file of the same tree once.
//
//   discovery_bench [--large_pfs=32] [--large_vfs=7] [--large_gids=256] [benchmark flags]
//
// The large host defaults to 32 PFs with 7 VFs each, every one an RDMA device: 256 devices, each
// port with a 256-entry GID table. The tree is written once to a temporary directory; both
// sides then read from the page cache.
#include <benchmark/benchmark.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>

#include "agent/inventory/changes/changes.h"
#include "agent/inventory/discovery/discovery.h"
#include "agent/inventory/discovery/refresh.h"
#include "agent/inventory/query/host_query.h"
#include "agent/policy/health/health.h"
#include "agent/policy/place/place.h"
#include "agent/policy/select/pairing.h"
#include "agent/policy/select/select.h"
#include "agent/publish/nfd/nfd.h"
#include "tests/hosts/builder.h"
#include "tests/hosts/hosts.h"

namespace fabric {
namespace {

namespace fs = std::filesystem;

struct Tree {
  fs::path dir;
  size_t files = 0;
  size_t bytes = 0;
};

// Reads every regular file below dirfd once, following no links (each file is read once even
// though sysfs links reach it from several places).
void ReadAll(int dirfd, Tree* t) {
  int fd = ::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) return;
  char buf[4096];
  while (struct dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.' && (e->d_name[1] == 0 || (e->d_name[1] == '.' && e->d_name[2] == 0)))
      continue;
    if (e->d_type == DT_DIR) {
      int sub = ::openat(dirfd, e->d_name, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
      if (sub >= 0) {
        ReadAll(sub, t);
        ::close(sub);
      }
    } else if (e->d_type == DT_REG) {
      int f = ::openat(dirfd, e->d_name, O_RDONLY | O_CLOEXEC);
      if (f < 0) continue;
      ssize_t n;
      while ((n = ::read(f, buf, sizeof(buf))) > 0) t->bytes += static_cast<size_t>(n);
      ::close(f);
      ++t->files;
    }
  }
  ::closedir(d);
}

Tree Write(const testing::HostSpec& spec, const char* tag) {
  std::string tmpl =
      (fs::temp_directory_path() / (std::string("fabric-bench-") + tag + ".XXXXXX")).string();
  if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
  Tree t;
  t.dir = tmpl;
  fs::remove(t.dir);
  absl::Status s = testing::WriteHost(spec, t.dir);
  if (!s.ok()) {
    std::fprintf(stderr, "writing %s: %s\n", tag, std::string(s.message()).c_str());
    std::exit(1);
  }
  return t;
}

std::map<std::string, Tree>& Trees() {
  static std::map<std::string, Tree> trees;
  return trees;
}

void BM_ReadEveryFile(benchmark::State& state, const std::string& name) {
  Tree& t = Trees()[name];
  for (auto _ : state) {
    Tree count;
    int root = ::open(t.dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    ReadAll(root, &count);
    ::close(root);
    t.files = count.files;
    t.bytes = count.bytes;
    benchmark::DoNotOptimize(count.bytes);
  }
  state.counters["files"] = static_cast<double>(t.files);
}

void BM_Discover(benchmark::State& state, const std::string& name) {
  Tree& t = Trees()[name];
  HostFsImpl sys((t.dir / "sys").string());
  HostFsImpl proc((t.dir / "proc").string());
  int devices = 0;
  for (auto _ : state) {
    auto host = Discover(sys, proc);
    if (!host.ok()) {
      state.SkipWithError(std::string(host.status().message()).c_str());
      break;
    }
    devices = host->rdma_devices_size();
    benchmark::DoNotOptimize(host);
  }
  state.counters["rdma_devices"] = devices;
}

absl::StatusOr<v1::Host> DiscoverTree(const std::string& name) {
  Tree& t = Trees()[name];
  HostFsImpl sys((t.dir / "sys").string());
  HostFsImpl proc((t.dir / "proc").string());
  return Discover(sys, proc);
}

// What the agent does after each rescan: compare the new host with the served one.
void BM_DiffHostsUnchanged(benchmark::State& state, const std::string& name) {
  auto host = DiscoverTree(name);
  if (!host.ok()) {
    state.SkipWithError(std::string(host.status().message()).c_str());
    return;
  }
  const v1::Host copy = *host;  // No shared sub-messages: every field is compared.
  for (auto _ : state) benchmark::DoNotOptimize(DiffHosts(*host, copy));
  state.counters["host_bytes"] = static_cast<double>(host->ByteSizeLong());
}

// Place on the example host for each set size (what a launcher choosing GPUs asks).
void BM_Place(benchmark::State& state) {
  auto host = DiscoverTree("roce-9port");
  if (!host.ok()) {
    state.SkipWithError(std::string(host.status().message()).c_str());
    return;
  }
  v1::PlaceRequest req;
  req.set_gpu_count(static_cast<uint32_t>(state.range(0)));
  for (auto _ : state) {
    auto r = Place(*host, req, {});
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      break;
    }
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_Place)->Name("Place/roce-9port/gpus")->DenseRange(1, 8)->Unit(benchmark::kMicrosecond);

// The host-wide GPU-port pairing, as the agent computes it once per snapshot.
void BM_PairGpus(benchmark::State& state, const std::string& name) {
  auto host = DiscoverTree(name);
  if (!host.ok()) {
    state.SkipWithError(std::string(host.status().message()).c_str());
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(PairGpus(*host, {}));
}

// SelectNics for one GPU on the snapshot (pairing carried, as the agent serves it) and on a bare
// host (pairing computed in the call): what a per-GPU launcher's request costs.
void BM_SelectOneGpu(benchmark::State& state, const std::string& name, bool snapshot) {
  auto host = DiscoverTree(name);
  if (!host.ok() || host->accelerators().empty()) {
    state.SkipWithError("no host or no GPU");
    return;
  }
  if (snapshot) *host->mutable_pairing() = PairGpus(*host, {});
  const std::vector<std::string> gpu = {ComputeGpus(*host).front()};
  for (auto _ : state) {
    auto r = SelectNics(*host, gpu, {});
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      break;
    }
    benchmark::DoNotOptimize(r);
  }
}

// A targeted refresh after an event on the first port's netdev (what an address or GID change
// costs the agent), and the plan for a netdev nothing relates to (a pod's veth).
void BM_Refresh(benchmark::State& state, const std::string& name, bool related) {
  Tree& t = Trees()[name];
  HostFsImpl sys((t.dir / "sys").string());
  HostFsImpl proc((t.dir / "proc").string());
  auto host = Discover(sys, proc);
  if (!host.ok() || host->rdma_devices().empty()) {
    state.SkipWithError("no host or no RDMA device");
    return;
  }
  ChangeScope scope;
  scope.Netdev(related ? host->rdma_devices(0).ports(0).netdev() : "veth0c1d2e");
  scope.RouteVia(related ? host->rdma_devices(0).ports(0).netdev() : "veth0c1d2e");
  // Each refresh starts from the one before, as the agent's do (sharing what it did not read),
  // and the host it replaces is freed.
  RefreshedHost cur = ScannedHost(*std::move(host));
  for (auto _ : state) {
    RefreshPlan plan =
        PlanRefresh(*cur.host, scope, [&](const std::string& n) { return LookUpNetdev(sys, n); });
    if (plan.empty()) continue;
    auto r = Refresh(sys, proc, cur.host, plan);
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      break;
    }
    cur = *std::move(r);
  }
}

// What publishing a snapshot costs beside the refresh: the copy, health, GID findings, labels.
void BM_PublishPart(benchmark::State& state, const std::string& name, int part) {
  auto host = DiscoverTree(name);
  if (!host.ok()) {
    state.SkipWithError(std::string(host.status().message()).c_str());
    return;
  }
  *host->mutable_pairing() = PairGpus(*host, {});  // As the agent's snapshot carries it.
  for (auto _ : state) {
    switch (part) {
      case 0: {
        v1::Host copy = *host;
        benchmark::DoNotOptimize(copy);
        break;
      }
      case 1:
        benchmark::DoNotOptimize(EvaluateHealth(*host, {}));
        break;
      case 2:
        benchmark::DoNotOptimize(GidChangeFindings(*host, *host));
        break;
      default:
        benchmark::DoNotOptimize(RenderNfdFeatures(*host, {}));
    }
  }
}

// Records each benchmark's time so that the ratios can be printed after the run.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.run_type == Run::RT_Iteration && r.iterations > 0) {
        ns_[r.benchmark_name()] = r.GetAdjustedRealTime();  // in the run's time unit (us)
        cpu_[r.benchmark_name()] = r.GetAdjustedCPUTime();
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }
  void PrintRatios() const {
    std::printf("\n");
    for (const char* host : {"roce-9port", "large"}) {
      // Names carry suffixes such as "/process_time/real_time".
      auto d = ns_.lower_bound(std::string("Discover/") + host);
      auto r = ns_.lower_bound(std::string("ReadEveryFile/") + host);
      if (d == ns_.end() || r == ns_.end() || d->first.rfind(std::string("Discover/") + host, 0) ||
          r->first.rfind(std::string("ReadEveryFile/") + host, 0)) {
        continue;
      }
      const double cpu = cpu_.at(d->first);
      std::printf(
          "%-11s discovery %8.0f us wall, %8.0f us CPU; read every file once %8.0f us (%zu "
          "files); ratio wall %.2f, CPU %.2f\n",
          host, d->second, cpu, r->second, Trees()[host].files, d->second / r->second,
          cpu / r->second);
    }
  }

 private:
  std::map<std::string, double> ns_;
  std::map<std::string, double> cpu_;
};

}  // namespace
}  // namespace fabric

int main(int argc, char** argv) {
  using namespace fabric;  // NOLINT
  int pfs = 32, vfs = 7, gids = 256;
  // Our flags first; the rest go to Google Benchmark.
  int out = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::sscanf(argv[i], "--large_pfs=%d", &pfs) == 1 ||
        std::sscanf(argv[i], "--large_vfs=%d", &vfs) == 1 ||
        std::sscanf(argv[i], "--large_gids=%d", &gids) == 1) {
      continue;
    }
    argv[out++] = argv[i];
  }
  argc = out;
  auto roce = testing::ExampleHost("roce-9port");
  if (!roce.ok()) return 1;
  Trees()["roce-9port"] = Write(*roce, "roce");
  Trees()["large"] = Write(testing::LargeHost(pfs, vfs, gids), "large");
  for (const char* host : {"roce-9port", "large"}) {
    benchmark::RegisterBenchmark((std::string("ReadEveryFile/") + host).c_str(), BM_ReadEveryFile,
                                 std::string(host))
        ->Unit(benchmark::kMicrosecond);
    // Discovery reads GID tables on several threads: report wall time and the whole process's
    // CPU time, so that neither hides the other.
    benchmark::RegisterBenchmark((std::string("Discover/") + host).c_str(), BM_Discover,
                                 std::string(host))
        ->Unit(benchmark::kMicrosecond)
        ->MeasureProcessCPUTime()
        ->UseRealTime();
    benchmark::RegisterBenchmark((std::string("DiffHostsUnchanged/") + host).c_str(),
                                 BM_DiffHostsUnchanged, std::string(host))
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark((std::string("PairGpus/") + host).c_str(), BM_PairGpus,
                                 std::string(host))
        ->Unit(benchmark::kMicrosecond);
    for (bool related : {true, false}) {
      benchmark::RegisterBenchmark(
          (std::string("Refresh/") + host + (related ? "/port-netdev" : "/unrelated")).c_str(),
          BM_Refresh, std::string(host), related)
          ->Unit(benchmark::kMicrosecond)
          ->MeasureProcessCPUTime()
          ->UseRealTime();
    }
    int part = 0;
    for (const char* what : {"CopyHost", "EvaluateHealth", "GidChangeFindings", "RenderNfd"}) {
      benchmark::RegisterBenchmark((std::string(what) + "/" + host).c_str(), BM_PublishPart,
                                   std::string(host), part++)
          ->Unit(benchmark::kMicrosecond);
    }
    for (bool snapshot : {true, false}) {
      benchmark::RegisterBenchmark(
          (std::string("SelectOneGpu/") + host + (snapshot ? "/snapshot" : "/bare")).c_str(),
          BM_SelectOneGpu, std::string(host), snapshot)
          ->Unit(benchmark::kMicrosecond);
    }
  }
  benchmark::Initialize(&argc, argv);
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.PrintRatios();
  std::printf("large host: %d PFs x (1 + %d VFs) RDMA devices, %d-entry GID tables\n", pfs, vfs,
              gids);
  for (auto& [name, t] : Trees()) fs::remove_all(t.dir);
  benchmark::Shutdown();
  return 0;
}
