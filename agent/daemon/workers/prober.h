// The agent's probes: a responder other agents (and fabric-probe) test against, the scheduled
// rounds against the configured peers, on-demand tests (RunProbe), and the bounded history of
// results with the health findings they imply. One test at a time per device, whoever asks:
// the responder and the agent's own tests share the device locks.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/daemon/cycle/snapshot.h"
#include "agent/fabric/perftest/peer.h"
#include "agent/fabric/probe_schedule/schedule.h"
#include "agent/fabric/probes/probe.h"
#include "fabric/v1/agent.pb.h"

namespace fabric {

struct ProberOptions {
  // The responder: "ADDR:PORT", "[V6]:PORT" or ":PORT" (every address); port 0 picks one.
  // Empty: no responder.
  std::string listen;
  std::string sysfs = "/sys";      // GID tables, as discovery reads them.
  uint32_t responder_clients = 4;  // Tests served at once (each on its own device).
  // The peers the responder serves, "CIDR[,CIDR...]"; empty: this host's subnets.
  std::string allow;
  // Shared secret file (agent/fabric/probes/auth.h) for the responder and this agent's own tests;
  // empty: none.
  std::string secret_file;
  // Responder: tests a minute per peer address; 0: no limit.
  uint32_t rate_per_minute = probes::kDefaultRatePerMinute;
  // --probe-perftest: servers of stock perftest clients, each a fabric-probe --perftest server
  // line ("write_bw -p 18516 -d mlx5_0"), admitted by `allow` alone (a stock client proves no
  // secret), serving one client at a time, again and again, under the device locks.
  std::vector<std::string> perftest;
};

// Parses --probe-listen: "ADDR:PORT", "[V6]:PORT" or ":PORT" (every address); port 0 is allowed.
absl::Status ParseProbeListen(const std::string& text, std::string* host, uint16_t* port);

class Prober;

// The health the agent answers with: the snapshot's, plus the findings that arrive between
// snapshots (probe results; `prober` may be null). GetHealth and the metrics both report this.
v1::Health CurrentHealth(const Snapshot& snap, const Prober* prober);

class Prober {
 public:
  // The options' own errors (a --probe-perftest line, a port used twice, --probe-listen),
  // InvalidArgument, without starting anything: a configuration error (exit 2).
  static absl::Status CheckOptions(const ProberOptions& options);
  // Starts the responder (if asked) and the scheduler thread; the schedule is off until
  // SetSchedule names peers. `store` gives the host and policy each round and test uses.
  static absl::StatusOr<std::unique_ptr<Prober>> Start(const ProberOptions& options,
                                                       const SnapshotStore* store);
  // Stops the responder and the schedule; tests in progress are cancelled. Joins every thread.
  ~Prober();

  // Applies the config's `probes` section (validated already); a changed schedule starts its
  // first round within a second.
  void SetSchedule(const v1::ProbeSchedule& schedule);

  // RunProbe: InvalidArgument for a bad request; a test that ran and failed is a result with
  // ok=false.
  absl::StatusOr<v1::ProbeResult> Run(const v1::RunProbeRequest& req);
  v1::ListProbeResultsResponse List(const v1::ListProbeResultsRequest& req) const;
  // "probe" warnings: ports whose latest bandwidth result is below the degraded fraction.
  std::vector<v1::Finding> Findings() const;

  // Counts since start, for metrics.
  struct Stats {
    uint64_t runs_ok = 0, runs_failed = 0;          // this agent's tests (scheduled and on demand)
    uint64_t served_ok = 0, served_failed = 0;      // the responder's
    uint64_t perftest_ok = 0, perftest_failed = 0;  // stock perftest clients (--probe-perftest)
    // --probe-perftest lines not serving now (device or port unusable: their port is closed
    // while they retry).
    uint64_t perftest_down = 0;
  };
  Stats stats() const;
  // The newest result of each (device, port, peer, test, transport), newest first.
  std::vector<v1::ProbeResult> Latest() const;

  // Whether --probe-perftest servers run.
  bool perftest_responders() const { return !perftest_threads_.empty(); }
  // "ADDR:PORT" the responder listens on (the bound port), empty when off.
  const std::string& responder() const { return responder_address_; }

 private:
  Prober(const ProberOptions& options, const SnapshotStore* store,
         std::unique_ptr<probes::Canceller> cancel);
  void SchedulerLoop();
  // One --probe-perftest server: a client at a time until the prober stops.
  void ServePerftest(probes::PerftestServerOptions o);
  void Round(const v1::ProbeSchedule& schedule);
  // Resolves the static peers and peer_dns; this host's own addresses are left out of the DNS
  // answer. Sets peers_error_ when the name does not resolve.
  std::vector<probes::Peer> ResolvePeers(const v1::ProbeSchedule& schedule);
  // One test, waiting up to `wait` for the local device (or the TCP transport); the caller
  // records the result.
  v1::ProbeResult Execute(probes::ProbeSpec spec, const std::string& peer_name,
                          v1::ProbeResult::Source source, absl::Duration wait,
                          double degraded_fraction);

  ProberOptions options_;
  const SnapshotStore* store_;
  std::unique_ptr<probes::Canceller> cancel_;  // Stops everything, once.
  probes::DeviceLocks locks_;
  probes::ResultHistory history_;

  std::unique_ptr<probes::ProbeServer> server_;
  std::string responder_address_;
  std::thread server_thread_;
  std::atomic<uint64_t> served_{0};
  std::atomic<uint64_t> served_failed_{0};
  std::vector<std::thread> perftest_threads_;
  std::atomic<uint64_t> perftest_served_{0};
  std::atomic<uint64_t> perftest_failed_{0};
  std::atomic<int64_t> perftest_down_{0};
  std::atomic<uint64_t> runs_ok_{0};
  std::atomic<uint64_t> runs_failed_{0};

  mutable std::mutex mu_;  // Guards everything below.
  std::condition_variable cv_;
  bool stopping_ = false;
  uint64_t schedule_version_ = 0;
  v1::ProbeSchedule schedule_;
  std::vector<std::string> peers_;
  std::string peers_error_;
  absl::Time next_round_ = absl::InfiniteFuture();
  uint64_t rounds_ = 0;
  std::thread scheduler_;
};

}  // namespace fabric
