// fabric_probes: perftest-grade RDMA bandwidth and latency tests (libibverbs RC; write, send and
// read; bandwidth and latency), with a TCP fallback. The library the fabric-probe CLI and the
// agent's scheduled probes call:
//
//   // Client: connect to a responder, run one test, get the figures.
//   ProbeSpec spec;
//   spec.params = DefaultParams(TestKind::kWriteBw);
//   spec.host = "10.0.0.2";
//   absl::StatusOr<ProbeResult> r = RunProbe(spec);
//
//   // Responder: serve tests on a thread until stopped.
//   auto server = ProbeServer::Create(options);   // listens at once; port() when 0 was asked
//   std::thread t([&] { (void)(*server)->Serve(); });
//   ...
//   (*server)->Stop();                            // thread-safe; ends a test in progress too
//   t.join();
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "agent/fabric/probes/access.h"
#include "agent/fabric/probes/net.h"
#include "agent/fabric/probes/params.h"
#include "agent/fabric/probes/probe_spec.h"

namespace fabric::probes {

// Whether verbs sees any RDMA device on this host: ChooseTransport's have_rdma_device, for
// fabric-probe and the agent alike.
bool HaveRdmaDevice();

// Runs one test against a responder. Errors: InvalidArgument (bad parameters), NotFound (no
// such device), Unavailable (peer unreachable, vanished, completion errors), DeadlineExceeded
// (a step took longer than spec.local.timeout), FailedPrecondition (the responder refused:
// parameters differ, no device there, this host not allowed, a missing or wrong secret),
// PermissionDenied (the responder did not prove the shared secret), ResourceExhausted (the
// responder's device is busy with another test, or its rate limit for this host is reached),
// Cancelled.
absl::StatusOr<ProbeResult> RunProbe(const ProbeSpec& spec);

struct ServerOptions {
  // The test to serve; unset: whatever the client asks.
  std::optional<TestKind> test;
  // Parameters the server was given; only the fields in `explicit_fields` must match the
  // client's (ParamField bits), the rest are taken from the client.
  ProbeParams expect;
  uint32_t explicit_fields = 0;
  std::string bind;              // empty: every address
  uint16_t port = kDefaultPort;  // 0: any free port, see port()
  // local.device empty: a client may name any device (else the first one is used); set: a
  // client naming another device is refused.
  Endpoint local;
  // Tests served at once, each on its own device; 1: one client after another. Clients beyond
  // the limit are refused as busy (bounded: past 16 refusals in progress, connections are
  // closed).
  uint32_t max_clients = 1;
  // Optional, shared with the host's own probes: a test on a device already under test is
  // refused as busy instead of disturbing the running one.
  DeviceLocks* locks = nullptr;
  // The peers served; unset: the subnets this host has addresses in (AllowList::HostSubnets),
  // read again (at most once a second) when a peer is not in them, so that an address the host
  // gains after start (a back-end NIC configured late at boot) is served too. Others are
  // refused before anything else is done for them.
  std::optional<AllowList> allow;
  // Set: clients must prove the secret in this file (auth.h); read at Create (an error there)
  // and again for every client, so a changed file applies to the next one.
  std::string secret_file;
  // Tests a minute per peer address (a token bucket, bursts up to this many); 0: no limit.
  uint32_t rate_per_minute = 0;
};

// What one client got.
struct ServedTest {
  ProbeParams params;
  std::string peer;
  std::string device;  // empty for TCP
  absl::Status status;
};

class ProbeServer {
 public:
  static absl::StatusOr<std::unique_ptr<ProbeServer>> Create(const ServerOptions& options);
  ~ProbeServer();

  uint16_t port() const { return port_; }
  // The peers served now, for the start-up log.
  AllowList allow() const;
  // Waits for the next client and serves its test. The test's own failure is in
  // ServedTest::status; the returned status fails only when the server cannot go on (Cancelled
  // after Stop()).
  absl::StatusOr<ServedTest> ServeOne();
  // Serves clients until Stop(); `on_served` sees each (from several threads at once when
  // max_clients > 1).
  absl::Status Serve(const std::function<void(const ServedTest&)>& on_served = {});
  // Thread-safe; wakes ServeOne/Serve and aborts a test in progress.
  void Stop();

 private:
  ProbeServer(const ServerOptions& options, AllowList allow, Fd listener,
              std::unique_ptr<Canceller> cancel);
  absl::Status ServeClient(Fd fd, ServedTest* served);
  // In the allow-list (re-reading this host's subnets when they are the list).
  bool Allowed(const std::string& peer);
  // Not allowed or over its rate (taking a token when `take`): why, else OK.
  absl::Status CheckPeer(const std::string& peer, bool take);
  // The secret exchange after the hello (auth.h); sends the Reject itself.
  absl::Status Authenticate(Channel& ch, const wire::Hello& hello);
  absl::Status ServeConcurrently(const std::function<void(const ServedTest&)>& on_served);

  ServerOptions options_;
  mutable std::mutex allow_mu_;
  AllowList allow_;  // guarded by allow_mu_
  // When this host's subnets were last read again; the first miss reads them at once.
  absl::Time allow_read_ = absl::InfinitePast();  // guarded by allow_mu_
  RateLimiter rate_;
  Fd listener_;
  Acceptor acceptor_;  // Keeps accepting through descriptor exhaustion.
  uint16_t port_ = 0;
  std::unique_ptr<Canceller> cancel_;
};

}  // namespace fabric::probes
