// fabricctl probes' filters, spelled as its table prints the columns they filter, so that a
// value copied from the table finds its rows and a typo is a usage error instead of "no results".
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fabric/v1/agent.pb.h"

namespace fabric::probes {

// An RDMA port as the tables print it: "mlx5_1" (port 0: every port) or "mlx5_1:1" (port
// 1..254). InvalidArgument quoting the text otherwise (fabricctl probes and counters --device).
struct DevicePort {
  std::string device;
  uint32_t port = 0;
};
absl::StatusOr<DevicePort> ParseDevicePort(absl::string_view text);

// PEER as configured or asked ("10.0.0.2", "node-b:18515"), DEVICE as NAME or NAME:PORT
// ("mlx5_1:1"), TEST one of TestNames(); empty: no filter. InvalidArgument starting with the
// flag ("--test: ...") and naming what it accepts. Limit is the caller's.
absl::StatusOr<v1::ListProbeResultsRequest> ParseResultFilter(absl::string_view peer,
                                                              absl::string_view device,
                                                              absl::string_view test);

}  // namespace fabric::probes
