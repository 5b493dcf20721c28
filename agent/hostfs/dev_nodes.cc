#include "agent/hostfs/dev_nodes.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/common/errno.h"
#include "agent/common/natural_order.h"

namespace fabric {

absl::StatusOr<std::vector<NodeOpen>> OpenRdmaNodes(const std::string& dir, size_t limit) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    const int err = errno;
    const std::string what = absl::StrCat(dir, ": ", ErrnoText(err));
    if (err == ENOENT) return absl::NotFoundError(what);
    return absl::UnavailableError(what);
  }
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) {
    const absl::string_view name = e->d_name;
    if (absl::StartsWith(name, "uverbs") || name == "rdma_cm") names.emplace_back(name);
    if (names.size() >= limit) break;
  }
  closedir(d);
  std::sort(names.begin(), names.end(), NaturalLess);
  std::vector<NodeOpen> out;
  for (const std::string& name : names) {
    NodeOpen n;
    n.name = name;
    const std::string path = absl::StrCat(dir, "/", name);
    struct stat st;
    if (lstat(path.c_str(), &st) != 0) {
      n.error = errno;  // Gone since the listing.
    } else if (!S_ISCHR(st.st_mode)) {
      n.is_char = false;  // Never opened: a FIFO or a huge file would block or cost.
    } else {
      const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
      if (fd < 0) {
        n.error = errno;
      } else {
        close(fd);
      }
    }
    out.push_back(std::move(n));
  }
  return out;
}

}  // namespace fabric
