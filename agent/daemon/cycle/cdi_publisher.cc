#include "agent/daemon/cycle/cdi_publisher.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/common/log.h"

namespace fabric {

absl::Status CdiPublisher::Sync(const Snapshot& s) {
  std::string policy = s.policy.SerializeAsString();
  // Snapshots that changed only the agent's findings share the host object: nothing to render.
  if (last_.ok() && host_ != nullptr && host_ == s.host && policy == policy_) {
    return absl::OkStatus();
  }
  ++renders_;
  absl::StatusOr<std::string> spec = cdi::SpecJson(*s.host, s.policy, opt_);
  // No device to name (a spec must have one): a spec left from before would name gone ones.
  absl::StatusOr<bool> wrote = spec.ok() ? writer_.Write(*spec) : writer_.Remove();
  const bool was_failing = !last_.ok();
  last_ = wrote.status();
  if (!wrote.ok()) {
    host_.reset();
    Log(was_failing ? LogLevel::kDebug : LogLevel::kWarning, "CDI spec ", writer_.path(),
        " not written (the previous one stays): ", wrote.status().message());
    return last_;
  }
  if (was_failing) Log(LogLevel::kInfo, "CDI spec ", writer_.path(), " written again");
  if (*wrote) {
    ++writes_;
    Log(LogLevel::kDebug, spec.ok() ? "CDI spec written: " : "CDI spec removed: ", writer_.path());
  }
  host_ = s.host;
  policy_ = std::move(policy);
  return absl::OkStatus();
}

void CdiPublisher::Publish(const Publication& p) { (void)Sync(p.snapshot); }

void CdiPublisher::Retry(const Snapshot& current, absl::Time /*now*/) {
  if (!last_.ok()) (void)Sync(current);
}

void CdiPublisher::Findings(absl::Time /*now*/, std::vector<v1::Finding>* out) const {
  if (last_.ok()) return;
  v1::Finding f;
  f.set_severity(v1::SEVERITY_WARNING);
  f.set_check("cdi");
  f.set_message(absl::StrCat("CDI spec ", writer_.path(), " not written (", last_.message(),
                             "); containers get the previous spec's devices"));
  out->push_back(std::move(f));
}

}  // namespace fabric
