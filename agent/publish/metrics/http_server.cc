#include "agent/publish/metrics/http_server.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "agent/common/fd.h"
#include "agent/common/ip.h"
#include "agent/common/log.h"
#include "agent/common/strings.h"

namespace fabric::metrics {

namespace {

constexpr char kMetricsContentType[] = "text/plain; version=0.0.4; charset=utf-8";
constexpr char kTextContentType[] = "text/plain; charset=utf-8";
constexpr char kIndex[] = "fabric-agent: Prometheus metrics are at /metrics\n";
constexpr char kNotFound[] = "404 page not found\n";
constexpr char kNotAllowed[] = "405 method not allowed: use GET or HEAD\n";

struct ListenAddress {
  sockaddr_storage addr{};
  socklen_t len = 0;
  bool any = false;  // ":PORT": every address.
};

absl::Status BadAddress(std::string_view host_port, std::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("bad listen address \"", Av(host_port),
                                                 "\": ", Av(why),
                                                 " (want HOST:PORT, [IPV6]:PORT or :PORT)"));
}

absl::StatusOr<ListenAddress> ParseListenAddress(std::string_view host_port) {
  auto hp = ParseHostPort(host_port);
  if (!hp.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("bad listen address ", hp.status().message()));
  }
  const std::string_view host = hp->host;
  const bool bracketed = hp->bracketed;
  const uint16_t port_number = hp->port;

  ListenAddress out;
  if (host.empty()) {
    out.any = true;
    auto* a = reinterpret_cast<sockaddr_in6*>(&out.addr);
    a->sin6_family = AF_INET6;
    a->sin6_addr = in6addr_any;
    a->sin6_port = htons(static_cast<uint16_t>(port_number));
    out.len = sizeof(sockaddr_in6);
    return out;
  }
  const uint16_t port_be = htons(static_cast<uint16_t>(port_number));
  if (!bracketed) {
    // Dotted quad only (inet_pton), not the legacy forms getaddrinfo takes ("1.2.3").
    auto* a = reinterpret_cast<sockaddr_in*>(&out.addr);
    const std::string name = host == "localhost" ? "127.0.0.1" : std::string(host);
    if (::inet_pton(AF_INET, name.c_str(), &a->sin_addr) != 1) {
      return BadAddress(host_port,
                        "not an IPv4 address (host names other than localhost are not resolved)");
    }
    a->sin_family = AF_INET;
    a->sin_port = port_be;
    out.len = sizeof(sockaddr_in);
    return out;
  }
  // IPv6, possibly with a zone ("fe80::1%eth0"), which getaddrinfo resolves to a scope id.
  const std::string name(host);
  addrinfo hints{};
  hints.ai_family = AF_INET6;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_PASSIVE;
  addrinfo* res = nullptr;
  if (::getaddrinfo(name.c_str(), nullptr, &hints, &res) != 0 || res == nullptr ||
      res->ai_addrlen > sizeof(out.addr)) {
    if (res != nullptr) ::freeaddrinfo(res);
    return BadAddress(host_port, "not an IPv6 address");
  }
  std::memcpy(&out.addr, res->ai_addr, res->ai_addrlen);
  out.len = res->ai_addrlen;
  ::freeaddrinfo(res);
  reinterpret_cast<sockaddr_in6*>(&out.addr)->sin6_port = port_be;
  return out;
}

// "127.0.0.1:9464" or "[::]:9464".
std::string AddressText(const sockaddr_storage& a) {
  char buf[INET6_ADDRSTRLEN] = "?";
  if (a.ss_family == AF_INET6) {
    const auto* s6 = reinterpret_cast<const sockaddr_in6*>(&a);
    ::inet_ntop(AF_INET6, &s6->sin6_addr, buf, sizeof(buf));
    return absl::StrCat("[", buf, "]:", ntohs(s6->sin6_port));
  }
  const auto* s4 = reinterpret_cast<const sockaddr_in*>(&a);
  ::inet_ntop(AF_INET, &s4->sin_addr, buf, sizeof(buf));
  return absl::StrCat(buf, ":", ntohs(s4->sin_port));
}

absl::Status SocketError(int err, std::string_view what, std::string_view host_port) {
  return absl::ErrnoToStatus(
      err, absl::StrCat("cannot listen on ", Av(host_port), " for metrics: ", Av(what)));
}

// A bound, listening, non-blocking socket.
absl::StatusOr<int> Listen(const ListenAddress& a, std::string_view host_port) {
  int family = a.addr.ss_family;
  int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  ListenAddress v4;
  const ListenAddress* bind_to = &a;
  if (fd < 0 && a.any && errno == EAFNOSUPPORT) {
    // ":PORT" on a host without IPv6: every IPv4 address.
    auto* in = reinterpret_cast<sockaddr_in*>(&v4.addr);
    in->sin_family = AF_INET;
    in->sin_addr.s_addr = htonl(INADDR_ANY);
    in->sin_port = reinterpret_cast<const sockaddr_in6*>(&a.addr)->sin6_port;
    v4.len = sizeof(sockaddr_in);
    bind_to = &v4;
    family = AF_INET;
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  }
  UniqueFd s(fd);
  if (s.get() < 0) return SocketError(errno, "socket", host_port);
  const int one = 1, zero = 0;
  // A restarted agent can listen again while connections of the previous one are in TIME_WAIT.
  // (Linux still refuses a port another socket listens on.)
  if (::setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) {
    return SocketError(errno, "SO_REUSEADDR", host_port);
  }
  if (family == AF_INET6 && a.any &&
      ::setsockopt(s.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero)) != 0) {
    return SocketError(errno, "IPV6_V6ONLY", host_port);
  }
  if (::bind(s.get(), reinterpret_cast<const sockaddr*>(&bind_to->addr), bind_to->len) != 0) {
    return SocketError(errno, "bind", host_port);
  }
  if (::listen(s.get(), 64) != 0) return SocketError(errno, "listen", host_port);
  return s.release();
}

}  // namespace

// What the server thread uses: the callback and libmicrohttpd's messages.
struct MetricsHttpServer::Handler {
  std::function<std::string()> render;

  std::mutex mu;
  bool started = false;        // Before: messages are kept for the start error.
  std::string start_messages;  // Guarded by mu.

  // libmicrohttpd's printf-style messages (the attribute lets the compiler check the forwarding).
  __attribute__((format(printf, 2, 0))) static void OnLog(void* cls, const char* format,
                                                          va_list ap) {
    char buf[512];
    std::vsnprintf(buf, sizeof(buf), format, ap);
    std::string_view message(buf);
    while (!message.empty() && message.back() == '\n') message.remove_suffix(1);
    auto* h = static_cast<Handler*>(cls);
    std::lock_guard<std::mutex> lock(h->mu);
    if (!h->started) {
      absl::StrAppend(&h->start_messages, h->start_messages.empty() ? "" : "; ", Av(message));
    } else {
      // Connection-level trouble (a client that hung up, the connection limit): not ours.
      Log(LogLevel::kDebug, "metrics http: ", Av(message));
    }
  }

  static MHD_Result Reply(MHD_Connection* connection, unsigned status, const char* content_type,
                          const void* body, size_t size, MHD_ResponseMemoryMode mode,
                          bool allow = false) {
    MHD_Response* response = MHD_create_response_from_buffer(size, const_cast<void*>(body), mode);
    if (response == nullptr) return MHD_NO;
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    if (allow) MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
    const MHD_Result result = MHD_queue_response(connection, status, response);
    MHD_destroy_response(response);
    return result;
  }

  static MHD_Result Static(MHD_Connection* connection, unsigned status, const char* text,
                           bool allow = false) {
    return Reply(connection, status, kTextContentType, text, std::strlen(text),
                 MHD_RESPMEM_PERSISTENT, allow);
  }

  // GET and HEAD are answered once the whole request is in (answering earlier makes
  // libmicrohttpd close the connection: no keep-alive); a body, which they should not have, is
  // discarded. Other methods are answered at once, without reading a body, and the connection
  // is closed after the answer.
  static MHD_Result OnRequest(void* cls, MHD_Connection* connection, const char* url,
                              const char* method, const char* /*version*/,
                              const char* /*upload_data*/, size_t* upload_data_size,
                              void** con_cls) {
    auto* h = static_cast<Handler*>(cls);
    const std::string_view m(method), path(url);
    if (m != MHD_HTTP_METHOD_GET && m != MHD_HTTP_METHOD_HEAD) {
      return Static(connection, MHD_HTTP_METHOD_NOT_ALLOWED, kNotAllowed, /*allow=*/true);
    }
    static char headers_seen;
    if (*con_cls == nullptr) {
      *con_cls = &headers_seen;
      return MHD_YES;
    }
    if (*upload_data_size != 0) {
      *upload_data_size = 0;
      return MHD_YES;
    }
    if (path == "/metrics") {
      const std::string body = h->render();
      return Reply(connection, MHD_HTTP_OK, kMetricsContentType, body.data(), body.size(),
                   MHD_RESPMEM_MUST_COPY);
    }
    if (path == "/") return Static(connection, MHD_HTTP_OK, kIndex);
    return Static(connection, MHD_HTTP_NOT_FOUND, kNotFound);
  }
};

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    std::string_view host_port, std::function<std::string()> render) {
  return Start(host_port, std::move(render), Options());
}

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    std::string_view host_port, std::function<std::string()> render, const Options& options) {
  if (!render) return absl::InvalidArgumentError("metrics server: no render callback");
  if (options.connection_limit == 0) {
    return absl::InvalidArgumentError("metrics server: connection limit 0");
  }
  auto address = ParseListenAddress(host_port);
  if (!address.ok()) return address.status();
  auto fd = Listen(*address, host_port);
  if (!fd.ok()) return fd.status();
  UniqueFd listening(*fd);

  sockaddr_storage bound{};
  socklen_t bound_len = sizeof(bound);
  if (::getsockname(listening.get(), reinterpret_cast<sockaddr*>(&bound), &bound_len) != 0) {
    return SocketError(errno, "getsockname", host_port);
  }

  std::unique_ptr<MetricsHttpServer> server(new MetricsHttpServer());
  server->handler_ = std::make_unique<Handler>();
  server->handler_->render = std::move(render);
  server->address_ = AddressText(bound);
  server->port_ =
      ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port
                                        : reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);

  unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG;
  if (bound.ss_family == AF_INET6) flags |= MHD_USE_IPv6;
  Handler* h = server->handler_.get();
  // From here libmicrohttpd owns the socket: it closes it when it stops (and on some of its
  // failure paths, so it is not closed here after a failure).
  server->daemon_ =
      MHD_start_daemon(flags, 0, nullptr, nullptr, &Handler::OnRequest, h,
                       MHD_OPTION_EXTERNAL_LOGGER, &Handler::OnLog, h, MHD_OPTION_LISTEN_SOCKET,
                       listening.release(), MHD_OPTION_CONNECTION_LIMIT, options.connection_limit,
                       MHD_OPTION_CONNECTION_TIMEOUT, options.connection_timeout_s, MHD_OPTION_END);
  std::lock_guard<std::mutex> lock(h->mu);
  if (server->daemon_ == nullptr) {
    return absl::InternalError(
        absl::StrCat("metrics server on ", server->address_, ": libmicrohttpd did not start: ",
                     h->start_messages.empty() ? "no reason given" : h->start_messages));
  }
  h->started = true;
  return server;
}

MetricsHttpServer::~MetricsHttpServer() {
  if (daemon_ != nullptr) MHD_stop_daemon(daemon_);
}

}  // namespace fabric::metrics
