// SelectNics over the agent's Unix socket against gRPC's own floor (an empty Ping on the same
// server), with 1, 8 and 64 concurrent callers; and the agent's idle CPU and RSS (measured
// first, over --idle seconds after start, then RSS again after the load).
//
//   select_rpc_bench [--seconds=2] [--rounds=3] [--callers=1,8,64] [--gpus=8] [--idle=60]
//                    [--transport=unix|tcp|tls] [--relay-unix] [--agent=PATH] [--mkhost=PATH]
//
// --transport=tcp serves on 127.0.0.1 in plaintext (through the agent's relay), tls the same
// with mutual TLS (certificates made for the run; each caller keeps its connection).
// --relay-unix: the socket's connections through the relay too (the agent's --relay-unix),
// against the default, the rapid-reset guard on gRPC's own reads.
//
// It writes the roce-9port example host to tmpfs, starts the real fabric-agent on it, and runs
// Ping and SelectNics in alternating rounds (so drift hits both alike). Each caller has its own
// channel (its own connection), as separate launcher processes would. Prints p50/p99 latency
// and calls/s per run, and the ratio SelectNics/Ping at p50. Asserts nothing about speed.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "fabric/v1/agent.grpc.pb.h"
#include "tests/testing/binaries.h"
#include "tests/testing/certs.h"
#include "tests/testing/subprocess.h"

namespace fabric {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Flags {
  double seconds = 2;
  int rounds = 3;
  std::vector<int> callers = {1, 8, 64};
  int gpus = 8;
  double idle = 60;
  std::string agent = testing::kAgentBinary;
  std::string mkhost = testing::kMkhostBinary;
  std::string transport = "unix";
  bool relay_unix = false;
};

bool Flag(const char* arg, const char* name, std::string* value) {
  const size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0 || arg[n] != '=') return false;
  *value = arg + n + 1;
  return true;
}

bool ParseFlags(int argc, char** argv, Flags* f) {
  for (int i = 1; i < argc; ++i) {
    std::string v;
    bool ok = true;
    if (std::strcmp(argv[i], "--relay-unix") == 0) {
      f->relay_unix = true;
    } else if (Flag(argv[i], "--seconds", &v)) {
      ok = absl::SimpleAtod(v, &f->seconds);
    } else if (Flag(argv[i], "--rounds", &v)) {
      ok = absl::SimpleAtoi(v, &f->rounds);
    } else if (Flag(argv[i], "--gpus", &v)) {
      ok = absl::SimpleAtoi(v, &f->gpus);
    } else if (Flag(argv[i], "--idle", &v)) {
      ok = absl::SimpleAtod(v, &f->idle);
    } else if (Flag(argv[i], "--agent", &v)) {
      f->agent = v;
    } else if (Flag(argv[i], "--mkhost", &v)) {
      f->mkhost = v;
    } else if (Flag(argv[i], "--transport", &v)) {
      f->transport = v;
      ok = v == "unix" || v == "tcp" || v == "tls";
    } else if (Flag(argv[i], "--callers", &v)) {
      f->callers.clear();
      for (absl::string_view c : absl::StrSplit(v, ',')) {
        int n = 0;
        ok = ok && absl::SimpleAtoi(c, &n) && n > 0 && n <= 1024;
        f->callers.push_back(n);
      }
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr, "select_rpc_bench: bad argument %s\n", argv[i]);
      return false;
    }
  }
  return f->seconds > 0 && f->rounds > 0 && f->gpus >= 1 && f->gpus <= 8;
}

struct Result {
  std::vector<double> lat_us;
  double seconds = 0;
  int64_t errors = 0;
};

double Pct(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  size_t k = static_cast<size_t>(p * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<long>(k), v.end());
  return v[k];
}

// `callers` threads, each with its own channel, calling `select` (else Ping) for `seconds`.
Result RunOnce(const std::string& target, const std::shared_ptr<grpc::ChannelCredentials>& creds,
               int callers, bool select, int gpus, double seconds) {
  static const char* kGpus[] = {"0000:1a:00.0", "0000:1e:00.0", "0000:3c:00.0", "0000:40:00.0",
                                "0000:9c:00.0", "0000:a0:00.0", "0000:bc:00.0", "0000:c0:00.0"};
  std::vector<std::unique_ptr<v1::FabricAgent::Stub>> stubs;
  for (int i = 0; i < callers; ++i) {
    grpc::ChannelArguments args;
    args.SetInt("grpc.use_local_subchannel_pool", 1);  // A connection per caller.
    stubs.push_back(v1::FabricAgent::NewStub(grpc::CreateCustomChannel(target, creds, args)));
    v1::PingResponse pr;
    grpc::ClientContext ctx;  // Connect before timing.
    (void)stubs.back()->Ping(&ctx, v1::PingRequest(), &pr);
  }
  v1::SelectNicsRequest req;
  for (int g = 0; g < gpus; ++g) req.add_gpus(kGpus[g]);
  std::vector<Result> per(static_cast<size_t>(callers));
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  const auto end_after = std::chrono::duration<double>(seconds);
  Clock::time_point start;
  for (int i = 0; i < callers; ++i) {
    threads.emplace_back([&, i] {
      while (!go.load()) std::this_thread::yield();
      const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(end_after);
      Result& r = per[static_cast<size_t>(i)];
      while (Clock::now() < deadline) {
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
        const auto t0 = Clock::now();
        grpc::Status s;
        if (select) {
          v1::Selection sel;
          s = stubs[static_cast<size_t>(i)]->SelectNics(&ctx, req, &sel);
        } else {
          v1::PingResponse pr;
          s = stubs[static_cast<size_t>(i)]->Ping(&ctx, v1::PingRequest(), &pr);
        }
        const auto t1 = Clock::now();
        if (!s.ok()) ++r.errors;
        r.lat_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      }
    });
  }
  start = Clock::now();
  go = true;
  for (auto& t : threads) t.join();
  Result all;
  all.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (Result& r : per) {
    all.lat_us.insert(all.lat_us.end(), r.lat_us.begin(), r.lat_us.end());
    all.errors += r.errors;
  }
  return all;
}

// utime + stime of `pid`, in clock ticks.
int64_t CpuTicks(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t rp = s.rfind(')');
  if (rp == std::string::npos) return -1;
  std::istringstream rest(s.substr(rp + 2));
  std::string field;
  int64_t utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) (void)absl::SimpleAtoi(field, &utime);
    if (i == 15) (void)absl::SimpleAtoi(field, &stime);
  }
  return utime + stime;
}

std::string Status(pid_t pid, const std::string& key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) {
      line = line.substr(key.size() + 1);
      line.erase(0, line.find_first_not_of(" \t"));
      return line;
    }
  }
  return "?";
}

int Main(int argc, char** argv) {
  Flags f;
  if (!ParseFlags(argc, argv, &f)) return 2;
  const std::string dir = testing::MakeTempDir("select_rpc_bench");
  if (dir.empty()) return 1;
  auto made = testing::Run({f.mkhost, "roce-9port", dir + "/host"});
  if (!made.ok() || made->status != 0) {
    std::fprintf(stderr, "select_rpc_bench: fabric-mkhost failed\n");
    return 1;
  }
  const std::string socket = dir + "/agent.sock";
  std::vector<std::string> cmd = {f.agent, "--socket=" + socket, "--sysfs=" + dir + "/host/sys",
                                  "--procfs=" + dir + "/host/proc"};
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (f.transport != "unix") cmd.push_back("--listen=127.0.0.1:0");
  if (f.relay_unix) cmd.push_back("--relay-unix");
  if (f.transport == "tls") {
    const testing::Cert ca = testing::MakeCert(dir, "ca", "bench CA", nullptr);
    const testing::Cert server = testing::MakeCert(dir, "server", "agent", &ca, "IP:127.0.0.1");
    const testing::Cert client = testing::MakeCert(dir, "client", "bench", &ca);
    cmd.insert(cmd.end(), {"--tls-cert=" + server.cert_path, "--tls-key=" + server.key_path,
                           "--tls-client-ca=" + ca.cert_path});
    auto slurp = [](const std::string& path) {
      std::ifstream in(path);
      return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    };
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = slurp(ca.cert_path);
    o.pem_cert_chain = slurp(client.cert_path);
    o.pem_private_key = slurp(client.key_path);
    creds = grpc::SslCredentials(o);
  }
  auto agent = testing::Subprocess::Start(cmd);
  if (!agent.ok() ||
      !testing::WaitFor([&] { return testing::UnixSocketAccepts(socket) || !(*agent)->running(); },
                        absl::Seconds(30)) ||
      !(*agent)->running()) {
    std::fprintf(
        stderr, "select_rpc_bench: fabric-agent did not start: %s\n",
        agent.ok() ? (*agent)->Stderr().c_str() : std::string(agent.status().message()).c_str());
    return 1;
  }
  const pid_t pid = (*agent)->pid();
  std::string target = "unix:" + socket;
  if (f.transport != "unix") {
    auto port = testing::WaitForLogged(**agent, "(port ", absl::Seconds(30));
    if (!port) {
      std::fprintf(stderr, "select_rpc_bench: no TCP port: %s\n", (*agent)->Stderr().c_str());
      return 1;
    }
    target = "127.0.0.1:" + port->substr(0, port->find_first_not_of("0123456789"));
  }
  std::printf(
      "fabric-agent on roce-9port over %s; SelectNics for %d GPUs; %d rounds x %.1f s per run; "
      "%u CPUs\n",
      f.transport.c_str(), f.gpus, f.rounds, f.seconds, std::thread::hardware_concurrency());
  if (f.idle > 0) {
    // Idle from start: no calls; CPU over the window and memory at its end.
    const int64_t before = CpuTicks(pid);
    std::this_thread::sleep_for(std::chrono::duration<double>(f.idle));
    const int64_t after = CpuTicks(pid);
    const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
    std::printf(
        "idle %.0f s after start: CPU %.3f s (%.4f%% of one core), VmRSS %s (of which "
        "shared libraries %s), threads %s\n",
        f.idle, static_cast<double>(after - before) / ticks,
        100.0 * static_cast<double>(after - before) / ticks / f.idle, Status(pid, "VmRSS").c_str(),
        Status(pid, "RssFile").c_str(), Status(pid, "Threads").c_str());
  }
  std::printf("%-8s %-11s %10s %10s %12s %7s\n", "callers", "rpc", "p50_us", "p99_us", "calls/s",
              "errors");
  int64_t errors = 0;
  for (int callers : f.callers) {
    Result ping, sel;
    for (int r = 0; r < f.rounds; ++r) {
      for (bool select : {false, true}) {
        Result one = RunOnce(target, creds, callers, select, f.gpus, f.seconds);
        Result& into = select ? sel : ping;
        into.lat_us.insert(into.lat_us.end(), one.lat_us.begin(), one.lat_us.end());
        into.seconds += one.seconds;
        into.errors += one.errors;
      }
    }
    double p50[2];
    int i = 0;
    for (Result* r : {&ping, &sel}) {
      const double calls = static_cast<double>(r->lat_us.size()) / r->seconds;
      p50[i] = Pct(r->lat_us, 0.50);
      std::printf("%-8d %-11s %10.1f %10.1f %12.0f %7lld\n", callers,
                  i == 0 ? "Ping" : "SelectNics", p50[i], Pct(r->lat_us, 0.99), calls,
                  static_cast<long long>(r->errors));
      errors += r->errors;
      ++i;
    }
    std::printf("%-8d ratio SelectNics/Ping at p50: %.2f\n", callers, p50[1] / p50[0]);
  }
  std::printf("after the load: VmRSS %s, VmHWM %s, threads %s\n", Status(pid, "VmRSS").c_str(),
              Status(pid, "VmHWM").c_str(), Status(pid, "Threads").c_str());
  (*agent)->Signal(SIGTERM);
  auto st = (*agent)->Wait(absl::Seconds(5));
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (errors > 0) {
    std::fprintf(stderr, "select_rpc_bench: %lld calls failed\n", static_cast<long long>(errors));
    return 1;
  }
  return st.has_value() && *st == 0 ? 0 : 1;
}

}  // namespace
}  // namespace fabric

int main(int argc, char** argv) { return fabric::Main(argc, argv); }
