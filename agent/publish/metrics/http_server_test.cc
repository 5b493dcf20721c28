#include "agent/publish/metrics/http_server.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace fabric::metrics {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr char kBody[] = "# TYPE fabric_x gauge\nfabric_x 1\n";

// A client socket, closed when it goes. Every read and write gives up after 5 s, so a server
// that does not answer fails the test instead of hanging it.
class Client {
 public:
  explicit Client(uint16_t port, bool ipv6 = false) {
    fd_ = ::socket(ipv6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    timeval tv{5, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    int rc;
    if (ipv6) {
      sockaddr_in6 a{};
      a.sin6_family = AF_INET6;
      a.sin6_addr = in6addr_loopback;
      a.sin6_port = htons(port);
      rc = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    } else {
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(port);
      rc = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    }
    connect_errno_ = rc == 0 ? 0 : errno;
  }
  ~Client() {
    if (fd_ >= 0) ::close(fd_);
  }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  int connect_errno() const { return connect_errno_; }
  bool connected() const { return connect_errno_ == 0; }

  bool Send(std::string_view data) {
    while (!data.empty()) {
      const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // Everything until the server closes (or 5 s without a byte).
  std::string ReadAll() {
    std::string out;
    char buf[65536];
    for (;;) {
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }

  // One response: the head, then Content-Length bytes of body unless `head_only`.
  std::string ReadResponse(bool head_only = false) {
    std::string out;
    char buf[65536];
    size_t want = std::string::npos;
    for (;;) {
      if (want == std::string::npos) {
        const size_t end = out.find("\r\n\r\n");
        if (end != std::string::npos) {
          size_t length = 0;
          for (absl::string_view line : absl::StrSplit(out.substr(0, end), "\r\n")) {
            const size_t colon = line.find(':');
            if (colon != absl::string_view::npos &&
                absl::AsciiStrToLower(line.substr(0, colon)) == "content-length") {
              (void)absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(colon + 1)), &length);
            }
          }
          want = end + 4 + (head_only ? 0 : length);
        }
      }
      if (want != std::string::npos && out.size() >= want) return out;
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) return out;
      out.append(buf, static_cast<size_t>(n));
    }
  }

  // Whether the server closed the connection within `ms` (EOF or reset), with no data.
  // Returns "data" when bytes came instead, "open" when nothing happened.
  std::string WaitClosed(int ms) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, ms) <= 0) return "open";
    char c;
    const ssize_t n = ::recv(fd_, &c, 1, MSG_DONTWAIT);
    return n > 0 ? "data" : "closed";
  }

 private:
  int fd_ = -1;
  int connect_errno_ = 0;
};

struct Response {
  std::string status_line;
  std::map<std::string, std::string> headers;  // Lower-case names.
  std::string body;

  std::string Header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "(none)" : it->second;
  }
};

Response ParseResponse(const std::string& raw) {
  Response r;
  const size_t end = raw.find("\r\n\r\n");
  EXPECT_NE(end, std::string::npos) << "no complete head in: " << raw;
  if (end == std::string::npos) return r;
  bool first = true;
  for (absl::string_view line : absl::StrSplit(raw.substr(0, end), "\r\n")) {
    if (first) {
      r.status_line = std::string(line);
      first = false;
      continue;
    }
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos) continue;
    r.headers[absl::AsciiStrToLower(line.substr(0, colon))] =
        std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
  }
  r.body = raw.substr(end + 4);
  return r;
}

// One request on its own connection, closed by the server after the answer.
Response Fetch(uint16_t port, const std::string& method, const std::string& path,
               const std::string& extra = "", bool ipv6 = false) {
  Client c(port, ipv6);
  EXPECT_TRUE(c.connected()) << std::strerror(c.connect_errno());
  EXPECT_TRUE(c.Send(absl::StrCat(
      method, " ", path, " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n", extra, "\r\n")));
  return ParseResponse(c.ReadAll());
}

std::unique_ptr<MetricsHttpServer> StartOrDie(
    const std::string& address, std::function<std::string()> render = [] { return kBody; },
    const MetricsHttpServer::Options& options = {}) {
  auto server = MetricsHttpServer::Start(address, std::move(render), options);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? std::move(*server) : nullptr;
}

bool Ipv6Loopback() {
  const int fd = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  ::close(fd);
  return ok;
}

TEST(MetricsHttpServer, ServesMetrics) {
  auto server = StartOrDie("127.0.0.1:0");
  ASSERT_NE(server, nullptr);
  EXPECT_NE(server->port(), 0);
  EXPECT_EQ(server->address(), absl::StrCat("127.0.0.1:", server->port()));
  const Response r = Fetch(server->port(), "GET", "/metrics");
  EXPECT_EQ(r.status_line, "HTTP/1.1 200 OK");
  EXPECT_EQ(r.Header("content-type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(r.Header("content-length"), absl::StrCat(std::strlen(kBody)));
  EXPECT_EQ(r.body, kBody);
}

TEST(MetricsHttpServer, HeadHasHeadersOnly) {
  auto server = StartOrDie("127.0.0.1:0");
  ASSERT_NE(server, nullptr);
  const Response r = Fetch(server->port(), "HEAD", "/metrics");
  EXPECT_EQ(r.status_line, "HTTP/1.1 200 OK");
  EXPECT_EQ(r.Header("content-type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(r.Header("content-length"), absl::StrCat(std::strlen(kBody)));
  EXPECT_EQ(r.body, "");
}

TEST(MetricsHttpServer, Paths) {
  auto server = StartOrDie("127.0.0.1:0");
  ASSERT_NE(server, nullptr);
  const struct {
    const char* method;
    const char* path;
    const char* status;
    const char* body;  // A part of it.
  } cases[] = {
      {"GET", "/", "HTTP/1.1 200 OK", "/metrics"},
      {"HEAD", "/", "HTTP/1.1 200 OK", ""},
      {"GET", "/metrics?debug=1", "HTTP/1.1 200 OK", "fabric_x 1"},
      {"GET", "/nope", "HTTP/1.1 404 Not Found", "404"},
      {"GET", "/metrics/", "HTTP/1.1 404 Not Found", "404"},
      {"GET", "/metricsx", "HTTP/1.1 404 Not Found", "404"},
      {"GET", "/Metrics", "HTTP/1.1 404 Not Found", "404"},
      {"HEAD", "/nope", "HTTP/1.1 404 Not Found", ""},
  };
  for (const auto& c : cases) {
    const Response r = Fetch(server->port(), c.method, c.path);
    EXPECT_EQ(r.status_line, c.status) << c.method << " " << c.path;
    EXPECT_THAT(r.body, HasSubstr(c.body)) << c.method << " " << c.path;
  }
}

TEST(MetricsHttpServer, OtherMethodsAre405) {
  auto server = StartOrDie("127.0.0.1:0");
  ASSERT_NE(server, nullptr);
  for (const char* method : {"POST", "PUT", "DELETE", "OPTIONS", "PATCH"}) {
    const Response r = Fetch(server->port(), method, "/metrics");
    EXPECT_EQ(r.status_line, "HTTP/1.1 405 Method Not Allowed") << method;
    EXPECT_EQ(r.Header("allow"), "GET, HEAD") << method;
  }
  // With a body, which is never read.
  const Response r = Fetch(server->port(), "POST", "/metrics", "Content-Length: 3\r\n\r\na=b");
  EXPECT_EQ(r.status_line, "HTTP/1.1 405 Method Not Allowed");
}

TEST(MetricsHttpServer, GetWithABodyIsServedAndKeptAlive) {
  auto server = StartOrDie("127.0.0.1:0");
  ASSERT_NE(server, nullptr);
  Client c(server->port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.Send("GET /metrics HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nhello"));
  EXPECT_EQ(ParseResponse(c.ReadResponse()).body, kBody);
  ASSERT_TRUE(c.Send("GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n"));
  EXPECT_EQ(ParseResponse(c.ReadResponse()).body, kBody);
}

TEST(MetricsHttpServer, RendersPerScrapeOnTheServerThread) {
  std::atomic<int> calls{0};
  std::atomic<bool> other_thread{true};
  const std::thread::id test_thread = std::this_thread::get_id();
  auto server = StartOrDie("127.0.0.1:0", [&] {
    if (std::this_thread::get_id() == test_thread) other_thread = false;
    return absl::StrCat("fabric_scrape ", ++calls, "\n");
  });
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(Fetch(server->port(), "GET", "/metrics").body, "fabric_scrape 1\n");
  EXPECT_EQ(Fetch(server->port(), "GET", "/metrics").body, "fabric_scrape 2\n");
  EXPECT_EQ(Fetch(server->port(), "GET", "/").status_line, "HTTP/1.1 200 OK");
  EXPECT_EQ(calls, 2);  // Only /metrics renders.
  EXPECT_TRUE(other_thread);
}

TEST(MetricsHttpServer, ManySequentialRequests) {
  auto server = StartOrDie("127.0.0.1:0");
  ASSERT_NE(server, nullptr);
  for (int i = 0; i < 200; ++i) {
    const Response r = Fetch(server->port(), "GET", "/metrics");
    ASSERT_EQ(r.status_line, "HTTP/1.1 200 OK") << i;
    ASSERT_EQ(r.body, kBody) << i;
  }
  // Keep-alive: many requests on one connection.
  Client c(server->port());
  ASSERT_TRUE(c.connected());
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(c.Send("GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n"));
    const Response r = ParseResponse(c.ReadResponse());
    ASSERT_EQ(r.status_line, "HTTP/1.1 200 OK") << i;
    ASSERT_EQ(r.body, kBody) << i;
  }
}

TEST(MetricsHttpServer, ConcurrentRequests) {
  auto server = StartOrDie("127.0.0.1:0");
  ASSERT_NE(server, nullptr);
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 25; ++i) {
        Client c(server->port());
        if (!c.connected()) continue;
        c.Send("GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
        const std::string raw = c.ReadAll();
        if (absl::StartsWith(raw, "HTTP/1.1 200 OK") && absl::EndsWith(raw, kBody)) ++ok;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok, 8 * 25);
}

TEST(MetricsHttpServer, SilentClientsDoNotBlockOthers) {
  auto server = StartOrDie("127.0.0.1:0");
  ASSERT_NE(server, nullptr);
  Client silent(server->port());
  ASSERT_TRUE(silent.connected());
  Client half(server->port());
  ASSERT_TRUE(half.connected());
  ASSERT_TRUE(half.Send("GET /metr"));
  // Client's 5 s receive timeout bounds this: a server stuck on the others fails here.
  const Response r = Fetch(server->port(), "GET", "/metrics");
  EXPECT_EQ(r.status_line, "HTTP/1.1 200 OK");
  EXPECT_EQ(r.body, kBody);
  EXPECT_EQ(silent.WaitClosed(0), "open");
}

TEST(MetricsHttpServer, IdleConnectionsTimeOut) {
  MetricsHttpServer::Options options;
  options.connection_timeout_s = 1;
  auto server = StartOrDie(
      "127.0.0.1:0", [] { return kBody; }, options);
  ASSERT_NE(server, nullptr);
  Client idle(server->port());
  ASSERT_TRUE(idle.connected());
  EXPECT_EQ(idle.WaitClosed(5000), "closed");
}

TEST(MetricsHttpServer, ConnectionLimitHolds) {
  MetricsHttpServer::Options options;
  options.connection_limit = 2;
  auto server = StartOrDie(
      "127.0.0.1:0", [] { return kBody; }, options);
  ASSERT_NE(server, nullptr);
  // Two connections the server holds (each answered once, kept alive).
  auto a = std::make_unique<Client>(server->port());
  auto b = std::make_unique<Client>(server->port());
  for (Client* c : {a.get(), b.get()}) {
    ASSERT_TRUE(c->connected());
    ASSERT_TRUE(c->Send("GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n"));
    ASSERT_EQ(ParseResponse(c->ReadResponse()).body, kBody);
  }
  // A third is not served while they stay...
  Client third(server->port());
  ASSERT_TRUE(third.connected());  // The kernel completes the handshake (listen backlog).
  ASSERT_TRUE(third.Send("GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"));
  EXPECT_EQ(third.WaitClosed(300), "open");
  // ...and is once one of them goes.
  a.reset();
  const Response r = ParseResponse(third.ReadAll());
  EXPECT_EQ(r.status_line, "HTTP/1.1 200 OK");
  EXPECT_EQ(r.body, kBody);
}

TEST(MetricsHttpServer, PortInUse) {
  auto first = StartOrDie("127.0.0.1:0");
  ASSERT_NE(first, nullptr);
  const std::string address = absl::StrCat("127.0.0.1:", first->port());
  auto second = MetricsHttpServer::Start(address, [] { return std::string(); });
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(std::string(second.status().message()), HasSubstr("Address already in use"));
  EXPECT_THAT(std::string(second.status().message()), HasSubstr(address));
  // The first one still serves.
  EXPECT_EQ(Fetch(first->port(), "GET", "/metrics").body, kBody);
}

TEST(MetricsHttpServer, BadAddresses) {
  for (const char* address : {"",
                              "9464",
                              "127.0.0.1",
                              "127.0.0.1:",
                              "127.0.0.1:x",
                              "127.0.0.1:-1",
                              "127.0.0.1:65536",
                              "127.0.0.1:123456",
                              "127.0.0.1: 80",
                              "1.2.3:80",
                              "256.1.1.1:80",
                              "::1:80",
                              "[::1",
                              "[::1]",
                              "[::1]80",
                              "[]:80",
                              "[127.0.0.1]:80",
                              "[::1]:80x",
                              "example.com:80",
                              " :80",
                              "127.0.0.1:80:80"}) {
    auto server = MetricsHttpServer::Start(address, [] { return std::string(); });
    ASSERT_FALSE(server.ok()) << address;
    EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument) << address;
    EXPECT_THAT(std::string(server.status().message()),
                StartsWith(absl::StrCat("bad listen address \"", address, "\"")));
  }
  auto no_render = MetricsHttpServer::Start("127.0.0.1:0", nullptr);
  EXPECT_EQ(no_render.status().code(), absl::StatusCode::kInvalidArgument);
  MetricsHttpServer::Options zero;
  zero.connection_limit = 0;
  auto no_connections = MetricsHttpServer::Start(
      "127.0.0.1:0", [] { return kBody; }, zero);
  EXPECT_EQ(no_connections.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(MetricsHttpServer, Localhost) {
  auto server = StartOrDie("localhost:0");
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->address(), absl::StrCat("127.0.0.1:", server->port()));
  EXPECT_EQ(Fetch(server->port(), "GET", "/metrics").body, kBody);
}

TEST(MetricsHttpServer, Ipv6Loopback) {
  if (!Ipv6Loopback()) GTEST_SKIP() << "no IPv6 loopback here";
  auto server = StartOrDie("[::1]:0");
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->address(), absl::StrCat("[::1]:", server->port()));
  EXPECT_EQ(Fetch(server->port(), "GET", "/metrics", "", /*ipv6=*/true).body, kBody);
  Client v4(server->port());
  EXPECT_FALSE(v4.connected());  // [::1] is not 127.0.0.1.
}

TEST(MetricsHttpServer, AllAddresses) {
  auto server = StartOrDie(":0");
  ASSERT_NE(server, nullptr);
  EXPECT_THAT(server->address(), testing::AnyOf(StartsWith("[::]:"), StartsWith("0.0.0.0:")));
  EXPECT_EQ(Fetch(server->port(), "GET", "/metrics").body, kBody);
  if (Ipv6Loopback()) {
    EXPECT_EQ(Fetch(server->port(), "GET", "/metrics", "", /*ipv6=*/true).body, kBody);
  }
}

TEST(MetricsHttpServer, LargeBody) {
  std::string big;
  for (int i = 0; big.size() < (4 << 20); ++i) absl::StrAppend(&big, "fabric_x{i=\"", i, "\"} 1\n");
  auto server = StartOrDie("127.0.0.1:0", [&] { return big; });
  ASSERT_NE(server, nullptr);
  const Response r = Fetch(server->port(), "GET", "/metrics");
  EXPECT_EQ(r.Header("content-length"), absl::StrCat(big.size()));
  EXPECT_TRUE(r.body == big) << "body of " << r.body.size() << " bytes differs";
}

TEST(MetricsHttpServer, DestructionStops) {
  auto server = StartOrDie("127.0.0.1:0");
  ASSERT_NE(server, nullptr);
  const uint16_t port = server->port();
  Client open(port);
  ASSERT_TRUE(open.connected());
  server.reset();
  EXPECT_EQ(open.WaitClosed(5000), "closed");
  Client after(port);
  EXPECT_EQ(after.connect_errno(), ECONNREFUSED);
}

}  // namespace
}  // namespace fabric::metrics
