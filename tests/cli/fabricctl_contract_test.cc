// fabricctl's contract with scripts, checked on the real binary: JSON that is the same bytes for
// the same host and parses back strictly into its message (the proto is the schema); bad
// arguments refused with exit 2 and a message that names what is wrong; the target from the
// environment or before the subcommand; and a missing agent said plainly and at once.
#include <gmock/gmock.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "fabric/v1/agent.pb.h"
#include "fabric/v1/health.pb.h"
#include "fabric/v1/host.pb.h"
#include "fabric/v1/select.pb.h"
#include "tests/cli/cli_fixture.h"
#include "tests/hosts/hosts.h"

namespace fabric {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Strict: a key the message does not define fails, so the output cannot drift from the proto.
template <typename M>
std::string ParsesStrictly(const std::string& json) {
  M m;
  google::protobuf::util::JsonParseOptions strict;
  strict.ignore_unknown_fields = false;
  auto s = google::protobuf::util::JsonStringToMessage(json, &m, strict);
  return s.ok() ? "" : s.ToString();
}

// The first key of `json` that starts lowercase and has an uppercase letter ("rdmaDevices"),
// or "". Map keys such as "NCCL_IB_HCA" start uppercase and are not field names.
std::string CamelKey(const std::string& json) {
  for (size_t end = json.find("\":"); end != std::string::npos; end = json.find("\":", end + 1)) {
    const size_t begin = json.rfind('"', end - 1);
    if (begin == std::string::npos) continue;
    const std::string key = json.substr(begin + 1, end - begin - 1);
    if (key.empty() || !(std::islower(static_cast<unsigned char>(key[0])) ||
                         std::isdigit(static_cast<unsigned char>(key[0])))) {
      continue;
    }
    if (std::any_of(key.begin(), key.end(),
                    [](char c) { return std::isupper(static_cast<unsigned char>(c)); })) {
      return key;
    }
  }
  return "";
}

// N in "... N word" of a health summary line; -1 when the word is not there.
int CountOf(const std::string& line, const std::string& word) {
  const size_t at = line.find(" " + word);
  if (at == std::string::npos) return -1;
  size_t start = at;
  while (start > 0 && std::isdigit(static_cast<unsigned char>(line[start - 1]))) --start;
  if (start == at) return -1;
  return std::stoi(line.substr(start, at - start));
}

TEST_F(CliTest, JsonIsTheSameBytesEveryRunAndFollowsTheProto) {
  for (const std::string& name : testing::ExampleHostNames()) {
    SCOPED_TRACE(name);
    const std::string host = Host(name);
    const struct {
      std::string args;
      std::function<std::string(const std::string&)> parse;  // The error, or empty.
    } commands[] = {
        {"inventory --json", ParsesStrictly<v1::Host>},
        {"topo --json", ParsesStrictly<v1::Host>},
        {"neighbors --json", ParsesStrictly<v1::Host>},
        {"select --gpus=all --json", ParsesStrictly<v1::Selection>},
        {"health --json", ParsesStrictly<v1::Health>},
    };
    for (const auto& c : commands) {
      SCOPED_TRACE(c.args);
      Result first = Run(c.args + " " + host);
      Result second = Run(c.args + " " + host);
      if (first.out.empty()) {
        // select on a host without GPUs or RDMA: an error, not JSON, and said the same way.
        EXPECT_NE(first.code, 0);
        EXPECT_EQ(first.err, second.err);
        continue;
      }
      EXPECT_EQ(first.out, second.out) << "the same host printed different bytes";
      EXPECT_EQ(c.parse(first.out), "") << first.out.substr(0, 2000);
      EXPECT_EQ(CamelKey(first.out), "") << "a lowerCamelCase key";
    }
    // counters: its read_at differs from run to run; the rest of the contract holds.
    Result counters = Run("counters --interval=0 --json " + host);
    if (counters.code == 0) {
      EXPECT_EQ(ParsesStrictly<v1::PortCountersResponse>(counters.out), "")
          << counters.out.substr(0, 2000);
      EXPECT_EQ(CamelKey(counters.out), "") << "a lowerCamelCase key";
      EXPECT_THAT(counters.out, HasSubstr("\"read_at\": \""));
    } else {
      EXPECT_THAT(counters.err, HasSubstr("no RDMA port")) << counters.err;
    }
    Result env1 = Run("env --gpus=all --format=json " + host);
    Result env2 = Run("env --gpus=all --format=json " + host);
    EXPECT_EQ(env1.out, env2.out);
  }
}

TEST_F(CliTest, JsonShowsZeroAndLeavesOutWhatIsUnknown) {
  const std::string host = Host("roce-9port");
  Result inv = Run("inventory --json " + host);
  ASSERT_EQ(inv.code, 0) << inv.err;
  // GID index 0 is printed as 0, not left out as proto3 would.
  EXPECT_THAT(inv.out, HasSubstr("\"index\": 0,"));
  // 64-bit numbers that fit 53 bits are numbers (first_seen_unix_ms is int64, zero here).
  EXPECT_THAT(inv.out, Not(HasSubstr("\"first_seen_unix_ms\": \"")));
  // A NUMA node the host does not give is absent, never 0 or -1.
  Result broken = Run("inventory --json " + Host("broken"));
  EXPECT_THAT(broken.out, Not(HasSubstr("\"numa_node\": -1")));
}

TEST_F(CliTest, BadArgumentsAreUsageErrorsThatSayWhy) {
  const std::string host = Host("roce-9port");
  const struct {
    std::string args;
    int code;
    std::string want;
  } cases[] = {
      // An unset variable leaves an empty value: never the next argument read as the value.
      {"env --gpus= " + host, 2, "--gpus is empty"},
      {"select --gpus= --json " + host, 2, "--gpus is empty"},
      {"select --gpus '' " + host, 2, "--gpus: is empty"},
      {"inventory --target=garbage://x", 2, "unknown scheme \"garbage\""},
      {"inventory --target=node:99999", 2, "port 1..65535"},
      {"inventory --target=node", 2, "no :PORT"},
      {"inventory --timeout=abc", 2, "--timeout: \"abc\" is not a duration"},
      {"inventory --timeout=2h", 2, "out of range (10ms to 1h)"},
      {"inventory --target=/run/x.sock " + host, 2, "--target is for asking the agent"},
      {"inventory --timeout=1 " + host, 2, "--timeout is for asking the agent"},
      {"env --gpus=all --json --format=shell " + host, 2, "--json"},
      {"env --gpus=all --export --format=json " + host, 2, "--export"},
      {"--gpus=all select " + host, 2, "before the subcommand"},
      {"probes --sysfs=/sys", 2, "--sysfs"},
      {"select --gpus=" + std::string(5000, '9') + " " + host, 2, "999"},
      {"health --timeout=abc", 3, "--timeout"},  // UNKNOWN, as monitoring plugins report it.
      // Also with global options before health, refused by CLI11 or before it.
      {"--sysfs=" + tmp_.string() + " health --bogus", 3, "--bogus"},
      {"--target=/x health --nope", 3, "--nope"},
      {"--json health --bad", 3, "--bad"},
      {"--json health --fail-on=", 3, "--fail-on is empty"},
      {"--json --bogus health", 3, "unknown option"},
      {"--json inventory --bogus", 2, "--bogus"},
      {"--tls-key", 2, "--tls-key needs a value"},
  };
  for (const auto& c : cases) {
    Result r = Run(c.args);
    EXPECT_EQ(r.code, c.code) << c.args.substr(0, 80) << "\n" << r.err;
    EXPECT_THAT(r.err + r.out, HasSubstr(c.want)) << c.args.substr(0, 80);
    EXPECT_LT(r.err.size(), 1000u) << "an error echoes the whole bad input";
  }
}

TEST_F(CliTest, TargetFromTheEnvironmentAndOptionsBeforeTheSubcommand) {
  const std::string host = Host("roce-9port");
  Result before = Run("--json " + host + " select --gpus=all");
  Result after = Run("select --gpus=all --json " + host);
  ASSERT_EQ(before.code, 0) << before.err;
  EXPECT_EQ(before.out, after.out);

  const std::string sock = (tmp_ / "nobody.sock").string();
  Result env = Run("inventory", "FABRICCTL_TARGET=" + sock);
  EXPECT_EQ(env.code, 3);
  EXPECT_THAT(env.err, HasSubstr("not running at " + sock));
  // The flag wins over the environment.
  Result flag = Run("inventory --target=" + sock + "-flag", "FABRICCTL_TARGET=" + sock);
  EXPECT_THAT(flag.err, HasSubstr(sock + "-flag"));
  // --sysfs reads here even when the environment names an agent.
  EXPECT_EQ(Run("inventory " + host, "FABRICCTL_TARGET=" + sock).code, 0);
}

TEST_F(CliTest, NoAgentIsSaidAtOnceForEveryCommand) {
  const std::string sock = (tmp_ / "nobody.sock").string();
  for (std::string cmd : {"inventory", "topo", "neighbors", "select --gpus=all", "env --gpus=all",
                          "announcements", "probes", "watch --duration=30"}) {
    const absl::Time start = absl::Now();
    Result r = Run(cmd + " --timeout=20 --target=" + sock);
    // Bounded well under --timeout: the first failed connection is the answer.
    EXPECT_LT(absl::Now() - start, absl::Seconds(10)) << cmd;
    EXPECT_EQ(r.code, 3) << cmd;
    EXPECT_THAT(r.err, HasSubstr("fabric-agent is not running at " + sock)) << cmd;
    EXPECT_THAT(r.err, HasSubstr("use --sysfs=/sys")) << cmd;
    EXPECT_THAT(r.err, Not(HasSubstr("failed to connect to all addresses"))) << cmd;
  }
}

TEST_F(CliTest, HealthCountsEveryLineItPrints) {
  for (const std::string& name : testing::ExampleHostNames()) {
    Result r = Run("health " + Host(name));
    const std::string first = r.out.substr(0, r.out.find('\n'));
    const int critical = CountOf(first, "critical"), warning = CountOf(first, "warning");
    ASSERT_GE(critical, 0) << first;
    ASSERT_GE(warning, 0) << first;
    const int said = critical + warning + std::max(0, CountOf(first, "unknown")) +
                     std::max(0, CountOf(first, "ok"));
    const int lines = static_cast<int>(std::count(r.out.begin(), r.out.end(), '\n')) - 1;
    EXPECT_EQ(said, lines) << name << "\n" << r.out;
  }
}

TEST_F(CliTest, AllMeansTheGpusNcclAndRcclDrive) {
  const std::string amd = Host("amd-mi300x-bnxt");
  Result all = Run("select --gpus=all --brief " + amd);
  ASSERT_EQ(all.code, 0) << all.err;
  EXPECT_THAT(all.out, HasSubstr("0000:"));
  // The Tenstorrent card gets no NIC from "all" ...
  EXPECT_THAT(all.out, Not(HasSubstr("0000:c6:00.0")));
  // ... but can still be named.
  Result named = Run("select --gpus=c6:00.0 " + amd);
  EXPECT_NE(named.code, 2) << named.err;
  // A BMC's display is listed, not counted as an accelerator.
  Result inv = Run("inventory " + Host("roce-9port"));
  EXPECT_THAT(inv.out, HasSubstr("Accelerators (8, and 1 management display)"));
}

TEST_F(CliTest, SelectBriefIsOneLinePerGpu) {
  const std::string host = Host("roce-9port");
  Result r = Run("select --gpus=all --brief " + host);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1 + 8);
  EXPECT_THAT(r.out, HasSubstr("GPU"));
  EXPECT_THAT(r.out, Not(HasSubstr("why:")));
  EXPECT_EQ(Run("select --gpus=all --brief --json " + host).code, 2);
}

// COMPREPLY of `function` in the bash completion `script` for the words so far.
std::string Complete(const std::filesystem::path& tmp, const std::string& script,
                     const std::string& function, const std::string& words, int cword) {
  const std::string cmd = absl::StrCat(
      "bash -c 'source ", script, " && COMP_WORDS=(", words, ") && COMP_CWORD=", cword, " && ",
      function, " && echo \"${COMPREPLY[*]}\"' >", (tmp / "out").string(), " 2>&1");
  EXPECT_EQ(std::system(cmd.c_str()), 0) << words;
  return Slurp(tmp / "out");
}

// man(1) formats `page` without a warning, where man is installed.
void ExpectCleanManPage(const std::filesystem::path& tmp, const std::string& name,
                        const std::string& page) {
  if (std::system("command -v man >/dev/null 2>&1") != 0) return;
  const std::string file = (tmp / name).string();
  { std::ofstream(file) << page; }
  const std::string cmd =
      absl::StrCat("MANWIDTH=100 man --warnings -l ", file, " >", (tmp / "man.txt").string(), " 2>",
                   (tmp / "man.err").string());
  EXPECT_EQ(std::system(cmd.c_str()), 0) << name;
  EXPECT_THAT(Slurp(tmp / "man.txt"), HasSubstr("EXIT STATUS")) << name;
  EXPECT_EQ(Slurp(tmp / "man.err"), "") << name << ": troff warnings";
}

// The scripts are generated from the command tree: loaded into a real bash, they complete
// subcommands and each one's own options.
TEST_F(CliTest, CompletionLoadsInBashAndCompletes) {
  Result bash = Run("completion bash");
  ASSERT_EQ(bash.code, 0) << bash.err;
  const std::string script = (tmp_ / "fabricctl.bash").string();
  { std::ofstream(script) << bash.out; }
  auto complete = [&](const std::string& words, int cword) {
    return Complete(tmp_, script, "_fabricctl", words, cword);
  };
  EXPECT_EQ(complete("fabricctl pl", 1), "place\n");
  EXPECT_THAT(complete("fabricctl \"\"", 1), HasSubstr("inventory"));
  EXPECT_THAT(complete("fabricctl --js", 1), HasSubstr("--json"));
  EXPECT_THAT(complete("fabricctl select --g", 2), HasSubstr("--gpus"));
  EXPECT_THAT(complete("fabricctl --json select --b", 3), HasSubstr("--brief"));
  // A global option's value is not taken for the subcommand.
  EXPECT_THAT(complete("fabricctl --target /x health --fa", 4), HasSubstr("--fail-on"));
  EXPECT_THAT(complete("fabricctl place --", 2), HasSubstr("--one-nic-per-gpu"));
  EXPECT_THAT(complete("fabricctl place --", 2), Not(HasSubstr("--brief")));
  // After an option that takes a path: file names.
  EXPECT_THAT(
      complete(absl::StrCat("fabricctl inventory --sysfs ", tmp_.string(), "/fabricctl.b"), 3),
      HasSubstr("fabricctl.bash"));

  Result zsh = Run("completion zsh");
  EXPECT_THAT(zsh.out, HasSubstr("#compdef fabricctl"));
  Result man = Run("completion man");
  EXPECT_THAT(man.out, HasSubstr(".TH FABRICCTL 1"));
  for (const char* sub : {"inventory", "select", "place", "version", "watch"}) {
    EXPECT_THAT(man.out, HasSubstr(absl::StrCat(".SS ", sub, "\n"))) << sub;
  }
  EXPECT_THAT(man.out, HasSubstr("FABRICCTL_TARGET"));
  ExpectCleanManPage(tmp_, "fabricctl.1", man.out);
}

// The other binaries print theirs with --generate=bash|zsh|man, from the same generator.
TEST_F(CliTest, EveryBinaryGeneratesACompletionThatLoadsAndACleanManPage) {
  const struct {
    std::string binary, name, words;
    int cword;
    std::string completes, header, page_has;
  } cases[] = {
      {FABRIC_AGENT, "fabric-agent", "fabric-agent --rescan-i", 1, "--rescan-interval",
       ".TH FABRIC-AGENT 8", "\\fB\\-\\-probe\\-listen\\fR \\fITEXT\\fR"},
      {FABRIC_AGENT, "fabric-agent", "fabric-agent --device-pl", 1, "--device-plugin-dir",
       ".TH FABRIC-AGENT 8", "\\fB\\-\\-device\\-plugin\\-dir\\fR"},
      {FABRIC_PROBE, "fabric-probe", "fabric-probe write_b", 1, "write_bw", ".TH FABRIC-PROBE 1",
       "\\fB\\-d, \\-\\-ib\\-dev\\fR"},
      {FABRIC_PROBE, "fabric-probe", "fabric-probe read_lat --secret-f", 2, "--secret-file",
       ".TH FABRIC-PROBE 1", "\\fITEST\\fR"},
      {FABRIC_CNI, "fabric-cni", "fabric-cni --vers", 1, "--version", ".TH FABRIC-CNI 8",
       "\\fBpodRouting.tableRange\\fR"},
      {FABRIC_ENV, "fabric-env", "fabric-env ex", 1, "exec", ".TH FABRIC-ENV 1",
       "\\fB\\-\\-rank\\-gpu\\fR"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.words);
    auto run = [&](const std::string& kind, const std::string& file) {
      const std::string cmd =
          absl::StrCat(c.binary, " --generate=", kind, " >", file, " 2>", (tmp_ / "err").string());
      return std::system(cmd.c_str());
    };
    const std::string script = (tmp_ / (c.name + ".bash")).string();
    ASSERT_EQ(run("bash", script), 0) << Slurp(tmp_ / "err");
    const std::string function = "_" + absl::StrReplaceAll(c.name, {{"-", "_"}});
    EXPECT_THAT(Complete(tmp_, script, function, c.words, c.cword), HasSubstr(c.completes));
    ASSERT_EQ(run("zsh", (tmp_ / "zsh").string()), 0);
    EXPECT_THAT(Slurp(tmp_ / "zsh"), HasSubstr("#compdef " + c.name));
    ASSERT_EQ(run("man", (tmp_ / "page").string()), 0);
    const std::string page = Slurp(tmp_ / "page");
    EXPECT_THAT(page, HasSubstr(c.header));
    EXPECT_THAT(page, HasSubstr(c.page_has));
    for (const char* section : {"NAME", "SYNOPSIS", "DESCRIPTION", "EXIT STATUS", "SEE ALSO"}) {
      EXPECT_THAT(page, HasSubstr(absl::StrCat(".SH ", section, "\n")));
    }
    ExpectCleanManPage(tmp_, c.name, page);
    EXPECT_EQ(WEXITSTATUS(run("nroff", (tmp_ / "x").string())), 2) << "an unknown kind: usage";
  }
}

}  // namespace
}  // namespace fabric
