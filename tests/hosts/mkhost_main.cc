// fabric-mkhost: writes an example host's sysfs and procfs tree, for trying the agent by hand
// (fabricctl --sysfs=DIR/sys --procfs=DIR/proc) and for benchmarks.
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"
#include "tests/hosts/hosts.h"

namespace {

constexpr char kUsage[] =
    "usage: fabric-mkhost NAME DIR          write example host NAME into DIR (new or empty)\n"
    "       fabric-mkhost large DIR [PFS VFS GIDS]\n"
    "                                       write LargeHost(PFS, VFS, GIDS), default 32 7 256\n"
    "       fabric-mkhost --list            print the example host names\n";

int Usage(const std::string& why) {
  if (!why.empty()) std::fprintf(stderr, "fabric-mkhost: %s\n", why.c_str());
  std::fputs(kUsage, stderr);
  return 2;
}

bool ParseCount(const std::string& s, int lo, int hi, int* out) {
  return absl::SimpleAtoi(absl::string_view(s), out) && *out >= lo && *out <= hi;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 1 && (args[0] == "--help" || args[0] == "-h")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (args.size() == 1 && args[0] == "--list") {
    for (const std::string& name : fabric::testing::ExampleHostNames()) {
      std::printf("%s\n", name.c_str());
    }
    return 0;
  }
  if (args.size() < 2) return Usage(args.empty() ? "missing arguments" : "missing DIR");
  const std::string& name = args[0];
  const std::string& dir = args[1];
  absl::Status status;
  if (name == "large") {
    int pfs = 32;
    int vfs = 7;
    int gids = 256;
    if (args.size() != 2 && args.size() != 5) {
      return Usage("large takes DIR and optionally all three of PFS VFS GIDS");
    }
    if (args.size() == 5 &&
        (!ParseCount(args[2], 1, 2048, &pfs) || !ParseCount(args[3], 0, 252, &vfs) ||
         !ParseCount(args[4], 1, 4096, &gids))) {
      return Usage("PFS must be 1-2048, VFS 0-252, GIDS 1-4096");
    }
    status = fabric::testing::WriteHost(fabric::testing::LargeHost(pfs, vfs, gids), dir);
  } else {
    if (args.size() != 2) return Usage("too many arguments");
    absl::StatusOr<fabric::testing::HostSpec> spec = fabric::testing::ExampleHost(name);
    if (!spec.ok()) {
      return Usage(std::string(spec.status().message()) + " (see fabric-mkhost --list)");
    }
    status = fabric::testing::WriteHost(*spec, dir);
  }
  if (!status.ok()) {
    std::fprintf(stderr, "fabric-mkhost: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
