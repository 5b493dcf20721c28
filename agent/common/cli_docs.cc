#include "agent/common/cli_docs.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "agent/common/version.h"

namespace fabric::docs {
namespace {

std::string Term(const Item& item) {
  std::string out;
  if (!item.term.empty()) absl::StrAppend(&out, "\\fB", Roff(item.term), "\\fR");
  if (!item.arg.empty()) {
    absl::StrAppend(&out, item.term.empty() ? "" : " ", "\\fI", Roff(item.arg), "\\fR");
  }
  return out;
}

std::string RenderSection(const Section& s) {
  std::string out = absl::StrCat(s.sub ? ".SS " : ".SH ", Roff(s.title), "\n");
  for (size_t i = 0; i < s.paragraphs.size(); ++i) {
    absl::StrAppend(&out, i > 0 ? ".PP\n" : "", Roff(s.paragraphs[i]), "\n");
  }
  for (const Item& item : s.items) {
    absl::StrAppend(&out, ".TP\n", Term(item), "\n", Roff(item.text), "\n");
  }
  return out;
}

std::string Unique(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return absl::StrJoin(v, "|");
}

}  // namespace

std::string Roff(absl::string_view text) {
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::string out = absl::StrReplaceAll(line, {{"\\", "\\e"}, {"-", "\\-"}});
    // A line starting with a dot or a quote would be a request.
    if (!out.empty() && (out[0] == '.' || out[0] == '\'')) out = "\\&" + out;
    lines.push_back(std::move(out));
  }
  return absl::StrJoin(lines, "\n");
}

std::string ManPage(const Page& page) {
  std::string out = absl::StrCat(
      ".TH ", absl::AsciiStrToUpper(page.name), " ", page.section, " \"\" \"", page.name, " ",
      kFabricVersion, "\" \"", page.section == 8 ? "System Administration" : "User Commands",
      "\"\n.SH NAME\n", Roff(page.name), " \\- ", Roff(page.summary), "\n.SH SYNOPSIS\n.B ",
      Roff(page.name), "\n", Roff(page.synopsis), "\n");
  absl::StrAppend(&out, RenderSection({"DESCRIPTION", page.description, {}}));
  for (const Section& s : page.sections) absl::StrAppend(&out, RenderSection(s));
  if (!page.see_also.empty()) {
    absl::StrAppend(&out, ".SH SEE ALSO\n", Roff(absl::StrJoin(page.see_also, ", ")), "\n");
  }
  return out;
}

bool TakesPath(absl::string_view option) {
  for (absl::string_view p :
       {"sysfs", "procfs", "config", "tls-", "socket", "target", "-file", "-dir"}) {
    if (absl::StrContains(option, p)) return true;
  }
  return false;
}

std::string BashCompletion(const Completion& c) {
  const std::string fn = absl::StrCat("_", absl::StrReplaceAll(c.program, {{"-", "_"}}));
  std::string out = absl::StrCat("# bash completion for ", c.program, " ", kFabricVersion,
                                 " (generated from its command line)\n", fn,
                                 "() {\n"
                                 "  local cur=\"${COMP_WORDS[COMP_CWORD]}\" "
                                 "prev=\"${COMP_WORDS[COMP_CWORD-1]}\"\n"
                                 "  local sub=\"\" opts=\"\" i\n");
  if (!c.subcommands.empty()) {
    // The subcommand is the first word that is neither an option nor an option's value.
    absl::StrAppend(&out,
                    "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
                    "    case \"${COMP_WORDS[i]}\" in\n");
    if (!c.value_options.empty()) {
      absl::StrAppend(&out, "      ", Unique(c.value_options), ") ((i++)) ;;\n");
    }
    absl::StrAppend(&out,
                    "      -*) ;;\n"
                    "      *) sub=\"${COMP_WORDS[i]}\"; break ;;\n"
                    "    esac\n"
                    "  done\n");
  }
  if (!c.path_options.empty()) {
    absl::StrAppend(&out, "  case \"$prev\" in\n    ", Unique(c.path_options),
                    ") COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n  esac\n");
  }
  absl::StrAppend(&out, "  case \"$sub\" in\n    \"\") opts=\"", absl::StrJoin(c.words, " "),
                  "\" ;;\n");
  for (const auto& [name, opts] : c.subcommands) {
    absl::StrAppend(&out, "    ", name, ") opts=\"", absl::StrJoin(opts, " "), "\" ;;\n");
  }
  absl::StrAppend(&out,
                  "  esac\n"
                  "  COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))\n"
                  "}\n"
                  "complete -F ",
                  fn, " ", c.program, "\n");
  return out;
}

std::string ZshCompletion(const Completion& c) {
  return absl::StrCat(
      "#compdef ", c.program, "\n# zsh completion for ", c.program, " ", kFabricVersion,
      ", through bash's\nautoload -U +X bashcompinit && bashcompinit\n", BashCompletion(c));
}

std::optional<std::string> GenerateKind(const std::vector<std::string>& args) {
  constexpr absl::string_view kFlag = "--generate=";
  if (args.size() != 2 || !absl::StartsWith(args[1], kFlag)) return std::nullopt;
  return args[1].substr(kFlag.size());
}

absl::StatusOr<std::string> Generate(absl::string_view kind, const Page& page,
                                     const Completion& completion) {
  if (kind == "bash") return BashCompletion(completion);
  if (kind == "zsh") return ZshCompletion(completion);
  if (kind == "man") return ManPage(page);
  return absl::InvalidArgumentError(
      absl::StrCat("--generate: ", kind.substr(0, 40), " is not bash, zsh or man"));
}

int PrintGenerated(absl::string_view kind, const Page& page, const Completion& completion) {
  absl::StatusOr<std::string> text = Generate(kind, page, completion);
  if (!text.ok()) {
    std::fprintf(stderr, "%s: %s\n", page.name.c_str(),
                 std::string(text.status().message()).c_str());
    return 2;
  }
  std::fwrite(text->data(), 1, text->size(), stdout);
  return 0;
}

}  // namespace fabric::docs
