// Caller input quoted in an error message: printable, and short however long the input was (a
// 4 MB echo turns a client's real error into its own "message too large"). And outside text for
// a terminal (TerminalText): printable, escaped the same way.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>

namespace fabric {

// The escape both forms below share: bytes outside printable ASCII as \n, \t or \xNN (so no
// escape sequence, carriage return or C1 control reaches a terminal); with `quoted`, '"' and '\\'
// too.
inline void AppendEscaped(std::string_view s, bool quoted, std::string* out) {
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (quoted && (u == '"' || u == '\\')) {
      *out += '\\';
      *out += static_cast<char>(u);
    } else if (u == '\n') {
      *out += "\\n";
    } else if (u == '\t') {
      *out += "\\t";
    } else if (u < 0x20 || u >= 0x7f) {
      char hex[5];
      std::snprintf(hex, sizeof(hex), "\\x%02x", u);
      *out += hex;
    } else {
      *out += static_cast<char>(u);
    }
  }
}

// `s` double-quoted with '"', '\\' and bytes outside printable ASCII escaped (\n, \t, \xNN); when
// `s` is longer than `max` bytes only its first `max` are shown, followed by "... (N bytes)".
// Excerpt("eth0") is "\"eth0\"", Excerpt("fa0\0x") is "\"fa0\\x00x\"".
inline std::string Excerpt(std::string_view s, size_t max = 64) {
  std::string out = "\"";
  AppendEscaped(s.substr(0, s.size() > max ? max : s.size()), /*quoted=*/true, &out);
  out += '"';
  if (s.size() > max) out += "... (" + std::to_string(s.size()) + " bytes)";
  return out;
}

// Text from outside (a variable's value, a file's bytes, a peer's name) as a terminal may show
// it: unquoted, whole, every byte outside printable ASCII escaped as Excerpt escapes it. For
// text output only: JSON escapes with its own rules.
inline std::string TerminalText(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  AppendEscaped(s, /*quoted=*/false, &out);
  return out;
}

}  // namespace fabric
