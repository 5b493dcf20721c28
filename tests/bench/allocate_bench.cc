// What the kubelet waits for at pod admission: the device plugin's Allocate and
// GetPreferredAllocation over gRPC on the agent's Unix socket, against the real agent on an
// example host (default sriov-512vf: 512 VFs in one EXCLUSIVE resource, env_at_allocate on, and
// a SHARED resource of the 8 PFs). Calls one after another from one client, as the kubelet makes
// them; prints p50 and p99 per call kind. Asserts only that every call succeeded.
//
// allocate_bench [--calls=2000] [--host=sriov-512vf]
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "k8s/deviceplugin/v1beta1/api.grpc.pb.h"
#include "tests/hosts/hosts.h"
#include "tests/testing/binaries.h"
#include "tests/testing/subprocess.h"

namespace fabric {
namespace {

namespace fs = std::filesystem;

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}

int Main(int argc, char** argv) {
  int calls = 2000;
  std::string host = "sriov-512vf";
  for (int i = 1; i < argc; ++i) {
    std::vector<std::string> kv = absl::StrSplit(argv[i], absl::MaxSplits('=', 1));
    if (kv.size() == 2 && kv[0] == "--calls" && absl::SimpleAtoi(kv[1], &calls) && calls > 0) {
      continue;
    }
    if (kv.size() == 2 && kv[0] == "--host") {
      host = kv[1];
      continue;
    }
    std::fprintf(stderr, "allocate_bench: bad argument %s\n", argv[i]);
    return 2;
  }
  const std::string dir = testing::MakeTempDir("allocate_bench");
  const fs::path root = fs::path(dir) / host;
  if (!testing::WriteExampleHost(host, root).ok()) {
    std::fprintf(stderr, "allocate_bench: no example host %s\n", host.c_str());
    return 2;
  }
  std::ofstream(dir + "/config.json") << R"({"devicePlugin": {"resources": [
      {"name": "fabric.io/vf", "mode": "EXCLUSIVE", "envAtAllocate": true,
       "selectors": {"function": "vf"}},
      {"name": "rdma/pf", "mode": "SHARED", "selectors": {"function": "pf"}}]}})";
  const std::string socket = dir + "/agent.sock";
  auto agent = testing::Subprocess::Start(
      {testing::kAgentBinary, "--socket=" + socket, "--sysfs=" + (root / "sys").string(),
       "--procfs=" + (root / "proc").string(), "--config=" + dir + "/config.json",
       "--device-plugin-dir=" + dir + "/dp", "--lldp=false", "--ib-neighbors=false",
       "--announce-socket="});
  if (!agent.ok() || !testing::WaitForSocket(**agent, socket, absl::Seconds(120))) {
    std::fprintf(stderr, "allocate_bench: the agent did not start\n");
    return 1;
  }
  auto plugin = [&](const std::string& sock) {
    return v1beta1::DevicePlugin::NewStub(
        grpc::CreateChannel("unix:" + dir + "/dp/" + sock, grpc::InsecureChannelCredentials()));
  };
  auto vf = plugin("fabric-fabric.io-vf.sock");
  auto pf = plugin("fabric-rdma-pf.sock");

  // The VFs' IDs as ListAndWatch gives them.
  std::vector<std::string> ids;
  {
    grpc::ClientContext ctx;
    auto stream = vf->ListAndWatch(&ctx, {});
    v1beta1::ListAndWatchResponse r;
    if (!stream->Read(&r)) {
      std::fprintf(stderr, "allocate_bench: no device list\n");
      return 1;
    }
    for (const auto& d : r.devices()) ids.push_back(d.id());
    ctx.TryCancel();
  }
  int failed = 0;
  auto measure = [&](const char* what, const std::function<grpc::Status()>& call) {
    std::vector<double> us;
    for (int i = 0; i < calls; ++i) {
      const absl::Time t0 = absl::Now();
      grpc::Status s = call();
      us.push_back(absl::ToDoubleMicroseconds(absl::Now() - t0));
      if (!s.ok()) {
        if (failed++ == 0) std::fprintf(stderr, "%s: %s\n", what, s.error_message().c_str());
      }
    }
    std::printf("%-44s p50 %8.1f us  p99 %8.1f us  (%d calls)\n", what, Percentile(us, 0.5),
                Percentile(us, 0.99), calls);
  };
  size_t next = 0;
  auto allocate = [&](auto& stub, int n, const std::vector<std::string>& from) {
    v1beta1::AllocateRequest req;
    auto* c = req.add_container_requests();
    for (int k = 0; k < n; ++k) c->add_devices_ids(from[next++ % from.size()]);
    v1beta1::AllocateResponse resp;
    grpc::ClientContext ctx;
    return stub->Allocate(&ctx, req, &resp);
  };
  std::printf("allocate_bench on %s: %zu VF devices\n", host.c_str(), ids.size());
  measure("Allocate 1 VF (env_at_allocate)", [&] { return allocate(vf, 1, ids); });
  measure("Allocate 8 VFs (env_at_allocate)", [&] { return allocate(vf, 8, ids); });
  measure("Allocate SHARED (all 8 PFs)", [&] { return allocate(pf, 1, {"pf-0", "pf-1"}); });
  measure("GetPreferredAllocation 8 of 512 VFs", [&] {
    v1beta1::PreferredAllocationRequest req;
    auto* c = req.add_container_requests();
    for (const std::string& id : ids) c->add_available_deviceids(id);
    c->set_allocation_size(8);
    v1beta1::PreferredAllocationResponse resp;
    grpc::ClientContext ctx;
    return vf->GetPreferredAllocation(&ctx, req, &resp);
  });
  // Issue 51: the largest Allocate the agent accepts (kMaxContainerRequests containers, each
  // asking for every VF: the biggest answer), its time and the agent's resident memory after;
  // and one container more, refused before any work.
  auto rss_mb = [&] {
    std::ifstream in("/proc/" + std::to_string((*agent)->pid()) + "/status");
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6)) / 1024;
    }
    return -1L;
  };
  {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    auto big = v1beta1::DevicePlugin::NewStub(grpc::CreateCustomChannel(
        "unix:" + dir + "/dp/fabric-fabric.io-vf.sock", grpc::InsecureChannelCredentials(), args));
    for (const int containers : {256, 257}) {
      v1beta1::AllocateRequest req;
      for (int c = 0; c < containers; ++c) {
        auto* cr = req.add_container_requests();
        for (const std::string& id : ids) cr->add_devices_ids(id);
      }
      const long before = rss_mb();
      v1beta1::AllocateResponse resp;
      grpc::ClientContext ctx;
      const absl::Time t0 = absl::Now();
      grpc::Status s = big->Allocate(&ctx, req, &resp);
      std::printf(
          "Allocate %d containers x %zu VFs: %s in %.1f ms, %zu response bytes, agent RSS "
          "%ld MB before, %ld MB after\n",
          containers, ids.size(), s.ok() ? "ok" : s.error_message().c_str(),
          absl::ToDoubleMilliseconds(absl::Now() - t0), resp.ByteSizeLong(), before, rss_mb());
      if (s.ok() != (containers == 256)) ++failed;
    }
    // The heap trimmer looks every 10 s.
    absl::SleepFor(absl::Seconds(12));
    std::printf("agent RSS 12 s later: %ld MB\n", rss_mb());
  }
  (*agent)->Signal(SIGTERM);
  (void)(*agent)->Wait(absl::Seconds(20));
  fs::remove_all(dir);
  return failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace fabric

int main(int argc, char** argv) { return fabric::Main(argc, argv); }
