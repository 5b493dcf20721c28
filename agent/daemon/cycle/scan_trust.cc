#include "agent/daemon/cycle/scan_trust.h"

#include <algorithm>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/inventory/discovery/discovery.h"

namespace fabric {

ScanTrust JudgeScan(const v1::Host& published, const v1::Host& scan) {
  std::set<std::pair<std::string, std::string>> known;  // {field, path}
  ForEachProblem(published, [&](const std::string&, const v1::FieldProblem& p) {
    known.emplace(p.field(), p.path());
  });
  ScanTrust out;
  ForEachProblem(scan, [&](const std::string&, const v1::FieldProblem& p) {
    if (p.transient() && known.count({p.field(), p.path()}) == 0) out.new_transient.push_back(p);
  });
  out.trusted = out.new_transient.empty();
  return out;
}

absl::Duration StaleRetryDelay(int retry, absl::Duration rescan_interval) {
  absl::Duration d = kStaleRetryFirst;
  for (int i = 1; i < retry && d < kStaleRetryMax; ++i) d *= 2;
  return std::min({d, kStaleRetryMax, rescan_interval});
}

v1::Finding StaleFinding(absl::Time since, const ScanTrust& why) {
  v1::Finding f;
  f.set_severity(v1::SEVERITY_WARNING);
  f.set_check("inventory_stale");
  std::string first = "a read failed";
  if (!why.new_transient.empty()) {
    const v1::FieldProblem& p = why.new_transient.front();
    first = absl::StrCat(p.path(), ": ", p.reason());
  }
  f.set_message(absl::StrCat(
      "inventory stale since ", absl::FormatTime(absl::RFC3339_sec, since, absl::UTCTimeZone()),
      ": ", first, " (", why.new_transient.size(), " failed read",
      why.new_transient.size() == 1 ? "" : "s", "); serving the last good inventory"));
  return f;
}

}  // namespace fabric
