// What a hostile or bursty client does to a server, and what it costs the server: for the tests
// and benchmarks that hold the agent to its bounds (agent/daemon/transport/access_test.cc,
// tests/bench/soak_bench.cc).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace fabric::testing {

// A process's cost as /proc tells it; -1 where unreadable.
struct ProcStats {
  int64_t rss_kb = -1;  // VmRSS
  int64_t hwm_kb = -1;  // VmHWM: the peak RSS so far
  int threads = -1;
  int fds = -1;
  // user + system: the process's CPU clock (clock_getcpuclockid: nanoseconds, threads that have
  // exited included), or /proc/<pid>/stat's clock ticks (10 ms steps) where it is not readable.
  double cpu_s = -1;
  // Time on CPU of the live threads (task/*/schedstat, nanoseconds): precise, but threads that
  // have exited are no longer in it.
  double live_threads_cpu_s = -1;
};
ProcStats ReadProcStats(pid_t pid);

// A connected stream socket to "unix:PATH" or "HOST:PORT"; -1 when it could not connect.
int ConnectTo(const std::string& target);

// Opens and at once closes `n` connections, unpaced. Returns how many connected.
int ChurnConnections(const std::string& target, int n);

// HTTP/2's client connection preface, and one frame: the 9-byte header (RFC 9113 4.1), then
// `payload`. H2RstStream: RST_STREAM for `stream` with error code CANCEL.
inline constexpr std::string_view kH2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
std::string H2Frame(uint8_t type, uint8_t flags, uint32_t stream, std::string_view payload);
std::string H2RstStream(uint32_t stream);

// The HTTP/2 rapid reset (CVE-2023-44487) on one plaintext connection: `n` requests for
// `path`, each cancelled (RST_STREAM) right after its HEADERS. Returns how many were sent before
// the server closed the connection (n when it did not); an error when it could not connect.
absl::StatusOr<int> RapidReset(const std::string& target, int n, const std::string& path);

// One rapid-reset connection of `n` Ping streams against the agent `pid` at `target`, and what
// it cost the agent: `sent` as RapidReset returns it, /proc before and after (hwm: the peak).
struct ResetOutcome {
  absl::StatusOr<int> sent;
  ProcStats before, after;
};
ResetOutcome RapidResetAgainst(pid_t agent, const std::string& target, int n);

}  // namespace fabric::testing
