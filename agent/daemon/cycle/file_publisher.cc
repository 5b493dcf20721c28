#include "agent/daemon/cycle/file_publisher.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/common/log.h"

namespace fabric {

absl::Status FilePublisher::Sync(const Snapshot& s) {
  std::string policy = s.policy.SerializeAsString();
  // Snapshots that changed only the agent's findings share the host object: nothing to render.
  if (last_.ok() && host_ != nullptr && host_ == s.host && policy == policy_) {
    return absl::OkStatus();
  }
  ++renders_;
  const std::optional<std::string> text = render_(s);
  absl::StatusOr<bool> wrote = text ? file_.Write(*text) : file_.Remove();
  const bool was_failing = !last_.ok();
  last_ = wrote.status();
  if (!wrote.ok()) {
    host_.reset();
    Log(was_failing ? LogLevel::kDebug : LogLevel::kWarning, what_, " ", path(),
        " not written (the previous one stays): ", wrote.status().message());
    return last_;
  }
  if (was_failing) Log(LogLevel::kInfo, what_, " ", path(), " written again");
  if (*wrote) {
    ++writes_;
    Log(LogLevel::kDebug, what_, text ? " written: " : " removed: ", path());
  }
  host_ = s.host;
  policy_ = std::move(policy);
  return absl::OkStatus();
}

void FilePublisher::Publish(const Publication& p) { (void)Sync(p.snapshot); }

void FilePublisher::Retry(const Snapshot& current, absl::Time /*now*/) {
  if (!last_.ok()) (void)Sync(current);
}

void FilePublisher::Findings(absl::Time /*now*/, std::vector<v1::Finding>* out) const {
  if (last_.ok()) return;
  v1::Finding f;
  f.set_severity(v1::SEVERITY_WARNING);
  f.set_check(check_);
  f.set_message(
      absl::StrCat(what_, " ", path(), " not written (", last_.message(), "); ", consequence_));
  out->push_back(std::move(f));
}

}  // namespace fabric
