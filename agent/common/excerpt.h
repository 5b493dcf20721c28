// Caller input quoted in an error message: printable, and short however long the input was (a
// 4 MB echo turns a client's real error into its own "message too large").
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>

namespace fabric {

// `s` double-quoted with '"', '\\' and bytes outside printable ASCII escaped (\n, \t, \xNN); when
// `s` is longer than `max` bytes only its first `max` are shown, followed by "... (N bytes)".
// Excerpt("eth0") is "\"eth0\"", Excerpt("fa0\0x") is "\"fa0\\x00x\"".
inline std::string Excerpt(std::string_view s, size_t max = 64) {
  std::string out = "\"";
  const size_t shown = s.size() > max ? max : s.size();
  for (size_t i = 0; i < shown; ++i) {
    const auto u = static_cast<unsigned char>(s[i]);
    if (u == '"' || u == '\\') {
      out += '\\';
      out += static_cast<char>(u);
    } else if (u == '\n') {
      out += "\\n";
    } else if (u == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u >= 0x7f) {
      char hex[5];
      std::snprintf(hex, sizeof(hex), "\\x%02x", u);
      out += hex;
    } else {
      out += static_cast<char>(u);
    }
  }
  out += '"';
  if (shown < s.size()) out += "... (" + std::to_string(s.size()) + " bytes)";
  return out;
}

}  // namespace fabric
