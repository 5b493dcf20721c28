// A path given on a command line means what the shell means by it: relative to the working
// directory. Readers below a root (HostFsImpl("/")) take "host.pb" as "/host.pb", so a user's
// path is made absolute once, here, before it reaches one.
#pragma once

#include <unistd.h>

#include <string>

namespace fabric {

// `path` unchanged when absolute (or empty, or the working directory is unknown), else the
// working directory joined with it.
inline std::string FromWorkingDir(const std::string& path) {
  if (path.empty() || path.front() == '/') return path;
  char buf[4096];
  if (::getcwd(buf, sizeof(buf)) == nullptr) return path;
  std::string out(buf);
  if (out.back() != '/') out += '/';
  return out + path;
}

}  // namespace fabric
