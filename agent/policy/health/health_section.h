// The `health` config section (v1::HealthConfig): its checks. The counter rules' own checks are
// counter_rules.h's; the host classes' defaults are health.h's.
#pragma once

#include "absl/status/status.h"
#include "fabric/v1/health.pb.h"

namespace fabric {

// Every field in range: intervals and windows finite and positive where set (poll 0.1 s to 1 h,
// windows up to 30 days), the counter rules, the exclude list ("mlx5_0" or "mlx5_0:1"), the
// dry-run codes ("<check>.<cause>..."), the host classes (a name, at least one model, gpus and
// ports 1-64, a rate). The message names the field.
absl::Status ValidateHealthConfig(const v1::HealthConfig& config);

}  // namespace fabric
