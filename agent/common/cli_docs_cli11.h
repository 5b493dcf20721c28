// cli_docs.h's items and completion words read from a CLI11 command tree, so pages and scripts
// list exactly the flags a binary takes. Options in the empty group (CLI11's hidden ones) and
// hidden subcommands are left out.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "agent/common/cli_docs.h"

namespace fabric::docs {

// The first line of `app`'s description without its "PROGRAM: " prefix or final period: the man
// page's NAME line.
std::string Summary(const CLI::App& app);
// `cmd`'s own options (not its subcommands'): positionals first, then "-d, --ib-dev TEXT" with
// the help text and the default where CLI11 captured one.
std::vector<Item> OptionItems(const CLI::App& cmd);
// The long names ("--json") of `cmd`'s own options.
std::vector<std::string> LongOptionNames(const CLI::App& cmd);
// The subcommands a user sees.
std::vector<const CLI::App*> VisibleSubcommands(const CLI::App& app);

// A page's start from the tree: NAME from Summary, then OPTIONS, or for a program with
// subcommands COMMANDS with a subsection (description and options) for each. The caller adds
// the DESCRIPTION paragraphs and the sections after.
Page PageOf(const CLI::App& app, std::string name, int section, std::string synopsis);

// Subcommands and each one's options; the first word offers the subcommands, `app`'s own
// options and `extra_words` (a positional's values). Path options: by TakesPath.
Completion CompletionOf(const CLI::App& app, std::string program,
                        std::vector<std::string> extra_words = {});

}  // namespace fabric::docs
