// Man pages and bash/zsh completion scripts for every binary, from one description of each, so
// the four binaries' pages share one roff writer and their scripts one shape. Pure and free of
// CLI11 (fabric-cni compiles it in); cli_docs_cli11.h fills these from a CLI11 command tree.
//
// Binaries print them with `PROGRAM --generate=bash|zsh|man` (fabricctl: `completion
// bash|zsh|man`); the build runs that and `cmake --install` installs the results.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fabric::docs {

// One tagged paragraph (.TP): an option, a variable, a file or a code, and what it means.
// `term` is set in bold, `arg` (an option's value, a positional's name) in italics.
struct Item {
  std::string term;
  std::string arg;
  std::string text;
};

// A section (.SH) or, with `sub`, a subsection (.SS) of the one before it. Paragraphs are plain
// text (escaped here); items follow them.
struct Section {
  std::string title;
  std::vector<std::string> paragraphs;
  std::vector<Item> items;
  bool sub = false;
};

struct Page {
  std::string name;      // "fabric-agent"
  int section = 1;       // 1: user commands; 8: daemons and what the system runs (Debian's choice)
  std::string summary;   // the NAME line after "name \-"
  std::string synopsis;  // after the name: "[OPTIONS] TEST [HOST]"
  std::vector<std::string> description;
  std::vector<Section> sections;      // OPTIONS, EXIT STATUS, ENVIRONMENT, FILES ... in order
  std::vector<std::string> see_also;  // "fabricctl(1)"
};

// man(7) roff for `page`, with the project's version in the footer.
std::string ManPage(const Page& page);

// Plain text as roff: backslashes and dashes escaped, no line taken for a request.
std::string Roff(absl::string_view text);

struct Completion {
  std::string program;
  // Offered for the first word: subcommands, top-level options, positional values.
  std::vector<std::string> words;
  // Each subcommand with its options; empty for a program without subcommands.
  std::vector<std::pair<std::string, std::vector<std::string>>> subcommands;
  // After these the next word is a file name.
  std::vector<std::string> path_options;
  // Options before the subcommand whose value may be the next word ("--target /x health").
  std::vector<std::string> value_options;
};

// A bash completion script defining _PROGRAM (dashes as underscores) and `complete` for it.
std::string BashCompletion(const Completion& c);
// The same for zsh, through its bashcompinit; starts with #compdef.
std::string ZshCompletion(const Completion& c);
// Whether an option's value is a file or directory (by its name: --sysfs, --tls-ca, --*-file).
bool TakesPath(absl::string_view option);

// The KIND of a command line that is exactly `PROGRAM --generate=KIND`; nullopt otherwise (a
// hidden option: checked before the real parse, whose required arguments it would lack).
std::optional<std::string> GenerateKind(const std::vector<std::string>& args);
// The bash or zsh script or the man page; InvalidArgument for another kind.
absl::StatusOr<std::string> Generate(absl::string_view kind, const Page& page,
                                     const Completion& completion);
// Generate's text on stdout, returning 0; or its error on stderr, returning 2 (a usage error).
int PrintGenerated(absl::string_view kind, const Page& page, const Completion& completion);

}  // namespace fabric::docs
