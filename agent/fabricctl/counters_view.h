// fabricctl counters: two readings of the port counters made into rates, and their table. Pure:
// table-driven tests in counters_view_test.cc.
#pragma once

#include <string>

#include "absl/time/time.h"
#include "fabric/v1/agent.pb.h"

namespace fabric::ctl {

// `second` with rates: per_second on every counter of a port both readings have, that did not go
// backwards, and that counts (hw_counters/ levels and settings get none: metrics::IsHwLevel,
// IsHwSetting); interval_seconds set. A counter that went backwards (reset, driver reload) gets
// no rate and a note. The seconds between the readings are their read_at difference, or
// `requested` when either has none or it is not positive.
v1::PortCountersResponse WithRates(const v1::PortCountersResponse& first,
                                   const v1::PortCountersResponse& second,
                                   absl::Duration requested);

// What `fabricctl counters` prints: a summary line, then per port a header (DEVICE:PORT, its
// netdev, rx and tx Gb/s when there are rates) and a COUNTER VALUE PER-SECOND table, counters/
// then hw_counters/ (the name says which), then the port's problems; the notes last. Without
// `all`, counters that are zero and did not change, and settings (lifespan), are left out (the
// header says how many).
std::string RenderCounters(const v1::PortCountersResponse& r, bool all);

// Gb/s of a port data counter's rate: port_rcv_data and port_xmit_data count 4-octet words (the
// IB PortRcvData/PortXmitData definition; mlx5 divides its RoCE byte counts by 4 into them).
double DataWordsToGbps(double words_per_second);

}  // namespace fabric::ctl
