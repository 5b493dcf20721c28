// The DRA driver's costs on the 512-VF example host, against the tests' API server (its own
// process, TLS, every write validated against resource.k8s.io/v1's schema): the slices written
// and the time from Publish to all of them on the server; API writes per inventory change that
// changes no device (goal 0) and per health finding on one NIC; NodePrepareResources p50/p99 for
// claims of 1 and of 8 devices (each claim read from the server, prepared, its CDI spec written).
//   usage: dra_bench [--claims=N] (default 200 per size)
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/daemon/workers/dra/dra_slices.h"
#include "agent/daemon/workers/dra/kubelet_plugin.h"
#include "tests/dra/fake_apiserver.h"
#include "tests/hosts/discovered.h"
#include "tests/hosts/hosts.h"

namespace fabric {
namespace {

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

void Publish(Publisher* p, const v1::Host& host, const v1::Health& health) {
  Snapshot s;
  s.host = std::make_shared<const v1::Host>(host);
  s.health = health;
  Built b;
  p->Publish(Publication{s, nullptr, b, absl::Now()});
}

int Main(int argc, char** argv) {
  int claims = 200;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--claims=", 0) != 0 || !absl::SimpleAtoi(a.substr(9), &claims) || claims < 1) {
      std::fprintf(stderr, "dra_bench: bad argument %s\n", argv[i]);
      return 2;
    }
  }
  auto server = testing::FakeApiServer::Start();
  if (!server.ok()) {
    std::fprintf(stderr, "dra_bench: %s\n", std::string(server.status().message()).c_str());
    return 1;
  }
  const v1::Host& host = testing::DiscoveredExampleHost("sriov-512vf");
  DraSlicesOptions so;
  so.node = "node-a";
  so.node_condition = false;
  auto slices = DraSlices::Start(*kubeapi::KubeApiImpl::Create((*server)->Config()), so);
  if (!slices.ok()) return 1;
  absl::Time t0 = absl::Now();
  Publish(slices->get(), host, {});
  if (!(*slices)->WaitSynced(absl::Seconds(120))) return 1;
  const DraSlices::Stats first = (*slices)->stats();
  std::printf("publish sriov-512vf (520 devices): %zu slices, %llu writes, %.0f ms\n", first.slices,
              static_cast<unsigned long long>(first.writes), Ms(absl::Now() - t0));

  v1::Host unrelated = host;
  unrelated.set_kernel_release("6.1.0-99-amd64");
  for (v1::Netdev& n : *unrelated.mutable_netdevs()) n.set_mtu(n.mtu() == 9000 ? 1500 : 9000);
  t0 = absl::Now();
  Publish(slices->get(), unrelated, {});
  (*slices)->WaitSynced(absl::Seconds(60));
  std::printf("an inventory change that changes no device: %llu writes, %.0f ms\n",
              static_cast<unsigned long long>((*slices)->stats().writes - first.writes),
              Ms(absl::Now() - t0));
  v1::Health health;
  v1::Finding* f = health.add_findings();
  f->set_severity(v1::SEVERITY_CRITICAL);
  f->set_check("port_state");
  f->set_code("port_state.down");
  f->set_subject(host.rdma_devices(0).name() + ":1");
  const uint64_t before = (*slices)->stats().writes;
  t0 = absl::Now();
  Publish(slices->get(), unrelated, health);
  (*slices)->WaitSynced(absl::Seconds(60));
  std::printf(
      "a CRITICAL finding on one NIC: %llu writes (a new generation on every slice), "
      "%.0f ms\n",
      static_cast<unsigned long long>((*slices)->stats().writes - before), Ms(absl::Now() - t0));

  const std::string dir = testing::MakeTempDir("dra-bench");
  std::filesystem::create_directories(dir + "/cdi");
  DraPluginOptions po;
  po.registry_dir = dir + "/reg";
  po.plugin_dir = dir + "/plugin";
  po.cdi_dir = dir + "/cdi";
  po.node = "node-a";
  auto plugin = DraPlugin::Start(*kubeapi::KubeApiImpl::Create((*server)->Config()), po);
  if (!plugin.ok()) return 1;
  Publish(plugin->get(), host, {});
  for (int size : {1, 8}) {
    nlohmann::json objects = nlohmann::json::array();
    for (int i = 0; i < claims; ++i) {
      nlohmann::json results = nlohmann::json::array();
      for (int d = 0; d < size; ++d) {
        results.push_back({{"request", "nic"},
                           {"driver", "rdma.fabric.io"},
                           {"pool", "node-a"},
                           {"device", absl::StrCat("mlx5-", 8 + (i * size + d) % 512)}});
      }
      objects.push_back({{"apiVersion", "resource.k8s.io/v1"},
                         {"kind", "ResourceClaim"},
                         {"metadata",
                          {{"name", absl::StrCat("c", size, "-", i)},
                           {"namespace", "jobs"},
                           {"uid", absl::StrCat("u", size, "-", i)}}},
                         {"status", {{"allocation", {{"devices", {{"results", results}}}}}}}});
    }
    if (!(*server)->Objects(objects).ok()) return 1;
    std::vector<double> ms;
    for (int i = 0; i < claims; ++i) {
      drav1::NodePrepareResourcesRequest req;
      drav1::Claim* c = req.add_claims();
      c->set_namespace_("jobs");
      c->set_name(absl::StrCat("c", size, "-", i));
      c->set_uid(absl::StrCat("u", size, "-", i));
      const absl::Time s = absl::Now();
      auto resp = (*plugin)->Prepare(req);
      ms.push_back(Ms(absl::Now() - s));
      if (!resp.claims().at(c->uid()).error().empty()) {
        std::fprintf(stderr, "dra_bench: %s\n", resp.claims().at(c->uid()).error().c_str());
        return 1;
      }
    }
    std::sort(ms.begin(), ms.end());
    std::printf("NodePrepareResources, %d device%s a claim (%d claims): p50 %.2f ms, p99 %.2f ms\n",
                size, size == 1 ? "" : "s", claims, ms[ms.size() / 2],
                ms[std::min(ms.size() - 1, ms.size() * 99 / 100)]);
  }
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace fabric

int main(int argc, char** argv) { return fabric::Main(argc, argv); }
