// NCCL's environment plugin (libnccl-env-fabric.so) as NCCL uses it: init (fabric-env asked once,
// its answer kept) on an example host's published host, then getEnv for a variable the plugin
// answers, one the process set itself and one nobody has, per lookup (goal: under a microsecond).
// Prints medians; asserts only that init answered and lookups found what fabric-env gave.
//
// nccl_env_bench [--hosts=dgx-h100-ib,sriov-512vf] [--runs=11] [--lookups=1000000]
#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "agent/ncclenv/nccl_env_api.h"
#include "agent/publish/hostfile/host_file.h"
#include "tests/hosts/discovered.h"
#include "tests/testing/binaries.h"
#include "tests/testing/subprocess.h"

namespace fabric {
namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int Main(int argc, char** argv) {
  std::vector<std::string> hosts = {"dgx-h100-ib", "sriov-512vf"};
  int runs = 11;
  int64_t lookups = 1000000;
  for (int i = 1; i < argc; ++i) {
    std::vector<std::string> kv = absl::StrSplit(argv[i], absl::MaxSplits('=', 1));
    if (kv.size() == 2 && kv[0] == "--hosts") {
      hosts = absl::StrSplit(kv[1], ',', absl::SkipEmpty());
    } else if (kv.size() == 2 && kv[0] == "--runs" && absl::SimpleAtoi(kv[1], &runs) && runs > 0) {
    } else if (kv.size() == 2 && kv[0] == "--lookups" && absl::SimpleAtoi(kv[1], &lookups) &&
               lookups > 0) {
    } else {
      std::fprintf(stderr, "nccl_env_bench: bad argument %s\n", argv[i]);
      return 2;
    }
  }
  void* lib = dlopen(FABRIC_NCCL_ENV_PLUGIN, RTLD_NOW | RTLD_LOCAL);
  const auto* plugin =
      lib != nullptr ? static_cast<const ncclEnv_v1_t*>(dlsym(lib, "ncclEnvPlugin_v1")) : nullptr;
  if (plugin == nullptr) {
    std::fprintf(stderr, "nccl_env_bench: cannot load %s\n", FABRIC_NCCL_ENV_PLUGIN);
    return 1;
  }
  const std::string dir = testing::MakeTempDir("nccl_env_bench");
  setenv("FABRIC_ENV_BIN", testing::kFabricEnvBinary, 1);
  setenv("LOCAL_RANK", "3", 1);
  setenv("NCCL_DEBUG", "WARN", 1);  // One the process set: the real environment's answer.
  bool ok = true;
  std::printf("nccl_env_bench (median of %d; lookups of %lld)\n", runs,
              static_cast<long long>(lookups));
  for (const std::string& host : hosts) {
    const std::string path = dir + "/" + host + ".pb";
    std::ofstream(path) << hostfile::HostFileBytes(testing::DiscoveredExampleHost(host), {},
                                                   hostfile::OwnNetnsInode());
    setenv("FABRIC_HOST_FILE", path.c_str(), 1);
    std::vector<double> init_ms, owned_ns, user_ns, none_ns;
    for (int r = 0; r < runs; ++r) {
      const absl::Time start = absl::Now();
      plugin->init(2, 30, 7, "");
      init_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
      if (plugin->getEnv("NCCL_IB_HCA") == nullptr) {
        std::fprintf(stderr, "nccl_env_bench: %s: no NCCL_IB_HCA from the plugin\n", host.c_str());
        ok = false;
      }
      for (auto [name, out] : {std::pair{"NCCL_IB_HCA", &owned_ns},
                               {"NCCL_DEBUG", &user_ns},
                               {"FABRIC_NO_SUCH_VARIABLE", &none_ns}}) {
        size_t found = 0;
        const absl::Time t0 = absl::Now();
        for (int64_t i = 0; i < lookups; ++i) found += plugin->getEnv(name) != nullptr;
        out->push_back(absl::ToDoubleNanoseconds(absl::Now() - t0) / static_cast<double>(lookups));
        if (found == 0 && out != &none_ns) ok = false;
      }
      plugin->finalize();
    }
    std::printf(
        "  %-12s init %7.2f ms   getEnv: owned %6.1f ns, set by the process %6.1f ns, "
        "unknown %6.1f ns\n",
        host.c_str(), Median(init_ms), Median(owned_ns), Median(user_ns), Median(none_ns));
  }
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace fabric

int main(int argc, char** argv) { return fabric::Main(argc, argv); }
