// fabric-probe facing stock perftest on perftest's own protocol (agent/fabric/perftest/wire.h),
// write, read and send bandwidth and latency over the TCP exchange, 6.06 to 6.29, either end: the
// server of a stock client (it serves one client and prints what perftest's server prints) and
// the client of a stock server (its figures computed as perftest computes them:
// agent/fabric/perftest/figures.h).
//
// A stock client cannot prove a shared secret, so this path admits by address alone: the peer
// must be in the allow-list (default: this host's subnets). What that opens: any host in those
// subnets may write into one registered buffer of this process and use one QP's worth of the
// NIC for as long as its test runs; nothing else of the host is reachable through it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/fabric/perftest/figures.h"
#include "agent/fabric/perftest/options.h"
#include "agent/fabric/perftest/wire.h"
#include "agent/fabric/probes/access.h"
#include "agent/fabric/probes/net.h"
#include "agent/fabric/probes/params.h"
#include "agent/fabric/probes/probe_spec.h"

namespace fabric::probes {

// One test with a perftest peer. What perftest itself would print on this side: the bandwidth
// report (write_bw and read_bw: the client's, also on the server, which moves no data; send_bw:
// each side's own, the server's from its receives) or the latency figures (each side its own;
// read_lat's server none).
struct PerftestResult {
  std::string peer;          // the server: the client's address
  std::string peer_version;  // "6.06"
  std::string device;
  int gid_index = -1;
  int mtu_bytes = 0;  // what both ends use: the smaller of the two
  bool ethernet = true;
  int out_reads = 0;
  std::string memory;     // "host memory", or the GPU's name
  std::string placement;  // where it ran (VerbsResources::placement)
  // -R: the traffic class the kernel gave QP 0 (with -T, the type of service; queried, so a
  // provider that ignored it shows).
  std::optional<int> traffic_class;
  // A bandwidth line: in the units of the side that measured; with -b the sum of both ends'
  // reports, this end's own average deciding perftest's extra digits.
  struct Line {
    perftest::BwReport bw;
    std::optional<double> own_average;
  };
  std::optional<perftest::BwReport> bw;  // the only or last line's
  std::optional<double> own_average;
  std::vector<Line> sizes;  // -a: each size's line where this side prints one
  std::optional<perftest::LatFigures> lat;
  std::optional<perftest::LatDurationFigures> lat_duration;  // -D: the window's average and rate
};

// Waits for one client (bounded by `cancel` only, as perftest's server waits), then runs the
// test to its end; each step after the accept is bounded by local.timeout (the run itself by the
// client's duration or a bound from its iterations).
// `listening`, when set, is called once the exchange's listener is up.
absl::StatusOr<PerftestResult> ServePerftestClient(
    const PerftestServerOptions& o, const Canceller* cancel,
    const std::function<void()>& listening = nullptr);

// The client's side: `host`:`o.port` runs a stock perftest server of the same test. Connects once
// (as perftest, unless `retry` lets a server that is starting be tried again every 100 ms until
// then).
absl::StatusOr<PerftestResult> RunPerftestClient(const PerftestServerOptions& o,
                                                 const std::string& host, absl::Duration retry,
                                                 const Canceller* cancel);

// One of the agent's tests (or fabric-probe's) against a "perftest:" peer, a stock perftest server
// of spec.params.test: perftest's CQ moderation, figures in Gb/s as ProbeResult carries them.
absl::StatusOr<ProbeResult> RunPerftestProbe(const ProbeSpec& spec);

}  // namespace fabric::probes
