// fabricctl's output on every example host, tables and JSON, against golden files reviewed in
// diffs (tests/cli/golden/<host>/<command>). Each command runs twice: the same host prints the
// same bytes. scripts/regen-golden.sh rewrites the files (FABRIC_UPDATE_GOLDEN=1).
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "tests/cli/cli_fixture.h"
#include "tests/hosts/hosts.h"

namespace fabric {
namespace {

// File name, then the arguments after the host's --sysfs/--procfs.
const std::vector<std::pair<std::string, std::string>>& Commands() {
  static const auto* commands = new std::vector<std::pair<std::string, std::string>>{
      {"inventory.txt", "inventory"},
      {"inventory-wide.txt", "inventory --wide"},
      {"topo.txt", "topo"},
      {"topo-wide.txt", "topo --wide"},
      {"neighbors.txt", "neighbors"},
      {"select.txt", "select --gpus=all"},
      {"select-brief.txt", "select --gpus=all --brief"},
      {"place.txt", "place --count=2"},
      {"env.txt", "env --gpus=all"},
      {"health.txt", "health"},
      {"counters.txt", "counters --interval=0"},
      {"topo.json", "topo --json"},
      {"select.json", "select --gpus=all --json"},
      {"place.json", "place --count=2 --json"},
      {"health.json", "health --json"},
  };
  return *commands;
}

class GoldenTest : public CliTest, public ::testing::WithParamInterface<std::string> {
 protected:
  // stdout, then stderr and the exit code where there are any, the temporary root as @ROOT@.
  std::string Output(const std::string& flags, const std::string& args) {
    const Result r = Run(absl::StrCat(args, " ", flags));
    std::string text = r.out;
    if (!r.err.empty()) absl::StrAppend(&text, "--- stderr\n", r.err);
    if (r.code != 0) absl::StrAppend(&text, "--- exit ", r.code, "\n");
    return absl::StrReplaceAll(text, {{(tmp_ / GetParam()).string(), "@ROOT@"}});
  }
};

TEST_P(GoldenTest, EveryCommandPrintsItsGoldenBytes) {
  const std::string flags = Host(GetParam());
  const std::filesystem::path dir = std::filesystem::path(GOLDEN_DIR) / GetParam();
  const bool update = std::getenv("FABRIC_UPDATE_GOLDEN") != nullptr;
  if (update) std::filesystem::create_directories(dir);
  // 512 VFs make the per-GPU rejections and the JSON megabytes: the small views only there.
  const bool big = GetParam() == "sriov-512vf";
  for (const auto& [file, args] : Commands()) {
    if (big && file != "topo.txt" && file != "neighbors.txt" && file != "place.txt" &&
        file != "health.txt" && file != "select-brief.txt") {
      continue;
    }
    const std::string got = Output(flags, args);
    EXPECT_EQ(got, Output(flags, args)) << args << ": two runs printed different bytes";
    if (update) {
      std::ofstream(dir / file) << got;
      continue;
    }
    ASSERT_TRUE(std::filesystem::exists(dir / file))
        << (dir / file) << " is missing: run scripts/regen-golden.sh";
    EXPECT_EQ(got, Slurp(dir / file))
        << "fabricctl " << args << " on " << GetParam()
        << " differs from its golden file; if the change is meant, run scripts/regen-golden.sh "
           "and review the diff";
  }
}

INSTANTIATE_TEST_SUITE_P(ExampleHosts, GoldenTest, ::testing::ValuesIn(testing::ExampleHostNames()),
                         [](const auto& p) {
                           return absl::StrReplaceAll(p.param, {{"-", "_"}});
                         });

}  // namespace
}  // namespace fabric
