#include "tests/hosts/discovered.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <mutex>

#include "agent/hostfs/host_fs.h"
#include "agent/inventory/discovery/discovery.h"
#include "tests/hosts/hosts.h"
#include "tests/testing/subprocess.h"

namespace fabric::testing {

const v1::Host& DiscoveredExampleHost(const std::string& name) {
  static std::mutex mu;
  static auto* cache = new std::map<std::string, v1::Host>();
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache->find(name); it != cache->end()) return it->second;
  const std::string tmp = MakeTempDir("example-host");
  EXPECT_FALSE(tmp.empty());
  const std::filesystem::path dir = std::filesystem::path(tmp) / "host";
  absl::Status written = WriteExampleHost(name, dir);
  EXPECT_TRUE(written.ok()) << written;
  HostFsImpl sys((dir / "sys").string()), proc((dir / "proc").string());
  absl::StatusOr<v1::Host> host = Discover(sys, proc);
  std::error_code ec;
  std::filesystem::remove_all(tmp, ec);
  EXPECT_TRUE(host.ok()) << host.status();
  return cache->emplace(name, host.ok() ? *host : v1::Host()).first->second;
}

}  // namespace fabric::testing
