// The gRPC server of the API behind the agent's own listeners (agent/daemon/transport/listener.h):
// the Unix socket and the optional TCP port are accepted by the agent and each connection is handed
// to gRPC; connections over the limit go to a second, tiny server that answers every call with
// RESOURCE_EXHAUSTED naming the limit. The server's own limits (streams per connection, threads,
// message size) are set here, in one place.
#pragma once

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/daemon/transport/listener.h"
#include "agent/daemon/transport/relay.h"
#include "agent/daemon/transport/tls.h"

namespace fabric {

struct ApiServerOptions {
  std::string socket;  // Unix socket path (required).
  std::string listen;  // TCP "HOST:PORT"; empty: none.
  ControlPolicy policy;
  size_t max_connections = 1024;  // Per listener.
  int max_streams = 32;           // Concurrent calls per connection (HTTP/2 streams).
  int max_threads = 256;          // The synchronous server's thread pool.
  int max_request_bytes = 1 << 20;
  RelayOptions relay;
  // The Unix socket through the relay too, at the cost of a hop per message (its connections are
  // guarded against the rapid reset in place otherwise); TCP always goes through it.
  bool relay_unix = false;
  TlsContext* tls = nullptr;  // TLS on `listen`; must outlive the server.
};

class ApiServer {
 public:
  // Starts the servers with `services` registered and the listeners in front of them.
  // `callers` records who is behind each connection; it must outlive the server.
  static absl::StatusOr<std::unique_ptr<ApiServer>> Start(
      const ApiServerOptions& options, const std::vector<grpc::Service*>& services,
      CallerTable* callers);
  ~ApiServer();  // Shutdown() if not done.

  // Stops accepting, then ends the calls in flight within `grace`.
  void Shutdown(absl::Duration grace);
  grpc::Server* server() { return server_.get(); }
  uint16_t tcp_port() const { return tcp_port_; }
  // The Unix socket's file as bound (the agent removes it at teardown only if still that one).
  const BoundSocketFile& socket_file() const { return socket_file_; }
  // One entry per listener (unix, then tcp).
  std::vector<std::pair<std::string, ListenerStats>> Stats() const;
  RelayStats relay_stats() const { return relay_->Stats(); }
  // One line for the log: where it serves, and who may make control calls over which channel.
  std::string Describe(const ApiServerOptions& options) const;

 private:
  ApiServer() = default;

  std::unique_ptr<grpc::CallbackGenericService> refusals_;
  std::unique_ptr<grpc::Server> refusal_server_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<Relay> relay_;  // After the servers: destroyed (connections closed) first.
  std::vector<std::unique_ptr<Listener>> listeners_;
  BoundSocketFile socket_file_;
  uint16_t tcp_port_ = 0;
  bool shut_down_ = false;
  // The socket through the relay (its guard on gRPC's reads otherwise).
  bool unix_relayed_ = false;
};

// Raises the soft RLIMIT_NOFILE to the hard limit: every API connection is a descriptor.
void RaiseFileLimit();

// The connection limit each listener gets: `wanted`, but never so many that `listeners` full
// listeners would exhaust `nofile` descriptors (a margin is left for the rest of the agent).
size_t EffectiveConnectionLimit(size_t wanted, size_t listeners, uint64_t nofile);

}  // namespace fabric
