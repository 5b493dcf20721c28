#include "agent/daemon/cycle/nfd_publisher.h"

#include <utility>

#include "agent/common/log.h"
#include "agent/publish/nfd/nfd.h"

namespace fabric {
namespace {

// The label's verdict: a host with no finding at all is OK, not unjudged.
v1::Severity Verdict(const Snapshot& s) {
  return s.health.verdict() == v1::SEVERITY_UNSPECIFIED ? v1::SEVERITY_OK : s.health.verdict();
}

}  // namespace

absl::Status NfdPublisher::Write(const Snapshot& s) {
  std::string features = RenderNfdFeatures(*s.host, s.policy, Verdict(s));
  if (features == written_) return absl::OkStatus();
  auto wrote = WriteNfdFeatures(dir_, features);
  if (!wrote.ok()) {
    written_.clear();  // Rendered and written again at the next publish.
    return wrote.status();
  }
  written_ = std::move(features);
  written_health_ = Verdict(s);
  return absl::OkStatus();
}

void NfdPublisher::Publish(const Publication& p) {
  if (p.built.labels_same && !written_.empty() && Verdict(p.snapshot) == written_health_) return;
  if (absl::Status s = Write(p.snapshot); !s.ok()) {
    Log(LogLevel::kWarning, "NFD feature file: ", s.message());
  }
}

}  // namespace fabric
