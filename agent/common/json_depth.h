// How deep JSON arrays and objects nest, strings skipped, without parsing. nlohmann parses deep
// input fine but copies, dumps and destroys it recursively: callers bound the depth of outside
// bytes first so no input can exhaust the stack.
#pragma once

#include <algorithm>
#include <string_view>

namespace fabric {

inline int JsonNestingDepth(std::string_view s) {
  int depth = 0, max_depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char ch = s[i];
    if (in_string) {
      if (ch == '\\') {
        ++i;
      } else if (ch == '"') {
        in_string = false;
      }
    } else if (ch == '"') {
      in_string = true;
    } else if (ch == '[' || ch == '{') {
      max_depth = std::max(max_depth, ++depth);
    } else if (ch == ']' || ch == '}') {
      --depth;
    }
  }
  return max_depth;
}

}  // namespace fabric
