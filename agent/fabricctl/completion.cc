#include "agent/fabricctl/completion.h"

#include <algorithm>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "agent/common/version.h"
#include "agent/fabricctl/args.h"
#include "agent/fabricctl/ctl.h"

namespace fabric::ctl {
namespace {

std::vector<const CLI::App*> Visible(const CLI::App& app) {
  std::vector<const CLI::App*> out;
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (!sub->get_group().empty()) out.push_back(sub);
  }
  return out;
}

std::vector<const CLI::Option*> LongOptions(const CLI::App& cmd) {
  std::vector<const CLI::Option*> out;
  for (const CLI::Option* o : cmd.get_options()) {
    if (!o->get_lnames().empty() && !o->get_group().empty()) out.push_back(o);
  }
  return out;
}

// Options whose value is a file or directory.
bool TakesPath(const std::string& name) {
  for (const char* p : {"sysfs", "procfs", "config", "tls-", "socket", "target"}) {
    if (absl::StrContains(name, p)) return true;
  }
  return false;
}

// Roff text: a leading dot or quote would be a request; backslashes and dashes escaped.
std::string Roff(const std::string& s) {
  std::string out = absl::StrReplaceAll(s, {{"\\", "\\e"}, {"-", "\\-"}});
  if (!out.empty() && (out[0] == '.' || out[0] == '\'')) out = "\\&" + out;
  return out;
}

std::vector<std::string> GlobalOptionNames() {
  std::vector<std::string> out(std::begin(kGlobalValueOptions), std::end(kGlobalValueOptions));
  out.insert(out.end(), std::begin(kGlobalFlags), std::end(kGlobalFlags));
  return out;
}

}  // namespace

std::string BashCompletion(const CLI::App& app) {
  std::vector<std::string> subs, paths;
  std::string cases;
  for (const CLI::App* sub : Visible(app)) {
    subs.push_back(sub->get_name());
    std::vector<std::string> opts;
    for (const CLI::Option* o : LongOptions(*sub)) {
      const std::string name = "--" + o->get_lnames()[0];
      opts.push_back(name);
      if (o->get_expected_min() > 0 && TakesPath(name)) paths.push_back(name);
    }
    absl::StrAppend(&cases, "    ", sub->get_name(), ") opts=\"", absl::StrJoin(opts, " "),
                    "\" ;;\n");
  }
  std::sort(paths.begin(), paths.end());
  paths.erase(std::unique(paths.begin(), paths.end()), paths.end());
  return absl::StrCat(
      "# bash completion for fabricctl ", kFabricVersion,
      " (generated: fabricctl completion bash)\n"
      "_fabricctl() {\n"
      "  local cur=\"${COMP_WORDS[COMP_CWORD]}\" prev=\"${COMP_WORDS[COMP_CWORD-1]}\"\n"
      "  local sub=\"\" opts=\"\" i\n"
      "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
      "    case \"${COMP_WORDS[i]}\" in -*) ;; *) sub=\"${COMP_WORDS[i]}\"; break ;; esac\n"
      "  done\n"
      "  case \"$prev\" in\n"
      "    ",
      absl::StrJoin(paths, "|"),
      ") COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n"
      "  esac\n"
      "  case \"$sub\" in\n"
      "    \"\") opts=\"",
      absl::StrJoin(subs, " "), " --help --version\" ;;\n", cases,
      "  esac\n"
      "  COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))\n"
      "}\n"
      "complete -F _fabricctl fabricctl\n");
}

std::string ZshCompletion(const CLI::App& app) {
  return absl::StrCat("#compdef fabricctl\n# zsh completion for fabricctl ", kFabricVersion,
                      " (generated: fabricctl completion zsh)\n"
                      "autoload -U +X bashcompinit && bashcompinit\n",
                      BashCompletion(app));
}

std::string ManPage(const CLI::App& app) {
  std::string out = absl::StrCat(
      ".TH FABRICCTL 1 \"\" \"fabricctl ", kFabricVersion,
      "\" \"User Commands\"\n"
      ".SH NAME\nfabricctl \\- ",
      Roff(absl::StartsWith(app.get_description(), "fabricctl: ") ? app.get_description().substr(11)
                                                                  : app.get_description()),
      "\n.SH SYNOPSIS\n.B fabricctl\n[\\fIGLOBAL OPTIONS\\fR] \\fICOMMAND\\fR "
      "[\\fIOPTIONS\\fR]\n"
      ".SH DESCRIPTION\nEach command asks the node's fabric\\-agent (\\fB\\-\\-target\\fR), or "
      "reads this host itself when \\fB\\-\\-sysfs\\fR or \\fB\\-\\-procfs\\fR is given. Global "
      "options (\\fB",
      Roff(absl::StrJoin(GlobalOptionNames(), ", ")),
      "\\fR) may come before or after the command. \\fB\\-\\-json\\fR prints the proto3 JSON "
      "mapping with the .proto field names, every scalar field, sorted map keys, and 64\\-bit "
      "integers as numbers when they fit 53 bits.\n"
      ".SH COMMANDS\n");
  for (const CLI::App* sub : Visible(app)) {
    absl::StrAppend(&out, ".SS ", Roff(sub->get_name()), "\n", Roff(sub->get_description()), "\n");
    for (const CLI::Option* o : LongOptions(*sub)) {
      absl::StrAppend(&out, ".TP\n\\fB\\-\\-", Roff(o->get_lnames()[0]), "\\fR",
                      o->get_expected_min() > 0 ? " \\fIVALUE\\fR" : "", "\n",
                      Roff(o->get_description()), "\n");
    }
  }
  absl::StrAppend(
      &out,
      ".SH EXIT STATUS\n.TP\n0\nsuccess\n.TP\n1\nthe host lacks what was asked (no RDMA device, an "
      "unknown GPU, no usable port, no GPU set that fits)\n.TP\n2\nusage or bad input\n.TP\n3\nthe "
      "host cannot be read (the sysfs root is missing, the agent is not running)\n.PP\n"
      "\\fBhealth\\fR follows the monitoring\\-plugin convention instead: 0 OK, 1 WARNING, "
      "2 CRITICAL, 3 UNKNOWN.\n"
      ".SH ENVIRONMENT\n.TP\n",
      kTargetEnv,
      "\nthe default \\fB\\-\\-target\\fR (a flag wins over it)\n"
      ".SH SEE ALSO\nfabric\\-agent(8), fabric\\-probe(1), ibv_devinfo(1), nvidia\\-smi(1)\n");
  return out;
}

Command AddCompletion(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "completion", "print the bash or zsh completion script, or the man page (man)");
  auto shell = std::make_shared<std::string>();
  cmd->add_option("shell", *shell, "bash, zsh or man")
      ->required()
      ->check(CLI::IsMember({"bash", "zsh", "man"}));
  return {cmd, [&app, shell]() -> Outcome {
            Print(*shell == "bash"  ? BashCompletion(app)
                  : *shell == "zsh" ? ZshCompletion(app)
                                    : ManPage(app));
            return {};
          }};
}

}  // namespace fabric::ctl
