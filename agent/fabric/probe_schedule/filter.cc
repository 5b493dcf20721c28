#include "agent/fabric/probe_schedule/filter.h"

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "agent/fabric/probe_schedule/probes_section.h"
#include "agent/fabric/probes/params.h"
#include "agent/fabric/probes/probe.h"  // kDefaultPort
#include "agent/fabric/probes/wire.h"

namespace fabric::probes {

absl::StatusOr<DevicePort> ParseDevicePort(absl::string_view text) {
  absl::string_view name = text;
  uint32_t port = 0;
  if (const size_t colon = text.rfind(':'); colon != absl::string_view::npos) {
    name = text.substr(0, colon);
    if (!absl::SimpleAtoi(text.substr(colon + 1), &port) || port < 1 || port > 254) {
      name = {};  // rejected below
    }
  }
  // "-" is the tables' mark for no device (a TCP probe), not a name.
  if (name == "-" || !wire::IsValidDeviceName(std::string_view(name.data(), name.size()))) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", absl::CHexEscape(text.substr(0, 64)),
                     "\" is not DEVICE or DEVICE:PORT (e.g. mlx5_1 or mlx5_1:1, port 1..254)"));
  }
  return DevicePort{std::string(name), port};
}

absl::StatusOr<v1::ListProbeResultsRequest> ParseResultFilter(absl::string_view peer,
                                                              absl::string_view device,
                                                              absl::string_view test) {
  v1::ListProbeResultsRequest req;
  if (!peer.empty()) {
    // Matched as given (the PEER column keeps the text configured or asked); checked only for
    // being a peer at all.
    if (absl::StatusOr<Peer> p =
            ParsePeer(std::string_view(peer.data(), peer.size()), kDefaultPort);
        !p.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--peer: ", p.status().message(), " (HOST or HOST:PORT, as PEER prints)"));
    }
    req.set_peer(std::string(peer));
  }
  if (!device.empty()) {
    auto parsed = ParseDevicePort(device);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--device: ", parsed.status().message(),
                       ", as the DEVICE column prints it; TCP results have no device"));
    }
    req.set_device(parsed->device);
    req.set_port(parsed->port);
  }
  if (!test.empty()) {
    if (!ParseTestName(std::string_view(test.data(), test.size()))) {
      return absl::InvalidArgumentError(
          absl::StrCat("--test: unknown test \"", test, "\" (", TestNamesText(), ")"));
    }
    req.set_test(std::string(test));
  }
  return req;
}

}  // namespace fabric::probes
