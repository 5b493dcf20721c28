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

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "probes/net.h"
#include "probes/params.h"

namespace fabric::probes {

inline constexpr uint16_t kDefaultPort = 18515;  // perftest's

struct ProbeSpec {
  ProbeParams params;
  std::string host;  // the responder
  uint16_t port = kDefaultPort;
  Endpoint local;
  // Optional: Cancel() from another thread ends the probe with Cancelled.
  const Canceller* cancel = nullptr;
};

// Runs one test against a responder. Errors: InvalidArgument (bad parameters), NotFound (no
// such device), Unavailable (peer unreachable, vanished, completion errors), DeadlineExceeded
// (a step took longer than spec.local.timeout), FailedPrecondition (the responder refused:
// parameters differ, no device there), Cancelled.
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
  Endpoint local;
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
  // Waits for the next client and serves its test. The test's own failure is in
  // ServedTest::status; the returned status fails only when the server cannot go on (Cancelled
  // after Stop()).
  absl::StatusOr<ServedTest> ServeOne();
  // Serves clients one after another until Stop(); `on_served` sees each.
  absl::Status Serve(const std::function<void(const ServedTest&)>& on_served = {});
  // Thread-safe; wakes ServeOne/Serve and aborts a test in progress.
  void Stop();

 private:
  ProbeServer(const ServerOptions& options, Fd listener, std::unique_ptr<Canceller> cancel);
  absl::Status ServeClient(Fd fd, ServedTest* served);

  ServerOptions options_;
  Fd listener_;
  uint16_t port_ = 0;
  std::unique_ptr<Canceller> cancel_;
};

}  // namespace fabric::probes
