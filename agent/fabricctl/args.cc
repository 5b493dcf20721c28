#include "agent/fabricctl/args.h"

#include <algorithm>
#include <iterator>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "agent/common/excerpt.h"
#include "agent/common/strings.h"

namespace fabric::ctl {
namespace {

bool In(std::string_view name, const std::string_view* begin, const std::string_view* end) {
  return std::find(begin, end, name) != end;
}
bool IsGlobalValueOption(std::string_view name) {
  return In(name, std::begin(kGlobalValueOptions), std::end(kGlobalValueOptions));
}
bool IsGlobalFlag(std::string_view name) {
  return In(name, std::begin(kGlobalFlags), std::end(kGlobalFlags));
}

}  // namespace

absl::StatusOr<std::vector<std::string>> PrepareArgs(std::vector<std::string> args) {
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") break;  // Everything after is an argument, whatever it looks like.
    if (absl::StartsWith(a, "--") && a.size() > 3 && a.back() == '=' &&
        a.find('=') == a.size() - 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          a.substr(0, a.size() - 1), " is empty: give it a value, or leave the option out"));
    }
  }
  // Options before the subcommand.
  std::vector<std::string> before;
  size_t i = 1;
  while (i < args.size() && absl::StartsWith(args[i], "-")) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h" || a == "--version") return args;
    const std::string name = a.substr(0, a.find('='));
    if (IsGlobalFlag(name) && name == a) {
      before.push_back(a);
      ++i;
    } else if (IsGlobalValueOption(name)) {
      before.push_back(a);
      ++i;
      if (name == a) {  // "--target X": the value is the next argument.
        if (i >= args.size()) return absl::InvalidArgumentError(absl::StrCat(a, " needs a value"));
        before.push_back(args[i++]);
      }
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown option ", Excerpt(a, 40),
          " before the subcommand (options there: --target, --timeout, --tls-ca, --tls-cert, "
          "--tls-key, --sysfs, --procfs, --config, --json)"));
    }
  }
  if (before.empty()) return args;
  if (i >= args.size()) {
    return absl::InvalidArgumentError("options without a subcommand (--help lists them)");
  }
  std::vector<std::string> out = {args[0], args[i]};
  out.insert(out.end(), before.begin(), before.end());
  out.insert(out.end(), args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
  return out;
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
