#include "agent/fabricctl/completion.h"

#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/common/cli_docs.h"
#include "agent/common/cli_docs_cli11.h"
#include "agent/common/output.h"
#include "agent/fabricctl/args.h"
#include "agent/fabricctl/ctl.h"

namespace fabric::ctl {
namespace {

docs::Page Page(const CLI::App& app) {
  docs::Page p = docs::PageOf(app, "fabricctl", 1, "[GLOBAL OPTIONS] COMMAND [OPTIONS]");
  p.description = {
      absl::StrCat("Each command asks the node's fabric-agent (--target), or reads this host "
                   "itself when --sysfs or --procfs is given. Global options (",
                   absl::StrJoin(GlobalOptionNames(), ", "),
                   ") may come before or after the command."),
      "--json prints the proto3 JSON mapping with the .proto field names, every scalar field, "
      "sorted map keys, and 64-bit integers as numbers when they fit 53 bits."};
  p.sections.push_back(
      {"EXIT STATUS",
       {"health follows the monitoring-plugin convention instead: 0 OK, 1 WARNING, 2 CRITICAL, "
        "3 UNKNOWN (a usage error too). The other commands:"},
       {{"0", "", "success"},
        {"1", "",
         "the host lacks what was asked (no RDMA device, an unknown GPU, no usable port, no GPU "
         "set that fits)"},
        {"2", "", "usage or bad input"},
        {"3", "",
         "the host cannot be read (the sysfs root is missing, the agent is not running)"}}});
  p.sections.push_back(
      {"ENVIRONMENT", {}, {{kTargetEnv, "", "the default --target (a flag wins over it)"}}});
  p.see_also = {"fabric-agent(8)", "fabric-probe(1)", "fabric-cni(8)", "ibv_devinfo(1)",
                "nvidia-smi(1)"};
  return p;
}

docs::Completion Completion(const CLI::App& app) {
  docs::Completion c = docs::CompletionOf(app, "fabricctl", GlobalOptionNames());
  c.value_options.assign(std::begin(kGlobalValueOptions), std::end(kGlobalValueOptions));
  return c;
}

}  // namespace

Command AddCompletion(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "completion", "print the bash or zsh completion script, or the man page (man)");
  auto shell = std::make_shared<std::string>();
  cmd->add_option("shell", *shell, "bash, zsh or man")
      ->required()
      ->check(CLI::IsMember({"bash", "zsh", "man"}));
  return {cmd, [&app, shell]() -> Outcome {
            auto text = docs::Generate(*shell, Page(app), Completion(app));
            if (!text.ok()) return text.status();
            Write(*text);
            return {};
          }};
}

}  // namespace fabric::ctl
