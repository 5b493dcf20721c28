// The real fabric-agent under sustained load: 64 clients calling SelectNics (each on its own
// connection) and 16 WatchInventory streams for FABRIC_LOAD_SECONDS (default 60) while the
// inventory changes twice a second. Every call must succeed, every watcher must follow the
// inventory to its last generation, and the agent's resident memory may grow by less than 5%
// between the end of the warm-up and the end of the run (not checked under AddressSanitizer,
// whose quarantine holds freed memory on purpose). tests/bench/soak_bench.cc prints the same
// soak's figures over Unix and TCP.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "fabric/v1/agent.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "tests/hosts/hosts.h"
#include "tests/testing/binaries.h"
#include "tests/testing/soak.h"
#include "tests/testing/subprocess.h"

#if defined(__SANITIZE_ADDRESS__)
#define FABRIC_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FABRIC_ASAN 1
#endif
#endif

namespace fabric {
namespace {

const std::string kAgent = testing::kAgentBinary;

TEST(AgentLoad, ManyCallersAndWatchersWithoutErrorsOrGrowth) {
  absl::Duration run = absl::Seconds(60);
  if (const char* s = std::getenv("FABRIC_LOAD_SECONDS")) {
    int secs = 0;
    if (absl::SimpleAtoi(s, &secs) && secs > 0) run = absl::Seconds(secs);
  }
  const std::string dir = testing::MakeTempDir("load_test");
  ASSERT_TRUE(testing::WriteExampleHost("roce-9port", dir + "/host").ok());
  const std::string sock = dir + "/agent.sock";
  auto agent =
      testing::Subprocess::Start({kAgent, "--socket=" + sock, "--sysfs=" + dir + "/host/sys",
                                  "--procfs=" + dir + "/host/proc"});
  ASSERT_TRUE(agent.ok());
  ASSERT_TRUE(testing::WaitFor([&] { return testing::UnixSocketAccepts(sock); }, absl::Seconds(20)))
      << (*agent)->Stderr();
  auto health = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel("unix:" + sock, grpc::InsecureChannelCredentials()));
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        grpc::health::v1::HealthCheckRequest req;
        req.set_service("fabric.v1.FabricAgent");
        grpc::health::v1::HealthCheckResponse resp;
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
        return health->Check(&ctx, req, &resp).ok() &&
               resp.status() == grpc::health::v1::HealthCheckResponse::SERVING;
      },
      absl::Seconds(20)));

  // The inventory changes twice a second: a port going down and up.
  const std::string state = dir + "/host/sys/class/infiniband/mlx5_8/ports/1/state";
  testing::SoakOptions opt;
  opt.target = "unix:" + sock;
  opt.agent = (*agent)->pid();
  opt.run = run;
  opt.warmup = std::max(absl::Seconds(2), run / 6);
  opt.change = [&](uint64_t round) {
    {
      std::ofstream out(state, std::ios::trunc);
      out << (round % 2 == 0 ? "1: DOWN\n" : "4: ACTIVE\n");
    }
    (*agent)->Signal(SIGHUP);
  };
  const testing::SoakReport r = testing::RunSoak(opt);
  ASSERT_TRUE((*agent)->running()) << (*agent)->Stderr();
  (*agent)->Signal(SIGTERM);
  EXPECT_EQ((*agent)->Wait(absl::Seconds(10)), 0);

  const int64_t rss_warm = r.warm.rss_kb, rss_end = r.end.rss_kb;
  std::printf(
      "load: %s, %llu SelectNics calls (%.0f/s), %llu inventory changes, generation "
      "%llu, RSS %lld kB after warm-up, %lld kB at the end (%+.2f%%)\n",
      absl::FormatDuration(run).c_str(), static_cast<unsigned long long>(r.calls),
      static_cast<double>(r.calls) / absl::ToDoubleSeconds(run),
      static_cast<unsigned long long>(r.changes), static_cast<unsigned long long>(r.generation),
      static_cast<long long>(rss_warm), static_cast<long long>(rss_end),
      100.0 * static_cast<double>(rss_end - rss_warm) / static_cast<double>(rss_warm));
  EXPECT_EQ(r.errors, 0u) << r.first_error;
  EXPECT_GT(r.calls, 1000u);
  EXPECT_GE(r.generation, r.changes / 2) << "the changes did not reach the inventory";
  EXPECT_TRUE(r.caught_up) << "a watcher fell behind for good";
  ASSERT_GT(rss_warm, 0);
#ifndef FABRIC_ASAN
  EXPECT_LT(static_cast<double>(rss_end - rss_warm), 0.05 * static_cast<double>(rss_warm))
      << "resident memory grew by 5% or more under steady load";
#endif
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace
}  // namespace fabric
