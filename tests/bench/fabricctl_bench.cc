// fabricctl as operators run it, on the 256-device host (LargeHost(32, 7, 256)) and the example
// hosts: wall time per command (median of --runs) read here (--sysfs) and through a running
// agent, and the widest line of each table view (the default views should fit 100 columns).
// Prints figures; asserts only that every command ran.
//
// fabricctl_bench [--runs=5] [--hosts=large,roce-9port,...] [--agent=1]
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "tests/hosts/builder.h"
#include "tests/hosts/hosts.h"
#include "tests/testing/binaries.h"
#include "tests/testing/subprocess.h"

namespace fabric {
namespace {

namespace fs = std::filesystem;

struct Flags {
  int runs = 5;
  std::vector<std::string> hosts = {"large", "roce-9port", "dgx-h100-ib", "amd-mi300x-bnxt",
                                    "sriov-512vf"};
  bool agent = true;
};

bool ParseFlags(int argc, char** argv, Flags* f) {
  for (int i = 1; i < argc; ++i) {
    std::vector<std::string> kv = absl::StrSplit(argv[i], absl::MaxSplits('=', 1));
    if (kv.size() == 2 && kv[0] == "--runs" && absl::SimpleAtoi(kv[1], &f->runs) && f->runs > 0) {
      continue;
    }
    if (kv.size() == 2 && kv[0] == "--hosts") {
      f->hosts = absl::StrSplit(kv[1], ',', absl::SkipEmpty());
      continue;
    }
    int on = 0;
    if (kv.size() == 2 && kv[0] == "--agent" && absl::SimpleAtoi(kv[1], &on)) {
      f->agent = on != 0;
      continue;
    }
    std::fprintf(stderr, "fabricctl_bench: bad argument %s\n", argv[i]);
    return false;
  }
  return true;
}

size_t Widest(const std::string& text) {
  size_t widest = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) widest = std::max(widest, line.size());
  return widest;
}

// Runs `args` `runs` times: the median wall time in ms, the output's widest line, and whether
// every run exited 0 or 1 (1: the host lacks something, e.g. no GPU set fits).
struct Figure {
  double median_ms = 0;
  size_t widest = 0;
  bool ok = true;
  std::string err;
};
Figure Time(const std::vector<std::string>& args, int runs) {
  Figure f;
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    const absl::Time start = absl::Now();
    auto r = testing::Run(args, absl::Seconds(60));
    ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
    if (!r.ok() || r->status > 1) {
      f.ok = false;
      f.err = r.ok() ? r->err.substr(0, 200) : r.status().ToString();
      return f;
    }
    f.widest = Widest(r->out);
  }
  std::sort(ms.begin(), ms.end());
  f.median_ms = ms[ms.size() / 2];
  return f;
}

int Main(int argc, char** argv) {
  Flags flags;
  if (!ParseFlags(argc, argv, &flags)) return 2;
  const std::string dir = testing::MakeTempDir("fabricctl_bench");
  const std::vector<std::vector<std::string>> commands = {
      {"inventory"},
      {"inventory", "--json"},
      {"topo"},
      {"topo", "--json"},
      {"neighbors"},
      {"select", "--gpus=all"},
      {"select", "--gpus=all", "--brief"},
      {"select", "--gpus=all", "--json"},
      {"env", "--gpus=all"},
      {"place", "--count=2"},
      {"health"},
  };
  bool all_ok = true;
  std::printf("%-16s %-6s %-28s %10s %7s\n", "HOST", "SOURCE", "COMMAND", "MEDIAN_MS", "WIDEST");
  for (const std::string& name : flags.hosts) {
    const fs::path root = fs::path(dir) / name;
    auto spec = name == "large" ? absl::StatusOr<testing::HostSpec>(testing::LargeHost(32, 7, 256))
                                : testing::ExampleHost(name);
    if (!spec.ok() || !testing::WriteHost(*spec, root).ok()) {
      std::fprintf(stderr, "fabricctl_bench: cannot write host %s\n", name.c_str());
      return 1;
    }
    const std::string sysfs = "--sysfs=" + (root / "sys").string();
    const std::string procfs = "--procfs=" + (root / "proc").string();
    std::unique_ptr<testing::Subprocess> agent;
    const std::string socket = (root / "agent.sock").string();
    if (flags.agent) {
      auto p =
          testing::Subprocess::Start({testing::kAgentBinary, "--socket=" + socket, sysfs, procfs});
      if (p.ok() && testing::WaitForSocket(**p, socket, absl::Seconds(60))) agent = *std::move(p);
    }
    for (const auto& cmd : commands) {
      for (const bool through_agent : {false, true}) {
        if (through_agent && agent == nullptr) continue;
        std::vector<std::string> args = {testing::kFabricctlBinary};
        args.insert(args.end(), cmd.begin(), cmd.end());
        if (through_agent) {
          args.push_back("--target=" + socket);
        } else {
          args.push_back(sysfs);
          args.push_back(procfs);
        }
        // The agent answers once its first inventory is published: the first run waits for it.
        Figure f = Time(args, flags.runs);
        all_ok = all_ok && f.ok;
        const bool table = std::find(cmd.begin(), cmd.end(), "--json") == cmd.end();
        std::printf("%-16s %-6s %-28s %10.1f %7s%s\n", name.c_str(),
                    through_agent ? "agent" : "local", absl::StrJoin(cmd, " ").c_str(), f.median_ms,
                    table ? absl::StrCat(f.widest).c_str() : "-",
                    f.ok ? "" : absl::StrCat("  FAILED: ", f.err).c_str());
      }
    }
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  return all_ok ? 0 : 1;
}

}  // namespace
}  // namespace fabric

int main(int argc, char** argv) { return fabric::Main(argc, argv); }
