// fabric-probe's command line, parsed apart from main() so tests can check every rejection.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/fabric/perftest/output.h"
#include "agent/fabric/perftest/peer.h"
#include "agent/fabric/probes/probe.h"

namespace fabric::probes {

// Exit codes: 0 the test ran (server: every test served ran), 1 runtime failure (device
// missing, peer unreachable or gone, time-out, the peer refused), 2 usage error.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

struct CliConfig {
  bool server = false;   // no HOST
  bool forever = false;  // server: keep serving
  bool json = false;
  bool perftest = false;  // stock perftest's protocol (agent/fabric/perftest/peer.h)
  bool gbits = false;     // --report_gbits
  // --transport as given: rdma, tcp or auto (ChooseTransport decides the client's).
  std::string transport = "auto";
  bool device_given = false;
  ProbeSpec client;  // params, host, port, local
  ServerOptions server_options;
  PerftestServerOptions perftest_options;             // --perftest, either side
  perftest::Output output = perftest::Output::kFull;  // --output
  std::string out_json_file;                          // --out_json: also write this file
};

struct CliParse {
  // Set when the program should exit now (help, version, usage error) with `exit_code`,
  // printing `output` (stdout for help, stderr for errors).
  bool exit = false;
  int exit_code = kExitOk;
  std::string output;
  CliConfig config;
};

CliParse ParseCli(const std::vector<std::string>& args);  // args[0] is the program name

// One --probe-perftest value of the agent: what fabric-probe's server of a stock perftest client
// is given, without the program name and --perftest ("write_bw -p 18516 -d mlx5_0 -x 3").
// InvalidArgument with fabric-probe's words for a bad line, one that names a host, and for the
// flags that are the agent's to decide (--allow: --probe-allow; printing and files).
absl::StatusOr<PerftestServerOptions> ParsePerftestResponder(std::string_view line);

}  // namespace fabric::probes
