#include "agent/common/cli_args.h"

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

TEST(RefuseEmptyValues, Table) {
  constexpr std::string_view kOptional[] = {"--cdi-dir", "--kmsg"};
  const struct {
    std::string args;
    std::string want;  // "" accepted, else a part of the error
  } cases[] = {
      {"", ""},
      {"--sysfs=/sys --procfs=/proc", ""},
      {"--pod-helper= --sysfs=/nonexist", "--pod-helper is empty"},
      {"--sysfs=/x --gpus=", "--gpus is empty"},
      {"--cdi-dir= --sysfs=/x", ""},  // documented: turns the CDI spec off
      {"--kmsg=", ""},
      {"--kmsg-x=", "--kmsg-x is empty"},  // not a prefix match
      {"--x=a=", ""},                      // a value that ends in '='
      {"--=", ""},                         // too short to be an option: CLI11's to refuse
      {"-d=", ""},                         // short options take no "=" form here
      {"--gpus", ""},                      // a value to come: CLI11 checks it
      {"exec -- --ip=", ""},               // after "--": an argument
      {"--a= -- --b=", "--a is empty"},
      {"--\x1b[31m=", "--\\x1b[31m is empty"},  // escaped for the terminal
  };
  for (const auto& c : cases) {
    const std::vector<std::string> args = Words(c.args);
    const absl::Status s = RefuseEmptyValues(args, kOptional);
    if (c.want.empty()) {
      EXPECT_TRUE(s.ok()) << c.args << ": " << s;
    } else {
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.args;
      EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr(c.want)) << c.args;
    }
  }
}

}  // namespace
}  // namespace fabric
