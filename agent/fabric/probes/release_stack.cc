#include "agent/fabric/probes/release_stack.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/common/log.h"

namespace fabric::probes {

ReleaseStack::~ReleaseStack() {
  if (steps_.empty()) return;
  if (absl::Status s = Release(); !s.ok()) {
    Log(LogLevel::kWarning, "releasing RDMA resources: ", s.message());
  }
}

absl::Status ReleaseStack::Release() {
  std::vector<std::string> failed;
  while (!steps_.empty()) {
    auto [what, undo] = std::move(steps_.back());
    steps_.pop_back();
    errno = 0;
    int rc = undo();
    if (rc < 0) rc = errno != 0 ? errno : EIO;
    if (rc != 0) failed.push_back(absl::StrCat(what, ": ", std::strerror(rc)));
  }
  if (failed.empty()) return absl::OkStatus();
  return absl::InternalError(absl::StrJoin(failed, "; "));
}

}  // namespace fabric::probes
