// Probe results between the engine's form (params.h ProbeResult) and the API's message
// (fabric.v1.ProbeResult), both ways.
#pragma once

#include "absl/status/status.h"
#include "agent/fabric/probes/params.h"
#include "fabric/v1/probe.pb.h"

namespace fabric::probes {

// The result message of a finished test (ok) ...
v1::ProbeResult ResultProto(const ProbeResult& r);
// ... or of a failed one.
v1::ProbeResult FailedResultProto(const ProbeParams& p, const absl::Status& error);
// Back to the engine's form, for the perftest-like table and JSON lines (fabricctl).
ProbeResult ResultFromProto(const v1::ProbeResult& r);

}  // namespace fabric::probes
