// The real fabric-agent under sustained load: 64 clients calling SelectNics (each on its own
// connection) and 16 WatchInventory streams for FABRIC_LOAD_SECONDS (default 60) while the
// inventory changes twice a second. Every call must succeed, every watcher must follow the
// inventory to its last generation, and the agent's resident memory may grow by less than 5%
// between the end of the warm-up and the end of the run (not checked under AddressSanitizer,
// whose quarantine holds freed memory on purpose).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "fabric/v1/agent.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "tests/hosts/hosts.h"
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

const std::string kAgent = FABRIC_BINARY_DIR "/agent/daemon/fabric-agent";

int64_t RssKb(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      int64_t kb = 0;
      std::string digits;
      for (char c : line) {
        if (c >= '0' && c <= '9') digits.push_back(c);
      }
      if (absl::SimpleAtoi(digits, &kb)) return kb;
    }
  }
  return -1;
}

// A stub on a connection of its own: gRPC shares one connection among channels with equal
// arguments, so each gets a distinct one.
std::unique_ptr<v1::FabricAgent::Stub> OwnConnection(const std::string& sock, const char* role,
                                                     int i) {
  grpc::ChannelArguments args;
  args.SetInt(role, i);
  return v1::FabricAgent::NewStub(
      grpc::CreateCustomChannel("unix:" + sock, grpc::InsecureChannelCredentials(), args));
}

std::unique_ptr<grpc::ClientContext> Ctx(absl::Duration d) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + absl::ToChronoNanoseconds(d));
  return ctx;
}

TEST(AgentLoad, ManyCallersAndWatchersWithoutErrorsOrGrowth) {
  absl::Duration run = absl::Seconds(60);
  if (const char* s = std::getenv("FABRIC_LOAD_SECONDS")) {
    int secs = 0;
    if (absl::SimpleAtoi(s, &secs) && secs > 0) run = absl::Seconds(secs);
  }
  const absl::Duration warmup = std::max(absl::Seconds(2), run / 6);
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
        auto ctx = Ctx(absl::Milliseconds(500));
        return health->Check(ctx.get(), req, &resp).ok() &&
               resp.status() == grpc::health::v1::HealthCheckResponse::SERVING;
      },
      absl::Seconds(20)));

  const std::vector<std::vector<std::string>> gpu_sets = {
      {"0000:1a:00.0"},
      {"0000:1a:00.0", "0000:1e:00.0"},
      {"0000:3c:00.0", "0000:40:00.0", "0000:9c:00.0", "0000:a0:00.0"},
      {"0000:1a:00.0", "0000:1e:00.0", "0000:3c:00.0", "0000:40:00.0", "0000:9c:00.0",
       "0000:a0:00.0", "0000:bc:00.0", "0000:c0:00.0"}};
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> calls{0}, errors{0};
  absl::Mutex mu;
  std::string first_error;
  auto note_error = [&](const std::string& what) {
    ++errors;
    absl::MutexLock lock(&mu);
    if (first_error.empty()) first_error = what;
  };

  std::vector<std::thread> threads;
  for (int i = 0; i < 64; ++i) {
    threads.emplace_back([&, i] {
      // Each caller its own connection, as separate launcher processes would have.
      auto stub = OwnConnection(sock, "fabric.load.caller", i);
      v1::SelectNicsRequest req;
      for (const std::string& g : gpu_sets[static_cast<size_t>(i) % gpu_sets.size()]) {
        req.add_gpus(g);
      }
      while (!stop.load()) {
        v1::Selection sel;
        auto ctx = Ctx(absl::Seconds(10));
        grpc::Status s = stub->SelectNics(ctx.get(), req, &sel);
        ++calls;
        if (!s.ok()) {
          note_error(absl::StrCat("SelectNics: ", s.error_message()));
        } else if (sel.assignments_size() != req.gpus_size()) {
          note_error("SelectNics: wrong number of assignments");
        }
      }
    });
  }
  std::vector<std::atomic<uint64_t>> watched(16);
  std::vector<std::unique_ptr<grpc::ClientContext>> watch_ctx;
  for (int i = 0; i < 16; ++i) watch_ctx.push_back(Ctx(run + absl::Seconds(60)));
  for (int i = 0; i < 16; ++i) {
    threads.emplace_back([&, i] {
      auto stub = OwnConnection(sock, "fabric.load.watcher", i);
      auto reader = stub->WatchInventory(watch_ctx[static_cast<size_t>(i)].get(), {});
      v1::InventoryEvent ev;
      while (reader->Read(&ev)) watched[static_cast<size_t>(i)] = ev.inventory().generation();
      grpc::Status s = reader->Finish();
      if (!stop.load() || s.error_code() != grpc::StatusCode::CANCELLED) {
        note_error(absl::StrCat("watch ", i, " ended: ", s.error_message()));
      }
    });
  }

  // The inventory changes twice a second: a port going down and up.
  const std::string state = dir + "/host/sys/class/infiniband/mlx5_8/ports/1/state";
  const absl::Time start = absl::Now();
  int64_t rss_warm = -1;
  uint64_t changes = 0;
  while (absl::Now() - start < run) {
    {
      std::ofstream out(state, std::ios::trunc);
      out << (changes % 2 == 0 ? "1: DOWN\n" : "4: ACTIVE\n");
    }
    ++changes;
    (*agent)->Signal(SIGHUP);
    absl::SleepFor(absl::Milliseconds(500));
    if (rss_warm < 0 && absl::Now() - start >= warmup) rss_warm = RssKb((*agent)->pid());
  }
  const int64_t rss_end = RssKb((*agent)->pid());
  // Let the last change reach every watcher, then stop.
  v1::Inventory inv;
  auto stub = v1::FabricAgent::NewStub(
      grpc::CreateChannel("unix:" + sock, grpc::InsecureChannelCredentials()));
  auto ctx = Ctx(absl::Seconds(10));
  ASSERT_TRUE(stub->GetInventory(ctx.get(), {}, &inv).ok());
  const bool caught_up = testing::WaitFor(
      [&] {
        for (const auto& w : watched) {
          if (w.load() < inv.generation()) return false;
        }
        return true;
      },
      absl::Seconds(20));
  stop = true;
  for (auto& c : watch_ctx) c->TryCancel();
  for (auto& t : threads) t.join();
  ASSERT_TRUE((*agent)->running()) << (*agent)->Stderr();
  (*agent)->Signal(SIGTERM);
  EXPECT_EQ((*agent)->Wait(absl::Seconds(10)), 0);

  std::printf(
      "load: %s, %llu SelectNics calls (%.0f/s), %llu inventory changes, generation "
      "%llu, RSS %lld kB after warm-up, %lld kB at the end (%+.2f%%)\n",
      absl::FormatDuration(run).c_str(), static_cast<unsigned long long>(calls.load()),
      static_cast<double>(calls.load()) / absl::ToDoubleSeconds(run),
      static_cast<unsigned long long>(changes), static_cast<unsigned long long>(inv.generation()),
      static_cast<long long>(rss_warm), static_cast<long long>(rss_end),
      100.0 * (rss_end - rss_warm) / rss_warm);
  EXPECT_EQ(errors.load(), 0u) << first_error;
  EXPECT_GT(calls.load(), 1000u);
  EXPECT_GE(inv.generation(), changes / 2) << "the changes did not reach the inventory";
  EXPECT_TRUE(caught_up) << "a watcher fell behind for good";
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
