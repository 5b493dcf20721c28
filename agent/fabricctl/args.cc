#include "agent/fabricctl/args.h"

#include <algorithm>
#include <iterator>
#include <span>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/common/cli_args.h"
#include "agent/common/excerpt.h"
#include "agent/common/strings.h"

namespace fabric::ctl {
namespace {

template <typename List>
bool In(std::string_view name, const List& list) {
  return std::find(std::begin(list), std::end(list), name) != std::end(list);
}

// Where the subcommand is: the first argument that is neither a global option nor its value.
struct Split {
  size_t subcommand = 0;  // args.size() when there is none
  std::vector<std::string> before;
  absl::Status status;  // the first option that cannot come before the subcommand
  bool help = false;    // --help or --version before it: CLI11 answers those
};

Split SplitGlobal(const std::vector<std::string>& args) {
  Split s;
  size_t i = 1;
  while (i < args.size() && absl::StartsWith(args[i], "-")) {
    const std::string& a = args[i++];
    if (a == "--help" || a == "-h" || a == "--version") {
      s.help = s.help || s.status.ok();
      continue;
    }
    const std::string name = a.substr(0, a.find('='));
    if (In(name, kGlobalFlags) && name == a) {
      s.before.push_back(a);
    } else if (In(name, kGlobalValueOptions)) {
      s.before.push_back(a);
      if (name == a) {  // "--target X": the value is the next argument.
        if (i >= args.size()) {
          if (s.status.ok()) {
            s.status = absl::InvalidArgumentError(absl::StrCat(a, " needs a value"));
          }
          break;
        }
        s.before.push_back(args[i++]);
      }
    } else if (s.status.ok()) {
      s.status = absl::InvalidArgumentError(
          absl::StrCat("unknown option ", Excerpt(a, 40), " before the subcommand (options there: ",
                       absl::StrJoin(GlobalOptionNames(), ", "), ")"));
    }
  }
  s.subcommand = i;
  return s;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> PrepareArgs(std::vector<std::string> args) {
  if (args.size() > 1) {
    if (absl::Status s = RefuseEmptyValues(std::span(args).subspan(1)); !s.ok()) return s;
  }
  Split split = SplitGlobal(args);
  if (split.help) return args;
  if (!split.status.ok()) return split.status;
  if (split.before.empty()) return args;
  const size_t i = split.subcommand;
  if (i >= args.size()) {
    return absl::InvalidArgumentError("options without a subcommand (--help lists them)");
  }
  std::vector<std::string> out = {args[0], args[i]};
  out.insert(out.end(), split.before.begin(), split.before.end());
  out.insert(out.end(), args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
  return out;
}

std::vector<std::string> GlobalOptionNames() {
  std::vector<std::string> out(std::begin(kGlobalValueOptions), std::end(kGlobalValueOptions));
  out.insert(out.end(), std::begin(kGlobalFlags), std::end(kGlobalFlags));
  return out;
}

std::string SubcommandOf(const std::vector<std::string>& args) {
  const size_t i = SplitGlobal(args).subcommand;
  return i < args.size() ? args[i] : "";
}

namespace {

// Seconds or a duration with its unit, not yet range-checked.
absl::StatusOr<absl::Duration> ParseDurationText(std::string_view text) {
  absl::Duration d;
  double seconds = 0;
  bool ok = false;
  if (absl::SimpleAtod(Av(text), &seconds)) {
    ok = seconds == seconds && seconds < 1e9;  // Not NaN, and no overflow below.
    if (ok) d = absl::Seconds(seconds);
  } else {
    ok = absl::ParseDuration(Av(text), &d);
  }
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        Excerpt(text, 40), " is not a duration (seconds, or with a unit: 500ms, 2s, 1m)"));
  }
  return d;
}

bool InRange(absl::Duration d) { return d >= absl::Milliseconds(10) && d <= absl::Hours(1); }

absl::Status OutOfRange(std::string_view text, std::string_view range) {
  return absl::InvalidArgumentError(
      absl::StrCat(Excerpt(text, 40), " is out of range (", Av(range), ")"));
}

}  // namespace

absl::StatusOr<absl::Duration> ParseTimeout(std::string_view text) {
  auto d = ParseDurationText(text);
  if (!d.ok()) return d.status();
  if (!InRange(*d)) return OutOfRange(text, "10ms to 1h");
  return d;
}

absl::StatusOr<absl::Duration> ParseInterval(std::string_view text) {
  auto d = ParseDurationText(text);
  if (!d.ok()) return d.status();
  if (*d != absl::ZeroDuration() && !InRange(*d)) return OutOfRange(text, "0, or 10ms to 1h");
  return d;
}

}  // namespace fabric::ctl
