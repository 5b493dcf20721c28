// How fabric-probe prints a result: a perftest-like table, or one JSON object per line.
#pragma once

#include <string>

#include "agent/fabric/probes/params.h"

namespace fabric::probes {

// The header block and the figures, as perftest lays them out.
std::string FormatTable(const ProbeResult& r);
// One line: {"test", "device", "bytes", "iterations", "transport", then bw_peak_gbps,
// bw_avg_gbps, msg_rate_mpps for bandwidth tests or t_min_us, t_max_us, t_typical_us, t_avg_us,
// t_stdev_us, p99_us, p999_us for latency tests, and "clock"}. Keys that do not apply are left
// out (no device over TCP, no peak over TCP).
std::string FormatJson(const ProbeResult& r);

}  // namespace fabric::probes
