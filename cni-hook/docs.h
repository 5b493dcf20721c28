// fabric-cni(8) and its completion script (agent/common/cli_docs.h). The runtime runs the plugin
// without arguments; these are for an operator: `fabric-cni --generate=bash|zsh|man`,
// `--version`, `--help`.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "agent/common/cli_docs.h"

namespace fabric::cni {

// A network-config key ParseConfig reads (dotted for nested objects), its default and meaning:
// the page's NETWORK CONFIGURATION, and cni_test checks that each is really read.
struct ConfigKey {
  const char* key;
  const char* default_value;
  const char* text;
};
std::span<const ConfigKey> ConfigKeys();

docs::Page ManPage();
docs::Completion CompletionWords();

// The command line when there is one (args[0] is the program): prints the page, the script, the
// version or the help and returns 0; anything else is a usage error, 2.
int RunCommandLine(const std::vector<std::string>& args);

}  // namespace fabric::cni
