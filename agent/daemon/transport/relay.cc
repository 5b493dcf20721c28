#include "agent/daemon/transport/relay.h"

#include <openssl/err.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "agent/common/errno.h"
#include "agent/common/log.h"
#include "agent/common/strings.h"
#include "agent/daemon/transport/tls.h"

namespace fabric {
namespace {

constexpr size_t kChunk = 16 * 1024;

}  // namespace

struct Relay::Conn {
  struct End {
    Conn* conn;
    bool client;
  };
  probes::Fd client, server;
  SSL* ssl = nullptr;
  std::string who;
  Ready ready;
  bool handshaking = false;
  absl::Time deadline = absl::InfiniteFuture();
  std::string up, down;  // client -> server, server -> client
  size_t up_off = 0, down_off = 0;
  size_t ssl_write_len = 0;  // A retried SSL_write must repeat its length.
  bool client_eof = false, server_eof = false;
  bool want_read = false, want_write = false;  // What TLS asked of the client socket.
  uint32_t client_mask = 0, server_mask = 0;   // Registered interest.
  bool client_added = false, server_added = false;
  bool closed = false;
  H2Guard guard;
  End client_end{this, true}, server_end{this, false};

  explicit Conn(const RelayOptions& o) : guard(o.resets_per_second, o.reset_burst) {}
  ~Conn() {
    if (ssl != nullptr) SSL_free(ssl);
  }
};

absl::StatusOr<std::unique_ptr<Relay>> Relay::Start(RelayOptions options) {
  probes::Fd ep(epoll_create1(EPOLL_CLOEXEC));
  if (!ep.valid()) return absl::InternalError(absl::StrCat("epoll_create1: ", ErrnoText(errno)));
  probes::Fd wake(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake.valid()) return absl::InternalError(absl::StrCat("eventfd: ", ErrnoText(errno)));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;
  if (epoll_ctl(ep.get(), EPOLL_CTL_ADD, wake.get(), &ev) != 0) {
    return absl::InternalError(absl::StrCat("epoll_ctl: ", ErrnoText(errno)));
  }
  std::unique_ptr<Relay> r(new Relay(options, std::move(ep), std::move(wake)));
  r->thread_ = std::thread([p = r.get()] { p->Run(); });
  return r;
}

Relay::Relay(RelayOptions options, probes::Fd epoll, probes::Fd wake)
    : opt_(options), epoll_(std::move(epoll)), wake_(std::move(wake)) {}

Relay::~Relay() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  const uint64_t one = 1;
  (void)write(wake_.get(), &one, sizeof(one));
  thread_.join();
}

void Relay::Add(int client_fd, std::shared_ptr<SSL_CTX> tls, std::string who, Ready ready) {
  auto c = std::make_unique<Conn>(opt_);
  c->client = probes::Fd(client_fd);
  c->who = std::move(who);
  c->ready = std::move(ready);
  if (tls != nullptr) {
    c->ssl = SSL_new(tls.get());  // Holds its own reference to the context.
    if (c->ssl == nullptr || SSL_set_fd(c->ssl, client_fd) != 1) {
      Log(LogLevel::kWarning, "TLS: cannot set up a session for ", c->who, ": ",
          OpenSslError("the connection closed"));
      ++tls_failures_;
      return;  // `c` closes the connection.
    }
    SSL_set_accept_state(c->ssl);
    c->handshaking = true;
    c->deadline = absl::Now() + opt_.handshake_timeout;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    incoming_.push_back(std::move(c));
  }
  const uint64_t one = 1;
  (void)write(wake_.get(), &one, sizeof(one));
}

RelayStats Relay::Stats() const {
  return {open_.load(), floods_.load(), not_http2_.load(), tls_failures_.load()};
}

void Relay::Adopt() {
  std::vector<std::unique_ptr<Conn>> fresh;
  {
    std::lock_guard<std::mutex> lock(mu_);
    fresh.swap(incoming_);
  }
  const absl::Time now = absl::Now();
  for (auto& owned : fresh) {
    Conn* c = owned.get();
    conns_.emplace(c, std::move(owned));
    ++open_;
    if (c->handshaking) {
      handshaking_.insert(c);
      next_expiry_ = std::min(next_expiry_, c->deadline);
      c->want_read = true;
      Watch(c);
      if (Handshake(c)) Pump(c, now);
    } else if (Handshake(c)) {  // Plaintext: ready at once.
      Pump(c, now);
    }
  }
}

bool Relay::Handshake(Conn* c) {
  if (c->handshaking) {
    ERR_clear_error();
    const int r = SSL_do_handshake(c->ssl);
    if (r != 1) {
      const int err = SSL_get_error(c->ssl, r);
      c->want_read = err == SSL_ERROR_WANT_READ;
      c->want_write = err == SSL_ERROR_WANT_WRITE;
      if (c->want_read || c->want_write) {
        Watch(c);
        return false;
      }
      ++tls_failures_;
      Log(LogLevel::kInfo, "TLS handshake with ", c->who,
          " failed: ", OpenSslError("the connection closed"));
      Close(c, nullptr);
      return false;
    }
    c->handshaking = false;
    c->want_read = c->want_write = false;
    handshaking_.erase(c);
  }
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pair) != 0) {
    Log(LogLevel::kWarning, "relay: socketpair for ", c->who, ": ", ErrnoText(errno));
    Close(c, nullptr);
    return false;
  }
  c->server = probes::Fd(pair[0]);
  c->ready(pair[1], c->ssl);
  Watch(c);
  return true;
}

void Relay::Watch(Conn* c) {
  const bool up_room = c->up.size() - c->up_off < opt_.max_buffer;
  const bool down_room = c->down.size() - c->down_off < opt_.max_buffer;
  uint32_t cm = 0, sm = 0;
  if (c->want_read || (!c->handshaking && !c->client_eof && up_room)) cm |= EPOLLIN;
  if (c->want_write || c->down_off < c->down.size()) cm |= EPOLLOUT;
  if (c->server.valid()) {
    if (!c->server_eof && down_room) sm |= EPOLLIN;
    if (c->up_off < c->up.size()) sm |= EPOLLOUT;
  }
  // An end is added once (a mask of 0 still reports hang-ups), then changed when its mask does.
  auto set = [&](int fd, Conn::End* end, uint32_t want, uint32_t* have, bool* added) {
    if (*added && want == *have) return;
    epoll_event ev{};
    ev.events = want;
    ev.data.ptr = end;
    (void)epoll_ctl(epoll_.get(), *added ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &ev);
    *have = want;
    *added = true;
  };
  set(c->client.get(), &c->client_end, cm, &c->client_mask, &c->client_added);
  if (c->server.valid())
    set(c->server.get(), &c->server_end, sm, &c->server_mask, &c->server_added);
}

void Relay::Pump(Conn* c, absl::Time now) {
  char buf[kChunk];
  for (bool progress = true; progress && !c->closed;) {
    progress = false;
    // Client -> buffer, through TLS and the guard.
    c->want_read = c->want_write = false;
    while (!c->client_eof && c->up.size() - c->up_off < opt_.max_buffer) {
      ssize_t n;
      if (c->ssl != nullptr) {
        ERR_clear_error();
        n = SSL_read(c->ssl, buf, sizeof(buf));
        if (n <= 0) {
          const int err = SSL_get_error(c->ssl, static_cast<int>(n));
          if (err == SSL_ERROR_WANT_READ) break;
          if (err == SSL_ERROR_WANT_WRITE) {
            c->want_write = true;
            break;
          }
          c->client_eof = true;  // Closed, or a TLS error: nothing more comes.
          break;
        }
      } else {
        n = read(c->client.get(), buf, sizeof(buf));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (n <= 0) {
          c->client_eof = true;
          break;
        }
      }
      const H2Guard::Verdict v = c->guard.Feed(std::string_view(buf, static_cast<size_t>(n)), now);
      if (v != H2Guard::Verdict::kOk) {
        if (v == H2Guard::Verdict::kResetFlood) {
          ++floods_;
          Close(c, "it reset streams faster than the rapid-reset budget");
        } else {
          ++not_http2_;
          Close(c, nullptr);  // A TLS client on a plaintext port, a port scanner.
        }
        return;
      }
      c->up.append(buf, static_cast<size_t>(n));
      progress = true;
    }
    // Buffer -> server.
    if (c->up_off < c->up.size()) {
      const ssize_t w = write(c->server.get(), c->up.data() + c->up_off, c->up.size() - c->up_off);
      if (w > 0) {
        c->up_off += static_cast<size_t>(w);
        progress = true;
      } else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        c->server_eof = true;
        c->up.clear();
        c->up_off = 0;
      }
      if (c->up_off == c->up.size()) c->up.clear(), c->up_off = 0;
    }
    // Server -> buffer.
    while (!c->server_eof && c->down.size() - c->down_off < opt_.max_buffer) {
      const ssize_t n = read(c->server.get(), buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (n <= 0) {
        c->server_eof = true;
        break;
      }
      c->down.append(buf, static_cast<size_t>(n));
      progress = true;
    }
    // Buffer -> client, through TLS.
    if (c->down_off < c->down.size()) {
      const size_t left = c->down.size() - c->down_off;
      ssize_t w;
      bool failed = false;
      if (c->ssl != nullptr) {
        const size_t len = c->ssl_write_len != 0 ? c->ssl_write_len : std::min(left, kChunk);
        ERR_clear_error();
        w = SSL_write(c->ssl, c->down.data() + c->down_off, static_cast<int>(len));
        if (w <= 0) {
          const int err = SSL_get_error(c->ssl, static_cast<int>(w));
          c->ssl_write_len = len;
          if (err == SSL_ERROR_WANT_WRITE) {
            c->want_write = true;
          } else if (err == SSL_ERROR_WANT_READ) {
            c->want_read = true;
          } else {
            failed = true;
          }
        } else {
          c->ssl_write_len = 0;
        }
      } else {
        w = write(c->client.get(), c->down.data() + c->down_off, left);
        failed = w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
      }
      if (w > 0) {
        c->down_off += static_cast<size_t>(w);
        progress = true;
      }
      if (failed) {
        c->client_eof = true;
        c->down.clear();
        c->down_off = 0;
      }
      if (c->down_off == c->down.size()) {
        c->down.clear();
        c->down_off = 0;
      } else if (c->down_off >= kChunk * 2 && c->ssl_write_len == 0) {
        c->down.erase(0, c->down_off);
        c->down_off = 0;
      }
    }
  }
  // Either side gone and what it sent delivered: the connection is over (gRPC needs no
  // half-close, and a client that closed has nobody left to answer).
  if ((c->client_eof && c->up_off >= c->up.size()) ||
      (c->server_eof && c->down_off >= c->down.size())) {
    Close(c, nullptr);
    return;
  }
  Watch(c);
}

void Relay::Close(Conn* c, const char* why) {
  if (c->closed) return;
  c->closed = true;
  if (why != nullptr) Log(LogLevel::kWarning, "closed the connection of ", c->who, ": ", why);
  if (c->ssl != nullptr && !c->handshaking) {
    ERR_clear_error();
    (void)SSL_shutdown(c->ssl);  // Best effort: the close_notify, without waiting.
  }
  c->client = probes::Fd();  // Closing removes both ends from the epoll set.
  c->server = probes::Fd();
  handshaking_.erase(c);
  dead_.push_back(c);
  --open_;
}

void Relay::Run() {
  epoll_event events[64];
  for (;;) {
    int timeout = -1;
    if (next_expiry_ != absl::InfiniteFuture()) {
      const absl::Duration left = next_expiry_ - absl::Now();
      timeout = left <= absl::ZeroDuration() ? 0
                                             : static_cast<int>(absl::ToInt64Milliseconds(
                                                   absl::Ceil(left, absl::Milliseconds(1))));
    }
    const int n = epoll_wait(epoll_.get(), events, 64, timeout);
    if (n < 0 && errno != EINTR) {
      Log(LogLevel::kError, "relay: epoll_wait: ", ErrnoText(errno));
      absl::SleepFor(absl::Milliseconds(10));
      continue;
    }
    const absl::Time now = absl::Now();
    for (int i = 0; i < n; ++i) {
      if (events[i].data.ptr == nullptr) {
        uint64_t v;
        (void)read(wake_.get(), &v, sizeof(v));
        {
          std::lock_guard<std::mutex> lock(mu_);
          if (stop_) return;
        }
        Adopt();
        continue;
      }
      Conn* c = static_cast<Conn::End*>(events[i].data.ptr)->conn;
      if (c->closed) continue;
      if (c->handshaking && !Handshake(c)) continue;
      Pump(c, now);
    }
    // Handshakes past their time.
    if (now >= next_expiry_) {
      next_expiry_ = absl::InfiniteFuture();
      std::vector<Conn*> late;
      for (Conn* c : handshaking_) {
        if (now >= c->deadline) {
          late.push_back(c);
        } else {
          next_expiry_ = std::min(next_expiry_, c->deadline);
        }
      }
      for (Conn* c : late) {
        ++tls_failures_;
        Log(LogLevel::kInfo, "TLS handshake with ", c->who, " timed out");
        Close(c, nullptr);
      }
    }
    // What was closed this round (its events in this batch are behind it now).
    for (Conn* c : dead_) conns_.erase(c);
    dead_.clear();
  }
}

}  // namespace fabric
