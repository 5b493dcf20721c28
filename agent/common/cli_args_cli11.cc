#include "agent/common/cli_args_cli11.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "agent/common/excerpt.h"

namespace fabric {

absl::Status RefuseMissingValues(const CLI::App& app, std::span<const std::string> args) {
  const CLI::App* scope = &app;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") break;
    if (a.size() < 2 || a[0] != '-') {
      if (scope == &app) {
        for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
          if (sub->check_name(a)) scope = sub;
        }
      }
      continue;
    }
    if (a.find('=') != std::string::npos) continue;
    const CLI::Option* o = scope->get_option_no_throw(a);
    if (o == nullptr && scope != &app) o = app.get_option_no_throw(a);
    if (o == nullptr || o->get_expected_min() == 0) continue;  // unknown, a flag, optional
    if (i + 1 >= args.size()) {
      return absl::InvalidArgumentError(absl::StrCat(TerminalText(a), " needs a value"));
    }
    const std::string& next = args[i + 1];
    const bool number = next.size() > 1 && (absl::ascii_isdigit(next[1]) || next[1] == '.');
    if (next.size() > 1 && next[0] == '-' && !number) {
      return absl::InvalidArgumentError(absl::StrCat(
          TerminalText(a), " needs a value (", TerminalText(next), " after it is an option)"));
    }
    ++i;
  }
  return absl::OkStatus();
}

}  // namespace fabric
