#include "agent/common/cli_args_cli11.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_split.h"

namespace fabric {
namespace {

std::vector<std::string> Words(const std::string& line) {
  std::vector<std::string> out;
  for (absl::string_view a : absl::StrSplit(line, ' ', absl::SkipEmpty())) out.emplace_back(a);
  return out;
}

TEST(RefuseMissingValues, Table) {
  CLI::App app;
  std::string s;
  int n = 0;
  bool flag = false;
  app.add_option("--sysfs", s);
  app.add_option("-d,--ib-dev", s);
  app.add_option("-x", n);
  app.add_option("--cdi-dir", s)->expected(0, 1);
  app.add_flag("--json", flag);
  CLI::App* exec = app.add_subcommand("exec");
  exec->add_option("--gpus", s);
  const struct {
    std::string args;
    std::string want;  // "" accepted, else a part of the error
  } cases[] = {
      {"", ""},
      {"--sysfs /sys --json", ""},
      {"--sysfs --procfs=/proc", "--sysfs needs a value (--procfs=/proc after it is an option)"},
      {"--pod-helper --sysfs=/nonexist", ""},  // unknown: CLI11's to refuse
      {"-d -p 18516", "-d needs a value (-p after it is an option)"},
      {"--ib-dev", "--ib-dev needs a value"},
      {"-x -1", ""},   // a negative number is a value
      {"-x -.5", ""},  // so is a fraction
      {"-x --json", "-x needs a value"},
      {"--json --sysfs=/x", ""},     // a flag takes none
      {"--cdi-dir --sysfs=/x", ""},  // optional value
      {"-dmlx5_0 -x 3", ""},         // attached
      {"exec --gpus --json", "--gpus needs a value"},
      {"exec --gpus 0 cmd --sysfs", ""},  // the caller cuts the command off (below)
      {"-- --sysfs", ""},
      {"--sysfs -\x1b[2J", "--sysfs needs a value (-\\x1b[2J after it is an option)"},
  };
  for (const auto& c : cases) {
    const std::vector<std::string> args = Words(c.args);
    std::span<const std::string> span(args);
    // The command exec runs is the caller's to cut off (fabric-env's OwnArgsEnd).
    if (c.args == "exec --gpus 0 cmd --sysfs") span = span.subspan(0, 3);
    const absl::Status st = RefuseMissingValues(app, span);
    if (c.want.empty()) {
      EXPECT_TRUE(st.ok()) << c.args << ": " << st;
    } else {
      EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << c.args;
      EXPECT_THAT(std::string(st.message()), ::testing::HasSubstr(c.want)) << c.args;
    }
  }
}

}  // namespace
}  // namespace fabric
