// The HTTP endpoint Prometheus scrapes, on libmicrohttpd: one internal thread polls every
// connection with epoll (no thread per connection), connections are limited in number and time
// out when idle, so a slow or silent client costs one slot and never blocks the others.
//
//   GET or HEAD /metrics   200, Content-Type: text/plain; version=0.0.4; charset=utf-8, the text
//                          the render callback returns (HEAD: headers only)
//   GET or HEAD /          200, a line pointing at /metrics
//   other paths            404
//   other methods          405, with Allow: GET, HEAD
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

struct MHD_Daemon;

namespace fabric::metrics {

class MetricsHttpServer {
 public:
  struct Options {
    unsigned connection_limit = 32;      // Connections served at once; more wait in the backlog.
    unsigned connection_timeout_s = 10;  // An idle connection is closed after this long.
  };

  // Listens on `host_port` and serves until destroyed:
  //   "127.0.0.1:9464", "[::1]:9464", "[fe80::1%eth0]:9464"   that address
  //   "localhost:9464"                                          127.0.0.1
  //   ":9464"                                                   every address, IPv6 and IPv4
  //                                                             (IPv4 only where IPv6 is off)
  // Port 0 picks a free port (port() says which). `render` is called on the server's thread for
  // each GET or HEAD of /metrics, one call at a time; it must not block for long (a scrape
  // waits for it, and so do other clients). Errors: InvalidArgument for a malformed address
  // (host names other than localhost are not resolved) or an empty `render`; the socket's error
  // (e.g. "Address already in use") when it cannot listen there.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      std::string_view host_port, std::function<std::string()> render);
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      std::string_view host_port, std::function<std::string()> render, const Options& options);

  // Stops: the listening socket and open connections are closed and the thread joined (a
  // render in progress finishes first).
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // The port it listens on.
  uint16_t port() const { return port_; }
  // The address it listens on, e.g. "127.0.0.1:9464" or "[::]:9464", for logs.
  const std::string& address() const { return address_; }

 private:
  MetricsHttpServer() = default;

  struct Handler;
  std::unique_ptr<Handler> handler_;  // What the server thread uses; outlives the daemon.
  MHD_Daemon* daemon_ = nullptr;
  uint16_t port_ = 0;
  std::string address_;
};

}  // namespace fabric::metrics
