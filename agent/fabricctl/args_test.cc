#include "agent/fabricctl/args.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace fabric::ctl {
namespace {

using ::testing::HasSubstr;

std::vector<std::string> Args(const std::string& line) {
  std::vector<std::string> out = {"fabricctl"};
  for (absl::string_view a : absl::StrSplit(line, ' ', absl::SkipEmpty())) out.emplace_back(a);
  return out;
}

TEST(PrepareArgs, GlobalOptionsMoveAfterTheSubcommand) {
  const struct {
    std::string in, out;
  } cases[] = {
      {"select --gpus=all", "select --gpus=all"},
      {"--target=/run/a.sock select --gpus=all", "select --target=/run/a.sock --gpus=all"},
      {"--target /run/a.sock --json inventory", "inventory --target /run/a.sock --json"},
      {"--sysfs=H/sys --procfs=H/proc topo", "topo --sysfs=H/sys --procfs=H/proc"},
      {"--timeout=2s watch --duration=1", "watch --timeout=2s --duration=1"},
      {"--help", "--help"},
      {"--version", "--version"},
      {"--json --help inventory", "--json --help inventory"},
      // Values after "--" are left alone, even when they look like an empty option.
      {"announce -- --ip=", "announce -- --ip="},
  };
  for (const auto& c : cases) {
    auto got = PrepareArgs(Args(c.in));
    ASSERT_TRUE(got.ok()) << c.in << ": " << got.status();
    EXPECT_EQ(absl::StrJoin(got->begin() + 1, got->end(), " "), c.out) << c.in;
  }
}

TEST(PrepareArgs, RefusesWhatWouldBeMisread) {
  const struct {
    std::string in, want;
  } cases[] = {
      {"env --gpus= --sysfs=H/sys", "--gpus is empty"},
      {"select --gpus= --json", "--gpus is empty"},
      {"--target= inventory", "--target is empty"},
      {"--target", "--target needs a value"},
      {"--json", "options without a subcommand"},
      {"--gpus=all select", "unknown option \"--gpus=all\" before the subcommand"},
      {"-x inventory", "unknown option \"-x\""},
  };
  for (const auto& c : cases) {
    auto got = PrepareArgs(Args(c.in));
    ASSERT_FALSE(got.ok()) << c.in;
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(got.status().message(), HasSubstr(c.want)) << c.in;
  }
  // An empty value given as its own argument ("--gpus ''") is CLI11's to refuse (fabricctl adds
  // a check to every value option); a long bad option is quoted short.
  auto huge = PrepareArgs(Args("--" + std::string(5000, 'x') + " inventory"));
  ASSERT_FALSE(huge.ok());
  EXPECT_LT(huge.status().message().size(), 300u);
}

// health's usage errors exit UNKNOWN, so the subcommand must be found behind global options and
// their values, also in a command line PrepareArgs refuses.
TEST(SubcommandOf, SkipsGlobalOptionsAndTheirValues) {
  const struct {
    std::string in, want;
  } cases[] = {
      {"health --bogus", "health"},
      {"--sysfs=X health --bogus", "health"},
      {"--target /x health --nope", "health"},
      {"--json health --bad", "health"},
      {"--json --timeout 2s --tls-ca ca.pem health --gpus=", "health"},
      {"--bogus health", "health"},
      {"--help health", "health"},
      {"--target", ""},
      {"--json", ""},
      {"", ""},
  };
  for (const auto& c : cases) EXPECT_EQ(SubcommandOf(Args(c.in)), c.want) << c.in;
}

TEST(ParseTimeout, SecondsOrAUnitWithinBounds) {
  const struct {
    std::string text;
    absl::Duration want;
  } ok[] = {{"5", absl::Seconds(5)},
            {"2.5", absl::Milliseconds(2500)},
            {"500ms", absl::Milliseconds(500)},
            {"1m", absl::Minutes(1)},
            {"0.01", absl::Milliseconds(10)},
            {"1h", absl::Hours(1)}};
  for (const auto& c : ok) {
    auto got = ParseTimeout(c.text);
    ASSERT_TRUE(got.ok()) << c.text << ": " << got.status();
    EXPECT_EQ(*got, c.want) << c.text;
  }
  for (std::string bad : {"abc", "", "5 s", "-1", "0", "2h", "nan", "inf", "1e300"}) {
    auto got = ParseTimeout(bad);
    ASSERT_FALSE(got.ok()) << bad;
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_THAT(ParseTimeout("abc").status().message(), HasSubstr("500ms, 2s, 1m"));
  EXPECT_THAT(ParseTimeout("2h").status().message(), HasSubstr("10ms to 1h"));
}

TEST(ParseInterval, ZeroOrATimeout) {
  const struct {
    std::string text;
    absl::Duration want;
  } ok[] = {{"0", absl::ZeroDuration()},
            {"0s", absl::ZeroDuration()},
            {"1", absl::Seconds(1)},
            {"250ms", absl::Milliseconds(250)},
            {"1h", absl::Hours(1)}};
  for (const auto& c : ok) {
    auto got = ParseInterval(c.text);
    ASSERT_TRUE(got.ok()) << c.text << ": " << got.status();
    EXPECT_EQ(*got, c.want) << c.text;
  }
  for (std::string bad : {"abc", "", "-1", "1ms", "2h", "nan", "1s500"}) {
    auto got = ParseInterval(bad);
    ASSERT_FALSE(got.ok()) << bad;
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_THAT(ParseInterval("5ms").status().message(), HasSubstr("0, or 10ms to 1h"));
}

}  // namespace
}  // namespace fabric::ctl
