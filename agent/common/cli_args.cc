#include "agent/common/cli_args.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/common/excerpt.h"

namespace fabric {

absl::Status RefuseEmptyValues(std::span<const std::string> args,
                               std::span<const std::string_view> may_be_empty) {
  for (const std::string& a : args) {
    if (a == "--") break;  // Everything after is an argument, whatever it looks like.
    if (!absl::StartsWith(a, "--") || a.size() <= 3 || a.find('=') != a.size() - 1) continue;
    const std::string_view name = std::string_view(a).substr(0, a.size() - 1);
    if (std::find(may_be_empty.begin(), may_be_empty.end(), name) != may_be_empty.end()) continue;
    return absl::InvalidArgumentError(
        absl::StrCat(TerminalText(name), " is empty: give it a value, or leave the option out"));
  }
  return absl::OkStatus();
}

}  // namespace fabric
