#include "agent/common/shell.h"

#include <algorithm>

namespace fabric {
namespace {

bool ShellSafe(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
         std::string_view("_@%+=:,./-").find(c) != std::string_view::npos;
}

}  // namespace

std::string ShellQuote(std::string_view v) {
  if (!v.empty() && std::all_of(v.begin(), v.end(), ShellSafe)) return std::string(v);
  std::string out = "'";
  for (char c : v) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  out += "'";
  return out;
}

bool IsValidEnvName(std::string_view name) {
  if (name.empty()) return false;
  auto alpha = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; };
  if (!alpha(name[0])) return false;
  return std::all_of(name.begin() + 1, name.end(),
                     [&](char c) { return alpha(c) || (c >= '0' && c <= '9'); });
}

}  // namespace fabric
