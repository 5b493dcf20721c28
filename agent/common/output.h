// The one writer of the front ends' answers (fabricctl, fabric-env, fabric-probe): the bytes as
// they are (NULs too, which printf would cut), flushed at once, so that nothing is lost to an
// exec that follows or interleaved out of order with the other stream.
#pragma once

#include <cstdio>
#include <string_view>

namespace fabric {

inline void Write(std::string_view s, std::FILE* to = stdout) {
  std::fwrite(s.data(), 1, s.size(), to);
  std::fflush(to);
}

}  // namespace fabric
