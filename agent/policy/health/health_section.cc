#include "agent/policy/health/health_section.h"

#include <cmath>
#include <string>
#include <string_view>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/policy/health/counter_rules.h"

namespace fabric {
namespace {

constexpr double kMaxWindowS = 30 * 24 * 3600;

// 0 (unset: the default) or a finite number in [lo, hi].
absl::Status CheckSeconds(std::string_view field, double v, double lo, double hi) {
  if (v == 0) return absl::OkStatus();
  if (!std::isfinite(v) || v < lo || v > hi) {
    return absl::InvalidArgumentError(
        absl::StrFormat("health.%s: %g is not between %g and %g seconds", field, v, lo, hi));
  }
  return absl::OkStatus();
}

bool NameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
}

// An RDMA device name ("mlx5_0", "rxe0", "bnxt_re3") with an optional ":port".
bool PortSpec(std::string_view s) {
  const size_t colon = s.find(':');
  const std::string_view dev = s.substr(0, colon);
  if (dev.empty() || dev.size() > 64) return false;
  for (char c : dev) {
    if (!NameChar(c) || c == '.') return false;
  }
  if (colon == std::string_view::npos) return true;
  const std::string_view port = s.substr(colon + 1);
  if (port.empty() || port.size() > 3) return false;
  for (char c : port) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// "<check>.<cause>[.<more>]": lower case, digits, '_', '.'.
bool Code(std::string_view s) {
  if (s.empty() || s.size() > 128 || s.find('.') == std::string_view::npos) return false;
  for (char c : s) {
    if (!NameChar(c) || c == '-') return false;
  }
  return s.front() != '.' && s.back() != '.';
}

}  // namespace

absl::Status ValidateHealthConfig(const v1::HealthConfig& c) {
  for (const auto& [field, v, lo, hi] :
       {std::tuple<const char*, double, double, double>{"pollIntervalS", c.poll_interval_s(), 0.1,
                                                        3600},
        {"stickyS", c.sticky_s(), 1, kMaxWindowS},
        {"flapWindowS", c.flap_window_s(), 1, kMaxWindowS},
        {"escalateWindowS", c.escalate_window_s(), 1, kMaxWindowS},
        {"accessBackoffS", c.access_backoff_s(), 1, kMaxWindowS}}) {
    if (absl::Status s = CheckSeconds(field, v, lo, hi); !s.ok()) return s;
  }
  if (c.missing_polls() > 1000 || c.flap_max() > 100000 || c.escalate_after() > 100000) {
    return absl::InvalidArgumentError(
        "health: missingPolls is at most 1000, flapMax and escalateAfter at most 100000");
  }
  if (absl::Status s = ValidateCounterRules(c); !s.ok()) return s;
  if (c.counter_exclude_size() > 4096 || c.dry_run_codes_size() > 1024 ||
      c.host_classes_size() > 64) {
    return absl::InvalidArgumentError(
        "health: at most 4096 counterExclude entries, 1024 dryRunCodes, 64 hostClasses");
  }
  for (const std::string& p : c.counter_exclude()) {
    if (!PortSpec(p)) {
      return absl::InvalidArgumentError(absl::StrCat("health.counterExclude: \"", p.substr(0, 80),
                                                     "\" is not a device or device:port"));
    }
  }
  for (const std::string& code : c.dry_run_codes()) {
    if (!Code(code)) {
      return absl::InvalidArgumentError(
          absl::StrCat("health.dryRunCodes: \"", code.substr(0, 80),
                       "\" is not a finding code (<check>.<cause>, e.g. counter.symbol_error)"));
    }
  }
  for (const v1::HostClass& k : c.host_classes()) {
    const std::string at = absl::StrCat("health.hostClasses[\"", k.name().substr(0, 40), "\"]");
    if (k.name().empty() || k.name().size() > 64) {
      return absl::InvalidArgumentError("health.hostClasses: a class needs a name (1-64)");
    }
    if (k.gpu_models().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(at, ": gpuModels is empty"));
    }
    for (const std::string& m : k.gpu_models()) {
      if (m.empty() || m.size() > 64) {
        return absl::InvalidArgumentError(absl::StrCat(at, ": a gpuModels entry is empty or long"));
      }
    }
    if (k.gpus() < 1 || k.gpus() > 64 || k.ports() < 1 || k.ports() > 64) {
      return absl::InvalidArgumentError(absl::StrCat(at, ": gpus and ports are 1 to 64"));
    }
    if (!std::isfinite(k.rate_gbps()) || k.rate_gbps() <= 0 || k.rate_gbps() > 100000) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: rateGbps %g is not a rate", at, k.rate_gbps()));
    }
  }
  return absl::OkStatus();
}

}  // namespace fabric
