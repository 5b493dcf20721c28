// Values written into files that shells `source` (the agent's env output, fabric-cni's env file).
#pragma once

#include <string>
#include <string_view>

namespace fabric {

// `v` as one shell word: unchanged when it holds only letters, digits and "_@%+=:,./-" (names,
// addresses, lists), otherwise single-quoted with each ' written as '\''. The empty value is ''.
std::string ShellQuote(std::string_view v);

// [A-Za-z_][A-Za-z0-9_]*: a name a POSIX shell can assign.
bool IsValidEnvName(std::string_view name);

}  // namespace fabric
