// libFuzzer target for the agent's --probe-perftest line (an operator's bytes, through CLI11):
// nothing may crash or hang; a line the parser accepts gives parameters the engine accepts, and
// the same line parses the same way again (no state kept between lines).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "agent/fabric/probe_cli/cli.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fabric::probes;  // NOLINT
  if (size > 4096) return 0;       // a command line, not a file
  const std::string_view line(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<PerftestServerOptions> o = ParsePerftestResponder(line);
  absl::StatusOr<PerftestServerOptions> again = ParsePerftestResponder(line);
  if (o.ok() != again.ok()) std::abort();
  if (!o.ok()) {
    if (o.status().code() != absl::StatusCode::kInvalidArgument) std::abort();
    if (o.status().message() != again.status().message()) std::abort();
    return 0;
  }
  if (!ValidateParams(o->params).ok()) std::abort();
  if (o->port != again->port || o->local.device != again->local.device) std::abort();
  return 0;
}
