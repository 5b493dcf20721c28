// What the CDI spec costs the agent on sriov-512vf (520 RDMA devices, 8 GPUs): rendering it, a
// publish whose host changed in a way the spec does not show (render, compare, no write), a
// publish of the same host object (nothing), and a write when it did change (dot file, fsync,
// rename). The spec is written into a temporary directory.
//
//   cdi_bench [--host=sriov-512vf] [benchmark flags]
#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

#include "agent/daemon/cycle/cdi_publisher.h"
#include "agent/hostfs/host_fs.h"
#include "agent/inventory/discovery/discovery.h"
#include "agent/policy/select/pairing.h"
#include "agent/publish/cdi/cdi_spec.h"
#include "tests/hosts/hosts.h"

namespace fabric {
namespace {

namespace fs = std::filesystem;

std::string g_host = "sriov-512vf";
std::shared_ptr<const v1::Host> g_discovered;
std::string g_dir;

bool WriteExampleHostOk() {
  absl::Status s = testing::WriteExampleHost(g_host, g_dir + "/host");
  if (!s.ok()) std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
  return s.ok();
}

// As the agent publishes it: discovered, with the host-wide pairing.
const std::shared_ptr<const v1::Host>& Host() {
  if (g_discovered == nullptr) {
    char tmpl[] = "/tmp/cdi-bench.XXXXXX";
    g_dir = ::mkdtemp(tmpl);
    if (!WriteExampleHostOk()) std::abort();
    HostFsImpl sys(g_dir + "/host/sys"), proc(g_dir + "/host/proc");
    auto host = Discover(sys, proc);
    if (!host.ok()) std::abort();
    *host->mutable_pairing() = PairGpus(*host, {});
    g_discovered = std::make_shared<const v1::Host>(*std::move(host));
    fs::remove_all(g_dir + "/host");
    fs::create_directories(g_dir + "/cdi");
  }
  return g_discovered;
}

Snapshot SnapshotOf(std::shared_ptr<const v1::Host> host) {
  Snapshot s;
  s.host = std::move(host);
  return s;
}

void BM_Render(benchmark::State& state) {
  const v1::Host& host = *Host();
  size_t bytes = 0;
  for (auto _ : state) {
    auto spec = cdi::SpecJson(host, {});
    bytes = spec->size();
    benchmark::DoNotOptimize(spec);
  }
  state.counters["spec_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_Render)->Name("CdiSpec/render")->Unit(benchmark::kMillisecond);

// Of which the devices (the all-GPU selection, the job environment, the nodes), without JSON.
void BM_Devices(benchmark::State& state) {
  const v1::Host& host = *Host();
  for (auto _ : state) benchmark::DoNotOptimize(cdi::Devices(host, {}));
}
BENCHMARK(BM_Devices)->Name("CdiSpec/devices")->Unit(benchmark::kMillisecond);

// A GID changed on a port the spec does not show: a new host object, the same spec bytes.
void BM_PublishNoChange(benchmark::State& state) {
  CdiPublisher pub(g_dir + "/cdi", {});
  Snapshot a = SnapshotOf(Host());
  Snapshot b = SnapshotOf(std::make_shared<const v1::Host>(*Host()));
  if (!pub.Sync(a).ok()) std::abort();
  const size_t writes = pub.writes();
  bool flip = false;
  for (auto _ : state) {
    benchmark::DoNotOptimize(pub.Sync((flip = !flip) ? b : a));
  }
  if (pub.writes() != writes) state.SkipWithError("the unchanged spec was written");
  state.counters["renders"] = static_cast<double>(pub.renders());
}
BENCHMARK(BM_PublishNoChange)
    ->Name("CdiPublish/host_changed_spec_same")
    ->Unit(benchmark::kMillisecond);

// Only the agent's findings changed: the same host object, nothing rendered.
void BM_PublishSameHost(benchmark::State& state) {
  CdiPublisher pub(g_dir + "/cdi", {});
  Snapshot a = SnapshotOf(Host());
  if (!pub.Sync(a).ok()) std::abort();
  for (auto _ : state) benchmark::DoNotOptimize(pub.Sync(a));
  state.counters["renders"] = static_cast<double>(pub.renders());
}
BENCHMARK(BM_PublishSameHost)->Name("CdiPublish/same_host")->Unit(benchmark::kMicrosecond);

// The spec changed (a GPU's NIC went down and back): rendered and written every time.
void BM_PublishChanged(benchmark::State& state) {
  CdiPublisher pub(g_dir + "/cdi", {});
  v1::Host down = *Host();
  auto devices = cdi::Devices(down, {});
  if (!devices.ok() || devices->front().name != "gpu0") std::abort();
  for (v1::RdmaDevice& d : *down.mutable_rdma_devices()) {
    if ("/dev/infiniband/" + d.uverbs_device() != devices->front().nodes.front()) continue;
    for (v1::Port& p : *d.mutable_ports()) p.set_state(v1::PORT_STATE_DOWN);  // gpu0's NIC.
  }
  *down.mutable_pairing() = PairGpus(down, {});
  Snapshot a = SnapshotOf(Host());
  Snapshot b = SnapshotOf(std::make_shared<const v1::Host>(std::move(down)));
  bool flip = false;
  for (auto _ : state) benchmark::DoNotOptimize(pub.Sync((flip = !flip) ? b : a));
  // The first may find its bytes on disk from the run before.
  if (pub.writes() + 1 < static_cast<size_t>(state.iterations())) {
    state.SkipWithError("the changed spec was not written");
  }
  state.counters["writes"] = static_cast<double>(pub.writes());
}
BENCHMARK(BM_PublishChanged)
    ->Name("CdiPublish/spec_changed_written")
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace fabric

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--host=", 7) == 0) fabric::g_host = argv[i] + 7;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  if (!fabric::g_dir.empty()) std::filesystem::remove_all(fabric::g_dir);
  return 0;
}
