// fabric-cni: a chained CNI plugin (spec 0.4.0, 1.0.0, 1.1.0) that announces a new pod's
// addresses to the fabric before ADD returns. See README.md.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "cni-hook/docs.h"
#include "cni-hook/plugin.h"

extern char** environ;

int main(int argc, char** argv) {
  // The runtime passes none; an operator's --version, --help or --generate.
  if (argc > 1) return fabric::cni::RunCommandLine(std::vector<std::string>(argv, argv + argc));
  // The config is small; a bound keeps a runaway writer from exhausting memory. Reading one
  // buffer past the bound is enough for ParseConfig to name the reason.
  constexpr size_t kMaxStdin = fabric::cni::kMaxStdinBytes;
  std::string in;
  char buf[16384];
  for (;;) {
    const ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    in.append(buf, static_cast<size_t>(n));
    if (in.size() > kMaxStdin) break;
  }
  fabric::cni::EnvMap env;
  for (char** e = environ; *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq != nullptr && std::strncmp(*e, "CNI_", 4) == 0) {
      env.emplace(std::string(*e, static_cast<size_t>(eq - *e)), std::string(eq + 1));
    }
  }
  std::string out;
  const int rc = fabric::cni::RunPlugin(env, in, fabric::cni::PluginOptions{}, &out);
  if (!out.empty()) out += '\n';
  size_t off = 0;
  while (off < out.size()) {
    const ssize_t n = write(STDOUT_FILENO, out.data() + off, out.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return rc == 0 ? 5 : rc;
    off += static_cast<size_t>(n);
  }
  return rc;
}
