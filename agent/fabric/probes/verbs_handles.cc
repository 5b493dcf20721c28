#include "agent/fabric/probes/verbs_handles.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/common/errno.h"
#include "agent/common/log.h"

namespace fabric::probes {

ReleaseErrors::~ReleaseErrors() {
  if (absl::Status s = Take(); !s.ok()) {
    Log(LogLevel::kWarning, "releasing RDMA resources: ", s.message());
  }
}

void ReleaseErrors::Add(const char* what, int err) {
  if (err != 0) failed_.push_back(absl::StrCat(what, ": ", ErrnoText(err)));
}

absl::Status ReleaseErrors::Take() {
  if (failed_.empty()) return absl::OkStatus();
  absl::Status s = absl::InternalError(absl::StrJoin(failed_, "; "));
  failed_.clear();
  return s;
}

}  // namespace fabric::probes
