// The agent through a soak and through bursts, in figures. Asserts nothing about speed or size;
// exits 1 when calls fail or the agent dies.
//
//   soak_bench [--seconds=60] [--transports=unix,tcp] [--bursts=churn,reset,watches]
//              [--settle=60] [--churn=10000] [--reset-streams=100000] [--watches=1000]
//              [--relay-unix]
//
// The soak (tests/testing/soak.h): 64 SelectNics callers and 16 watch streams per transport for
// --seconds while a port goes down and up twice a second; prints calls, errors, RSS and
// descriptors before, after warm-up, at the end and after the clients left. Each burst runs on a
// fresh agent: --churn connect/close pairs unpaced, one HTTP/2 rapid-reset connection of
// --reset-streams requests, --watches watch streams held and then cancelled; prints RSS before,
// the peak (VmHWM), right after, and --settle seconds later, with threads and descriptors.
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "fabric/v1/agent.grpc.pb.h"
#include "tests/hosts/hosts.h"
#include "tests/testing/binaries.h"
#include "tests/testing/hostile.h"
#include "tests/testing/soak.h"
#include "tests/testing/subprocess.h"

namespace fabric {
namespace {

const std::string kAgent = testing::kAgentBinary;

struct Flags {
  double seconds = 60;
  double settle = 60;
  int churn = 10000;
  int reset_streams = 100000;
  int watches = 1000;
  std::vector<std::string> transports = {"unix", "tcp"};
  std::vector<std::string> bursts = {"churn", "reset", "watches"};
  bool relay_unix = false;  // --relay-unix on every agent
};

bool ParseFlags(int argc, char** argv, Flags* f) {
  for (int i = 1; i < argc; ++i) {
    std::vector<std::string> kv = absl::StrSplit(argv[i], absl::MaxSplits('=', 1));
    bool ok = kv.size() == 2;
    if (kv.size() == 1 && kv[0] == "--relay-unix") {
      f->relay_unix = ok = true;
    } else if (!ok) {
    } else if (kv[0] == "--seconds") {
      ok = absl::SimpleAtod(kv[1], &f->seconds) && f->seconds > 0;
    } else if (kv[0] == "--settle") {
      ok = absl::SimpleAtod(kv[1], &f->settle) && f->settle >= 0;
    } else if (kv[0] == "--churn") {
      ok = absl::SimpleAtoi(kv[1], &f->churn) && f->churn > 0;
    } else if (kv[0] == "--reset-streams") {
      ok = absl::SimpleAtoi(kv[1], &f->reset_streams) && f->reset_streams > 0;
    } else if (kv[0] == "--watches") {
      ok = absl::SimpleAtoi(kv[1], &f->watches) && f->watches > 0;
    } else if (kv[0] == "--transports") {
      f->transports = absl::StrSplit(kv[1], ',', absl::SkipEmpty());
    } else if (kv[0] == "--bursts") {
      f->bursts = absl::StrSplit(kv[1], ',', absl::SkipEmpty());
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr, "soak_bench: bad argument %s\n", argv[i]);
      return false;
    }
  }
  return true;
}

std::string Fmt(const testing::ProcStats& s) {
  return absl::StrCat("RSS ", s.rss_kb / 1024, ".", (s.rss_kb % 1024) * 10 / 1024, " MB, ",
                      s.threads, " threads, ", s.fds, " fds");
}

// The agent on the roce-9port example host, serving its Unix socket and a TCP port.
struct Agent {
  std::string dir, socket, tcp;
  std::unique_ptr<testing::Subprocess> proc;
  pid_t pid() const { return proc->pid(); }
  ~Agent() {
    if (proc) {
      proc->Signal(SIGTERM);
      (void)proc->Wait(absl::Seconds(5));
    }
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

std::unique_ptr<Agent> StartAgent(std::vector<std::string> extra, const Flags& f) {
  if (f.relay_unix) extra.push_back("--relay-unix");
  auto a = std::make_unique<Agent>();
  a->dir = testing::MakeTempDir("soak_bench");
  if (a->dir.empty() || !testing::WriteExampleHost("roce-9port", a->dir + "/host").ok()) {
    return nullptr;
  }
  a->socket = a->dir + "/agent.sock";
  std::vector<std::string> argv = {kAgent, "--socket=" + a->socket,
                                   "--sysfs=" + a->dir + "/host/sys",
                                   "--procfs=" + a->dir + "/host/proc", "--listen=127.0.0.1:0"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  auto p = testing::Subprocess::Start(argv);
  if (!p.ok()) return nullptr;
  a->proc = *std::move(p);
  auto port = testing::WaitForLogged(*a->proc, "(port ", absl::Seconds(30));
  if (!port) {
    std::fprintf(stderr, "soak_bench: the agent did not start: %s\n", a->proc->Stderr().c_str());
    return nullptr;
  }
  a->tcp = absl::StrCat("127.0.0.1:", port->substr(0, port->find_first_not_of("0123456789")));
  // Serving: a first inventory answers.
  auto stub = v1::FabricAgent::NewStub(
      grpc::CreateChannel("unix:" + a->socket, grpc::InsecureChannelCredentials()));
  if (!testing::WaitFor(
          [&] {
            grpc::ClientContext ctx;
            ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
            v1::Inventory inv;
            return stub->GetInventory(&ctx, {}, &inv).ok();
          },
          absl::Seconds(30))) {
    return nullptr;
  }
  return a;
}

bool Soak(const Flags& f, const std::string& transport) {
  auto a = StartAgent({}, f);
  if (a == nullptr) return false;
  testing::SoakOptions opt;
  opt.target = transport == "tcp" ? a->tcp : "unix:" + a->socket;
  opt.agent = a->pid();
  opt.run = absl::Seconds(f.seconds);
  opt.warmup = std::max(absl::Seconds(2), opt.run / 6);
  const std::string state = a->dir + "/host/sys/class/infiniband/mlx5_8/ports/1/state";
  opt.change = [&](uint64_t round) {
    {
      std::ofstream out(state, std::ios::trunc);
      out << (round % 2 == 0 ? "1: DOWN\n" : "4: ACTIVE\n");
    }
    a->proc->Signal(SIGHUP);
  };
  const testing::SoakReport r = testing::RunSoak(opt);
  std::printf(
      "soak %-4s %.0f s: %llu SelectNics calls (%.0f/s), %llu errors%s%s, %llu changes, "
      "watchers %s\n",
      transport.c_str(), f.seconds, static_cast<unsigned long long>(r.calls),
      static_cast<double>(r.calls) / f.seconds, static_cast<unsigned long long>(r.errors),
      r.errors ? ": " : "", r.first_error.c_str(), static_cast<unsigned long long>(r.changes),
      r.caught_up ? "caught up" : "FELL BEHIND");
  std::printf("  before   %s\n  warm     %s\n  end      %s (%+.2f%% since warm)\n  after    %s\n",
              Fmt(r.before).c_str(), Fmt(r.warm).c_str(), Fmt(r.end).c_str(),
              100.0 * static_cast<double>(r.end.rss_kb - r.warm.rss_kb) /
                  static_cast<double>(r.warm.rss_kb),
              Fmt(r.after).c_str());
  return r.errors == 0 && r.caught_up && a->proc->running();
}

bool Burst(const Flags& f, const std::string& burst) {
  const int n = f.watches + 16;
  auto a = StartAgent(
      {absl::StrCat("--max-watches=", n), absl::StrCat("--max-watches-per-caller=", n)}, f);
  if (a == nullptr) return false;
  const testing::ProcStats before = testing::ReadProcStats(a->pid());
  std::string what;
  testing::ProcStats during;
  if (burst == "churn") {
    const int ok = testing::ChurnConnections("unix:" + a->socket, f.churn);
    what = absl::StrCat(ok, " of ", f.churn, " connect/close pairs");
  } else if (burst == "reset") {
    auto sent =
        testing::RapidReset("unix:" + a->socket, f.reset_streams, "/fabric.v1.FabricAgent/Ping");
    what = sent.ok() ? absl::StrCat("rapid reset: ", *sent, " of ", f.reset_streams,
                                    " streams sent before the agent closed the connection")
                     : std::string(sent.status().message());
  } else if (burst == "watches") {
    const int opened = testing::HoldWatches("unix:" + a->socket, f.watches, a->pid(), &during);
    what = absl::StrCat(opened, " of ", f.watches, " watch streams (held: ", Fmt(during), ")");
  } else {
    std::fprintf(stderr, "soak_bench: unknown burst %s\n", burst.c_str());
    return false;
  }
  const testing::ProcStats right_after = testing::ReadProcStats(a->pid());
  absl::SleepFor(absl::Seconds(f.settle));
  const testing::ProcStats settled = testing::ReadProcStats(a->pid());
  const testing::ProcStats cpu = settled;
  // Still serving?
  auto stub = v1::FabricAgent::NewStub(
      grpc::CreateChannel("unix:" + a->socket, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::PingResponse pr;
  const bool serving = stub->Ping(&ctx, {}, &pr).ok();
  std::printf(
      "burst %-7s %s\n  before   %s\n  peak     RSS %.1f MB (VmHWM)\n  after    %s\n"
      "  +%.0fs    %s; agent CPU %.2f s in all; %s\n",
      burst.c_str(), what.c_str(), Fmt(before).c_str(),
      static_cast<double>(settled.hwm_kb) / 1024.0, Fmt(right_after).c_str(), f.settle,
      Fmt(settled).c_str(), cpu.cpu_s, serving ? "serving" : "NOT SERVING");
  return serving;
}

int Main(int argc, char** argv) {
  Flags f;
  if (!ParseFlags(argc, argv, &f)) return 2;
  bool ok = true;
  for (const std::string& t : f.transports) ok = Soak(f, t) && ok;
  for (const std::string& b : f.bursts) ok = Burst(f, b) && ok;
  std::fflush(stdout);
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace fabric

int main(int argc, char** argv) { return fabric::Main(argc, argv); }
