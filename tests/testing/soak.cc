#include "tests/testing/soak.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fabric/v1/agent.grpc.pb.h"
#include "tests/testing/subprocess.h"

namespace fabric::testing {
namespace {

// A stub on a connection of its own: gRPC shares one connection among channels with equal
// arguments, so each gets a distinct one.
std::unique_ptr<v1::FabricAgent::Stub> OwnConnection(const std::string& target, const char* role,
                                                     int i) {
  grpc::ChannelArguments args;
  args.SetInt(role, i);
  return v1::FabricAgent::NewStub(
      grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args));
}

std::unique_ptr<grpc::ClientContext> Ctx(absl::Duration d) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + absl::ToChronoNanoseconds(d));
  return ctx;
}

}  // namespace

SoakReport RunSoak(const SoakOptions& opt) {
  SoakReport r;
  r.before = ReadProcStats(opt.agent);
  const std::vector<std::vector<std::string>> gpu_sets = {
      {"0000:1a:00.0"},
      {"0000:1a:00.0", "0000:1e:00.0"},
      {"0000:3c:00.0", "0000:40:00.0", "0000:9c:00.0", "0000:a0:00.0"},
      {"0000:1a:00.0", "0000:1e:00.0", "0000:3c:00.0", "0000:40:00.0", "0000:9c:00.0",
       "0000:a0:00.0", "0000:bc:00.0", "0000:c0:00.0"}};
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> calls{0}, errors{0};
  std::mutex mu;
  auto note_error = [&](const std::string& what) {
    ++errors;
    std::lock_guard<std::mutex> lock(mu);
    if (r.first_error.empty()) r.first_error = what;
  };

  std::vector<std::thread> threads;
  for (int i = 0; i < opt.callers; ++i) {
    threads.emplace_back([&, i] {
      // Each caller its own connection, as separate launcher processes would have.
      auto stub = OwnConnection(opt.target, "fabric.soak.caller", i);
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
  std::vector<std::atomic<uint64_t>> watched(static_cast<size_t>(opt.watchers));
  std::vector<std::unique_ptr<grpc::ClientContext>> watch_ctx;
  for (int i = 0; i < opt.watchers; ++i) watch_ctx.push_back(Ctx(opt.run + absl::Seconds(60)));
  for (int i = 0; i < opt.watchers; ++i) {
    threads.emplace_back([&, i] {
      auto stub = OwnConnection(opt.target, "fabric.soak.watcher", i);
      auto reader = stub->WatchInventory(watch_ctx[static_cast<size_t>(i)].get(), {});
      v1::InventoryEvent ev;
      while (reader->Read(&ev)) watched[static_cast<size_t>(i)] = ev.inventory().generation();
      grpc::Status s = reader->Finish();
      if (!stop.load() || s.error_code() != grpc::StatusCode::CANCELLED) {
        note_error(absl::StrCat("watch ", i, " ended: ", s.error_message()));
      }
    });
  }

  const absl::Time start = absl::Now();
  bool warm = false;
  while (absl::Now() - start < opt.run) {
    if (opt.change) opt.change(r.changes);
    ++r.changes;
    absl::SleepFor(opt.change_every);
    if (!warm && absl::Now() - start >= opt.warmup) {
      r.warm = ReadProcStats(opt.agent);
      warm = true;
    }
  }
  r.end = ReadProcStats(opt.agent);
  // Let the last change reach every watcher, then stop.
  v1::Inventory inv;
  auto stub = OwnConnection(opt.target, "fabric.soak.last", 0);
  auto ctx = Ctx(absl::Seconds(10));
  if (grpc::Status s = stub->GetInventory(ctx.get(), {}, &inv); !s.ok()) {
    note_error(absl::StrCat("GetInventory: ", s.error_message()));
  }
  r.generation = inv.generation();
  r.caught_up = WaitFor(
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
  r.calls = calls.load();
  r.errors = errors.load();
  absl::SleepFor(absl::Seconds(1));  // The agent closes the connections that were left.
  r.after = ReadProcStats(opt.agent);
  return r;
}

int HoldWatches(const std::string& target, int n, pid_t agent, ProcStats* held) {
  std::vector<std::unique_ptr<v1::FabricAgent::Stub>> stubs;
  std::vector<std::unique_ptr<grpc::ClientContext>> ctxs;
  std::vector<std::unique_ptr<grpc::ClientReader<v1::InventoryEvent>>> streams;
  int opened = 0;
  for (int i = 0; i < n; ++i) {
    if (i % 25 == 0) {
      grpc::ChannelArguments args;
      args.SetInt("fabric.soak.watch_connection", i);
      stubs.push_back(v1::FabricAgent::NewStub(
          grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args)));
    }
    ctxs.push_back(std::make_unique<grpc::ClientContext>());
    ctxs.back()->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    streams.push_back(stubs.back()->WatchInventory(ctxs.back().get(), {}));
    v1::InventoryEvent ev;
    if (streams.back()->Read(&ev)) ++opened;
  }
  absl::SleepFor(absl::Seconds(1));
  *held = ReadProcStats(agent);
  for (auto& c : ctxs) c->TryCancel();
  for (auto& s : streams) (void)s->Finish();
  return opened;
}

}  // namespace fabric::testing
