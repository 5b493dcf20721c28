// The agent between an API client and the gRPC server. gRPC 1.51 takes a connection handed over
// from outside (AddInsecureChannelFromFd) only in plaintext and reads it with no defence against
// the HTTP/2 rapid reset, so each accepted connection is relayed: the client's socket stays with
// the agent, gRPC gets one end of a socketpair, and one epoll thread copies the bytes between them,
// terminating TLS on the client side when asked and passing every client byte through an
// H2Guard. Buffers are bounded per direction (a side that does not read stops the other), a TLS
// handshake is bounded in time, and closing either side closes both.
#pragma once

#include <openssl/ssl.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/daemon/transport/h2_guard.h"
#include "agent/fabric/probes/net.h"

namespace fabric {

struct RelayOptions {
  size_t max_buffer = 64 * 1024;  // Per direction and connection: 1,024 connections, 128 MiB.
  absl::Duration handshake_timeout = absl::Seconds(10);
  // The rapid-reset budget of each connection (H2Guard): RST_STREAM frames a second, and at once.
  double resets_per_second = 128;
  double reset_burst = 256;
};

struct RelayStats {
  uint64_t open = 0;          // Connections relayed now.
  uint64_t reset_floods = 0;  // Closed by the guard.
  uint64_t not_http2 = 0;     // Closed: not HTTP/2 (a TLS client on a plaintext port, say).
  uint64_t tls_failures = 0;  // Handshakes that failed or timed out.
};

class Relay {
 public:
  static absl::StatusOr<std::unique_ptr<Relay>> Start(RelayOptions options);
  ~Relay();  // Closes every relayed connection.
  Relay(const Relay&) = delete;
  Relay& operator=(const Relay&) = delete;

  // Called on the relay thread once the connection is ready (after the TLS handshake, if any):
  // `server_fd` is the end to hand to gRPC (owned by the callee), `ssl` the finished session or
  // null. `who` names the client in logs.
  using Ready = std::function<void(int server_fd, SSL* ssl)>;
  // Takes `client_fd` (non-blocking). `tls` null: plaintext.
  void Add(int client_fd, std::shared_ptr<SSL_CTX> tls, std::string who, Ready ready);
  RelayStats Stats() const;

 private:
  struct Conn;
  Relay(RelayOptions options, probes::Fd epoll, probes::Fd wake);
  void Run();
  void Adopt();                        // New connections from Add.
  void Pump(Conn* c, absl::Time now);  // Moves what can move; closes a finished connection.
  bool Handshake(Conn* c);             // False: failed (closed).
  void Watch(Conn* c);                 // Interest sets from the state.
  void Close(Conn* c, const char* why);

  const RelayOptions opt_;
  probes::Fd epoll_;
  probes::Fd wake_;  // eventfd: new connections, stop.
  std::mutex mu_;
  std::vector<std::unique_ptr<Conn>> incoming_;  // guarded by mu_
  bool stop_ = false;                            // guarded by mu_
  // Relay thread only.
  std::unordered_map<Conn*, std::unique_ptr<Conn>> conns_;
  std::unordered_set<Conn*> handshaking_;
  std::vector<Conn*> dead_;                          // Closed this round, freed after it.
  absl::Time next_expiry_ = absl::InfiniteFuture();  // The earliest handshake deadline.
  std::atomic<uint64_t> open_{0}, floods_{0}, not_http2_{0}, tls_failures_{0};
  std::thread thread_;
};

}  // namespace fabric
