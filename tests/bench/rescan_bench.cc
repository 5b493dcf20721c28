// What one change on the host costs the agent, on hosts with hundreds of RDMA functions (issue
// 18: rescans that cost what changed). Asserts nothing about speed; exits 1
// when the agent dies or a change that must reach watchers does not, 77 when it cannot make a
// network namespace (not root, no `ip netns`).
//
//   rescan_bench [--hosts=large,sriov-512vf] [--changes=30] [--gap=0.3] [--idle=5]
//                [--large=PFS,VFS,GIDS (32,7,256: 256 RDMA devices, 256 GID slots)]
//                [--scenarios=unrelated,rdma-addr,device,full] [--agent-log=1]
//
// Per host: the example tree is written (tmpfs when there is room), a throwaway network namespace
// gets veth pairs, and the real fabric-agent runs inside it (`ip netns exec`, so real route
// netlink; discovery reads the tree) with a watch stream open. Each scenario makes --changes
// changes --gap seconds apart:
//   unrelated  an address added to / removed from a veth no RDMA port uses (a pod's veth);
//   rdma-addr  an address added to / removed from a veth named like the first PF's netdev, with
//              the GIDs the kernel would add for it (4: RoCE v1, 5: RoCE v2) written into the
//              tree just before (the tree cannot follow a real netdev by itself);
//   device     the last VF's RDMA device removed from the tree (device directory and class link)
//              and its netdev, a veth named like the tree's, deleted; then both back;
//   full       a port state flipped in the tree, then SIGHUP (a config reload: a full rescan).
// Prints the agent's CPU per change (utime + stime over the scenario, from the process's CPU
// clock: to the nanosecond, threads that have exited included, such as a full rescan's GID
// readers; less the idle rate measured over --idle seconds) and, for changes that reach
// watchers, the time from the netlink message (the `ip` command has returned, so the kernel has
// sent it; for `full`, the signal) to the watch event: p50 and max. rdma-addr writes the GIDs
// right after the address, as the kernel does.
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "fabric/v1/agent.grpc.pb.h"
#include "tests/hosts/hosts.h"
#include "tests/testing/binaries.h"
#include "tests/testing/hostile.h"
#include "tests/testing/subprocess.h"

namespace fabric {
namespace {

namespace fs = std::filesystem;
constexpr char kIp[] = "/usr/sbin/ip";
constexpr int kSkip = 77;

struct Flags {
  std::vector<std::string> hosts = {"large", "sriov-512vf"};
  std::vector<std::string> scenarios = {"unrelated", "rdma-addr", "device", "full"};
  int changes = 30;
  double gap = 0.3;
  double idle = 5;
  int large_pfs = 32, large_vfs = 7, large_gids = 256;
  bool agent_log = false;  // --agent-log: the agent's debug log (what each refresh read, and
                           // its time) on stderr after each host.
};

bool ParseFlags(int argc, char** argv, Flags* f) {
  for (int i = 1; i < argc; ++i) {
    std::vector<std::string> kv = absl::StrSplit(argv[i], absl::MaxSplits('=', 1));
    bool ok = kv.size() == 2;
    if (!ok) {
    } else if (kv[0] == "--hosts") {
      f->hosts = absl::StrSplit(kv[1], ',', absl::SkipEmpty());
    } else if (kv[0] == "--scenarios") {
      f->scenarios = absl::StrSplit(kv[1], ',', absl::SkipEmpty());
    } else if (kv[0] == "--changes") {
      ok = absl::SimpleAtoi(kv[1], &f->changes) && f->changes > 0;
    } else if (kv[0] == "--gap") {
      ok = absl::SimpleAtod(kv[1], &f->gap) && f->gap >= 0;
    } else if (kv[0] == "--idle") {
      ok = absl::SimpleAtod(kv[1], &f->idle) && f->idle > 0;
    } else if (kv[0] == "--agent-log") {
      ok = kv[1] == "1" || kv[1] == "true";
      f->agent_log = ok;
    } else if (kv[0] == "--large") {
      std::vector<std::string> n = absl::StrSplit(kv[1], ',');
      ok = n.size() == 3 && absl::SimpleAtoi(n[0], &f->large_pfs) &&
           absl::SimpleAtoi(n[1], &f->large_vfs) && absl::SimpleAtoi(n[2], &f->large_gids);
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr, "rescan_bench: bad argument %s\n", argv[i]);
      return false;
    }
  }
  return true;
}

bool RunOk(const std::vector<std::string>& argv) {
  auto r = testing::Run(argv, absl::Seconds(30));
  if (r.ok() && r->status == 0) return true;
  std::fprintf(stderr, "rescan_bench: %s failed: %s\n", absl::StrJoin(argv, " ").c_str(),
               r.ok() ? r->err.c_str() : std::string(r.status().message()).c_str());
  return false;
}

bool WriteText(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::trunc);
  out << text;
  return static_cast<bool>(out.flush());
}

double Pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

// The watch stream, read on its own thread: when each event's bytes arrived (before this client
// parses them: 300 KB of inventory take it milliseconds, which are not the agent's) and what
// it changed.
class Watcher {
 public:
  struct Event {
    absl::Time at;
    std::vector<std::string> changes;  // "<kind> <subject>"
  };

  explicit Watcher(const std::string& socket)
      : channel_(grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials())) {
    thread_ = std::thread([this] {
      // The generated stub's reader parses each message before Read returns; a reader of bytes
      // does not.
      const grpc::internal::RpcMethod method("/fabric.v1.FabricAgent/WatchInventory",
                                             grpc::internal::RpcMethod::SERVER_STREAMING, channel_);
      grpc::Slice empty(std::string{});  // An empty WatchInventoryRequest.
      std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>> reader(
          grpc::internal::ClientReaderFactory<grpc::ByteBuffer>::Create(
              channel_.get(), method, &ctx_, grpc::ByteBuffer(&empty, 1)));
      grpc::ByteBuffer bytes;
      while (reader->Read(&bytes)) {
        Event e{absl::Now(), {}};
        v1::InventoryEvent ev;
        grpc::ProtoBufferReader in(&bytes);
        if (!ev.ParseFromZeroCopyStream(&in)) break;
        for (const v1::InventoryChange& c : ev.changes()) {
          e.changes.push_back(
              absl::StrCat(v1::InventoryChange::Kind_Name(c.kind()), " ", c.subject()));
        }
        std::lock_guard<std::mutex> l(mu_);
        events_.push_back(std::move(e));
        cv_.notify_all();
      }
      (void)reader->Finish();
    });
  }
  ~Watcher() {
    ctx_.TryCancel();
    thread_.join();
  }
  size_t count() {
    std::lock_guard<std::mutex> l(mu_);
    return events_.size();
  }
  // The first event at or after index `from` with a change starting with `want`.
  std::optional<Event> WaitFor(size_t from, const std::string& want, absl::Duration timeout) {
    std::unique_lock<std::mutex> l(mu_);
    const auto deadline = std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(timeout);
    for (size_t i = from;;) {
      for (; i < events_.size(); ++i) {
        for (const std::string& c : events_[i].changes) {
          if (c.rfind(want, 0) == 0) return events_[i];
        }
      }
      if (cv_.wait_until(l, deadline) == std::cv_status::timeout) return std::nullopt;
    }
  }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  grpc::ClientContext ctx_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Event> events_;
  std::thread thread_;
};

// A throwaway network namespace, deleted on destruction.
struct Netns {
  std::string name;
  ~Netns() {
    if (!name.empty()) (void)testing::Run({kIp, "netns", "del", name});
  }
  bool Ip(std::vector<std::string> args) const {
    args.insert(args.begin(), {kIp, "-n", name});
    return RunOk(args);
  }
};

struct Row {
  std::string what;
  double cpu_ms_per_change = 0;
  std::vector<double> latency_ms;
  int expected = 0;  // changes that must reach watchers
};

// One host: its tree, the namespace, the agent and the scenarios.
class HostRun {
 public:
  HostRun(const Flags& f, std::string name) : f_(f), name_(std::move(name)) {}
  ~HostRun() {
    watcher_.reset();
    if (agent_) {
      agent_->Signal(SIGTERM);
      (void)agent_->Wait(absl::Seconds(10));
    }
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }

  // 0, 1 (failed) or kSkip.
  int Setup() {
    if (name_ == "large") {
      spec_ = testing::LargeHost(f_.large_pfs, f_.large_vfs, f_.large_gids);
    } else {
      auto s = testing::ExampleHost(name_);
      if (!s.ok()) {
        std::fprintf(stderr, "rescan_bench: %s\n", std::string(s.status().message()).c_str());
        return 1;
      }
      spec_ = *std::move(s);
    }
    dir_ = testing::MakeTempDir("rescan_bench");
    if (dir_.empty()) return 1;
    sys_ = fs::path(dir_) / "host/sys";
    if (absl::Status st = testing::WriteHost(spec_, fs::path(dir_) / "host"); !st.ok()) {
      std::fprintf(stderr, "rescan_bench: %s\n", std::string(st.message()).c_str());
      return 1;
    }
    // The first PF's netdev, and the last RDMA device whose netdev is on the host.
    pf_ = spec_.rdma.front().name;
    flap_ = spec_.rdma[1].name;
    pf_netdev_ = NetdevOf(spec_.rdma.front());
    for (const testing::RdmaDeviceSpec& r : spec_.rdma) {
      if (!NetdevOf(r).empty()) {
        last_ = r.name;
        last_netdev_ = NetdevOf(r);
      }
    }
    if (pf_netdev_.empty() || last_.empty() || last_ == pf_) {
      std::fprintf(stderr, "rescan_bench: %s has no RDMA netdevs to use\n", name_.c_str());
      return 1;
    }

    ns_.name = absl::StrCat("rescan-bench-", getpid());
    auto added = testing::Run({kIp, "netns", "add", ns_.name});
    if (!added.ok() || added->status != 0) {
      ns_.name.clear();
      std::fprintf(stderr, "rescan_bench: skipped, cannot make a network namespace: %s\n",
                   added.ok() ? added->err.c_str() : std::string(added.status().message()).c_str());
      return kSkip;
    }
    if (!ns_.Ip({"link", "set", "lo", "up"}) || !AddVeth("rbpod0", "rbpod1") ||
        !AddVeth(pf_netdev_, "rbpeer0") || !AddVeth(last_netdev_, "rbpeer1")) {
      return 1;
    }
    const std::string config = dir_ + "/agent.json";
    if (!WriteText(config, "{}\n")) return 1;
    socket_ = dir_ + "/agent.sock";
    const absl::Time t0 = absl::Now();
    auto p = testing::Subprocess::Start(
        {kIp, "netns", "exec", ns_.name, testing::kAgentBinary, "--socket=" + socket_,
         "--sysfs=" + sys_.string(), "--procfs=" + dir_ + "/host/proc", "--config=" + config,
         "--rescan-interval=3600",
         "--announce-socket=", f_.agent_log ? "--log-level=debug" : "--log-level=info"});
    if (!p.ok()) return 1;
    agent_ = *std::move(p);
    if (!testing::WaitForSocket(*agent_, socket_, absl::Seconds(120))) {
      std::fprintf(stderr, "rescan_bench: the agent did not start: %s\n", agent_->Stderr().c_str());
      return 1;
    }
    watcher_ = std::make_unique<Watcher>(socket_);
    if (!testing::WaitFor([&] { return watcher_->count() > 0; }, absl::Seconds(60))) {
      std::fprintf(stderr, "rescan_bench: no first watch event\n");
      return 1;
    }
    started_ = absl::Now() - t0;
    return 0;
  }

  int Run() {
    if (int rc = Setup(); rc != 0) return rc;
    size_t gid_ports = 0, slots = 0;
    for (const auto& r : spec_.rdma) {
      for (const auto& p : r.ports) {
        ++gid_ports;
        slots += static_cast<size_t>(p.gid_table_size);
      }
    }
    // Start-up's trailing work settles: wait (up to a minute) for half a second with under a
    // millisecond of CPU.
    for (int i = 0; i < 120 && CpuMs(0.5) >= 1; ++i) {
    }
    // The idle rate: the median of five windows, so that one burst of the agent's own (a
    // periodic memory check, freeing a start-up host) does not set it.
    std::vector<double> idle;
    for (int i = 0; i < 5; ++i) idle.push_back(CpuMs(f_.idle / 5) / (f_.idle / 5));
    const double idle_ms_per_s = Pct(idle, 0.5);
    std::printf(
        "\nhost %s: %zu RDMA devices, %zu netdevs, %zu GID slots; first watch event %.2f s after "
        "start; idle %.3f ms CPU/s (median of 5 windows over %.1f s)\n",
        name_.c_str(), spec_.rdma.size(), spec_.netdevs.size(), slots,
        absl::ToDoubleSeconds(started_), idle_ms_per_s, f_.idle);
    (void)gid_ports;
    std::printf("  %-58s %12s %19s %10s %8s\n", "change", "CPU/change", "netlink->watch p50", "max",
                "events");
    for (const std::string& s : f_.scenarios) {
      Row row;
      bool ok = true;
      const absl::Time t0 = absl::Now();
      const double cpu0 = Cpu();
      for (int i = 0; i < f_.changes && ok; ++i) {
        const absl::Time next = absl::Now() + absl::Seconds(f_.gap);
        ok = Change(s, i, &row);
        absl::SleepFor(next - absl::Now());
      }
      absl::SleepFor(absl::Seconds(f_.gap));  // The last change's rescan is done.
      const double wall = absl::ToDoubleSeconds(absl::Now() - t0);
      row.cpu_ms_per_change = ((Cpu() - cpu0) * 1000 - idle_ms_per_s * wall) / f_.changes;
      if (!ok || !agent_->running()) {
        std::fprintf(stderr, "rescan_bench: %s on %s failed\n%s\n", s.c_str(), name_.c_str(),
                     agent_->Stderr().c_str());
        return 1;
      }
      const std::string p50 =
          row.expected == 0 ? "-" : absl::StrFormat("%.1f ms", Pct(row.latency_ms, 0.5));
      const std::string max =
          row.expected == 0 ? "-" : absl::StrFormat("%.1f ms", Pct(row.latency_ms, 1.0));
      std::printf("  %-58s %9.3f ms %19s %10s %4zu/%-3d\n", row.what.c_str(), row.cpu_ms_per_change,
                  p50.c_str(), max.c_str(), row.latency_ms.size(), row.expected);
      std::fflush(stdout);
      if (static_cast<int>(row.latency_ms.size()) != row.expected) {
        std::fprintf(stderr, "rescan_bench: %s: %d changes did not reach the watch stream\n",
                     s.c_str(), row.expected - static_cast<int>(row.latency_ms.size()));
        return 1;
      }
    }
    if (f_.agent_log) std::fprintf(stderr, "%s", agent_->Stderr().c_str());
    return 0;
  }

 private:
  std::string NetdevOf(const testing::RdmaDeviceSpec& r) const {
    for (const testing::NetdevSpec& n : spec_.netdevs) {
      if (!r.pci.empty() && n.pci == r.pci && n.lower.empty()) return n.name;
    }
    return "";
  }

  bool AddVeth(const std::string& a, const std::string& b) const {
    return ns_.Ip({"link", "add", a, "type", "veth", "peer", "name", b}) &&
           ns_.Ip({"link", "set", a, "up"}) && ns_.Ip({"link", "set", b, "up"});
  }

  double Cpu() const { return testing::ReadProcStats(agent_->pid()).cpu_s; }
  double CpuMs(double seconds) const {
    const double c0 = Cpu();
    absl::SleepFor(absl::Seconds(seconds));
    return (Cpu() - c0) * 1000;
  }

  // Records the time from `sent` to the watch event that names `want` (from event index `from`).
  void Expect(Row* row, size_t from, absl::Time sent, const std::string& want) {
    ++row->expected;
    auto e = watcher_->WaitFor(from, want, absl::Seconds(10));
    if (e) row->latency_ms.push_back(absl::ToDoubleMilliseconds(e->at - sent));
  }

  bool Change(const std::string& scenario, int i, Row* row) {
    const bool add = i % 2 == 0;  // Even changes add (or remove the device), odd ones undo.
    const size_t from = watcher_->count();
    if (scenario == "unrelated") {
      row->what = "unrelated veth: address added/removed";
      return ns_.Ip({"addr", add ? "add" : "del", "10.99.0.1/24", "dev", "rbpod0"});
    }
    if (scenario == "rdma-addr") {
      row->what = absl::StrCat("RDMA port's netdev ", pf_netdev_, ": address + GIDs 4/5");
      // As the kernel does it: the address first, then the GIDs for it (the rescan waits 50 ms
      // for more events, so it reads the GIDs written right after).
      if (!ns_.Ip({"addr", add ? "add" : "del", "10.99.1.2/24", "dev", pf_netdev_})) return false;
      const absl::Time sent = absl::Now();
      const fs::path port = sys_ / "class/infiniband" / pf_ / "ports/1";
      const std::string gid =
          add ? testing::Ipv4MappedGid("10.99.1.2") : "0000:0000:0000:0000:0000:0000:0000:0000";
      bool ok = true;
      for (int slot : {4, 5}) {
        const std::string s = std::to_string(slot);
        ok = ok && WriteText(port / "gids" / s, gid + "\n");
        std::error_code ec;
        if (add) {
          ok = ok &&
               WriteText(port / "gid_attrs/types" / s, slot == 4 ? "IB/RoCE v1\n" : "RoCE v2\n") &&
               WriteText(port / "gid_attrs/ndevs" / s, pf_netdev_ + "\n");
        } else {
          fs::remove(port / "gid_attrs/types" / s, ec);
          fs::remove(port / "gid_attrs/ndevs" / s, ec);
        }
      }
      if (ok) Expect(row, from, sent, absl::StrCat("KIND_GID_TABLE ", pf_, ":1"));
      return ok;
    }
    if (scenario == "device") {
      row->what = absl::StrCat("RDMA device ", last_, " removed/added with ", last_netdev_);
      const fs::path link = sys_ / "class/infiniband" / last_;
      const fs::path stash = fs::path(dir_) / "stash";
      std::error_code ec;
      if (add) {
        link_target_ = fs::read_symlink(link, ec);
        device_dir_ = fs::canonical(link, ec);
        if (ec) return false;
        fs::rename(device_dir_, stash, ec);
        fs::remove(link, ec);
        if (ec || !ns_.Ip({"link", "del", last_netdev_})) return false;
        Expect(row, from, absl::Now(), absl::StrCat("KIND_DEVICE_REMOVED ", last_));
      } else {
        fs::rename(stash, device_dir_, ec);
        fs::create_symlink(link_target_, link, ec);
        if (ec || !AddVeth(last_netdev_, "rbpeer1")) return false;
        Expect(row, from, absl::Now(), absl::StrCat("KIND_DEVICE_ADDED ", last_));
      }
      return true;
    }
    if (scenario == "full") {
      row->what = absl::StrCat("full rescan (SIGHUP), ", flap_, ":1 state flipped");
      // A reload rescans in full; a port state written before it makes the rescan publish (a
      // rescan that finds nothing new reaches no watcher).
      const fs::path state = sys_ / "class/infiniband" / flap_ / "ports/1/state";
      if (!WriteText(state, add ? "1: DOWN\n" : "4: ACTIVE\n")) return false;
      const absl::Time sent = absl::Now();
      agent_->Signal(SIGHUP);
      Expect(row, from, sent, absl::StrCat("KIND_PORT_STATE ", flap_, ":1"));
      return true;
    }
    std::fprintf(stderr, "rescan_bench: unknown scenario %s\n", scenario.c_str());
    return false;
  }

  const Flags& f_;
  std::string name_;
  testing::HostSpec spec_;
  std::string dir_, socket_;
  fs::path sys_;
  std::string pf_, pf_netdev_, flap_, last_, last_netdev_;
  fs::path link_target_, device_dir_;
  Netns ns_;
  std::unique_ptr<testing::Subprocess> agent_;
  std::unique_ptr<Watcher> watcher_;
  absl::Duration started_;
};

int Main(int argc, char** argv) {
  Flags f;
  if (!ParseFlags(argc, argv, &f)) return 2;
  if (geteuid() != 0) {
    std::fprintf(stderr, "rescan_bench: skipped, needs root for a network namespace\n");
    return kSkip;
  }
  std::printf("rescan_bench: %d changes per scenario, %.2f s apart; %u CPUs\n", f.changes, f.gap,
              std::thread::hardware_concurrency());
  for (const std::string& h : f.hosts) {
    HostRun run(f, h);
    if (int rc = run.Run(); rc != 0) return rc;
  }
  return 0;
}

}  // namespace
}  // namespace fabric

int main(int argc, char** argv) { return fabric::Main(argc, argv); }
