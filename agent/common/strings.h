// Small text helpers. Debian 12's abseil is built with its own absl::string_view
// (ABSL_OPTION_USE_STD_STRING_VIEW=0), which does not convert to or from std::string_view. Our APIs
// take std::string_view; Av and Sv convert at the boundary to absl.
#pragma once

#include <string_view>

#include "absl/strings/string_view.h"

namespace fabric {

inline absl::string_view Av(std::string_view s) { return absl::string_view(s.data(), s.size()); }
inline std::string_view Sv(absl::string_view s) { return std::string_view(s.data(), s.size()); }

// The value of one hex digit (either case); -1 for any other byte.
inline int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace fabric
