#include "agent/fabric/probes/net.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <span>
#include <variant>

#include "absl/strings/str_cat.h"
#include "agent/common/errno.h"
#include "agent/common/status.h"
#include "agent/common/strings.h"

namespace fabric::probes {
namespace {

absl::Status SetNonBlocking(int fd) {
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    return absl::InternalError(absl::StrCat("fcntl: ", ErrnoText(errno)));
  }
  return absl::OkStatus();
}

void TuneSocket(int fd) {
  // Ping-pong messages must leave at once; Nagle would hold every second one for an ACK.
  const int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

std::string Numeric(const sockaddr* sa, socklen_t len) {
  char host[NI_MAXHOST];
  if (getnameinfo(sa, len, host, sizeof host, nullptr, 0, NI_NUMERICHOST) != 0) return "?";
  // Dual-stack listeners see IPv4 peers as ::ffff:a.b.c.d; print (and bind rdma_cm to) a.b.c.d.
  std::string s = host;
  if (s.rfind("::ffff:", 0) == 0 && s.find('.') != std::string::npos) return s.substr(7);
  return s;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Canceller>> Canceller::Create() {
  const int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd < 0) return absl::InternalError(absl::StrCat("eventfd: ", ErrnoText(errno)));
  return std::unique_ptr<Canceller>(new Canceller(Fd(fd)));
}

void Canceller::Cancel() {
  cancelled_.store(true, std::memory_order_relaxed);
  const uint64_t one = 1;
  // The eventfd stays readable from now on: every later wait returns at once.
  (void)!write(fd_.get(), &one, sizeof one);
}

absl::Status WaitFd(int fd, short events, Deadline deadline, const Canceller* cancel,
                    std::string_view what) {
  for (;;) {
    if (cancel != nullptr && cancel->cancelled()) return absl::CancelledError("stopped");
    pollfd fds[2] = {{fd, events, 0}, {cancel != nullptr ? cancel->fd() : -1, POLLIN, 0}};
    const int ms = deadline.RemainingMs();
    if (ms == 0) return absl::DeadlineExceededError(absl::StrCat("timed out ", Av(what)));
    const int n = poll(fds, cancel != nullptr ? 2 : 1, ms);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(absl::StrCat("poll: ", ErrnoText(errno)));
    }
    if (cancel != nullptr && (fds[1].revents & POLLIN) != 0) {
      return absl::CancelledError("stopped");
    }
    // Errors and hang-ups count as ready: the following read or write reports them.
    if (fds[0].revents != 0) return absl::OkStatus();
  }
}

absl::StatusOr<Fd> ConnectTcp(const std::string& host, uint16_t port, Deadline deadline,
                              const Canceller* cancel, Deadline retry_until) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &res); rc != 0) {
    return absl::NotFoundError(absl::StrCat("cannot resolve ", host, ": ", gai_strerror(rc)));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owned(res, freeaddrinfo);
  // Retrying refusals may outlast the step timeout; a connect in flight is bounded by both.
  const Deadline until = Deadline::At(std::max(deadline.ns(), retry_until.ns()));
  const std::string where = absl::StrCat(
      host.find(':') != std::string::npos ? absl::StrCat("[", host, "]") : host, ":", port);
  std::string last = "no address";
  bool was_refused = false;  // by any attempt so far
  for (;;) {
    bool refused = false, timed_out = false;
    for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
      Fd fd(socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
      if (!fd.valid()) {
        last = absl::StrCat("socket: ", ErrnoText(errno));
        continue;
      }
      if (absl::Status s = SetNonBlocking(fd.get()); !s.ok()) return s;
      int err = 0;
      if (connect(fd.get(), ai->ai_addr, ai->ai_addrlen) < 0) {
        err = errno;
        if (err == EINPROGRESS) {
          absl::Status w = WaitFd(fd.get(), POLLOUT, until, cancel, "connecting");
          if (absl::IsDeadlineExceeded(w)) {
            timed_out = true;
            break;
          }
          if (!w.ok()) return w;
          socklen_t len = sizeof err;
          if (getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) < 0) err = errno;
        }
      }
      if (err == 0) {
        TuneSocket(fd.get());
        return fd;
      }
      refused = refused || err == ECONNREFUSED;
      last = ErrnoText(err);
    }
    was_refused = was_refused || refused;
    if (timed_out) {
      // The deadline caught a retry in flight: a peer that refused until then still reads as
      // refusing, not as silent.
      if (!was_refused) {
        return absl::DeadlineExceededError(absl::StrCat("timed out connecting to ", where));
      }
      break;
    }
    if (!refused || retry_until.Passed()) break;
    if (cancel != nullptr && cancel->cancelled()) return absl::CancelledError("stopped");
    usleep(100 * 1000);
    if (retry_until.Passed()) break;
  }
  if (was_refused) {
    return absl::UnavailableError(
        absl::StrCat("nothing listens on ", where,
                     retry_until.ns() > 0 ? ", still, when the retries ran out" : "",
                     " (is the peer's responder running?)"));
  }
  return absl::UnavailableError(absl::StrCat("cannot connect to ", where, ": ", last));
}

absl::StatusOr<Fd> ListenTcp(const std::string& bind_addr, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = bind_addr.empty() ? AF_INET6 : AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  int rc =
      getaddrinfo(bind_addr.empty() ? nullptr : bind_addr.c_str(), service.c_str(), &hints, &res);
  if (rc != 0 && bind_addr.empty()) {
    // No IPv6 on this host: every IPv4 address.
    hints.ai_family = AF_INET;
    rc = getaddrinfo(nullptr, service.c_str(), &hints, &res);
  }
  if (rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot resolve listen address '", bind_addr, "': ", gai_strerror(rc)));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owned(res, freeaddrinfo);
  std::string last;
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    Fd fd(socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd.valid()) {
      last = ErrnoText(errno);
      continue;
    }
    const int one = 1;
    (void)setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (ai->ai_family == AF_INET6) {
      const int zero = 0;  // IPv4 clients too
      (void)setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    }
    if (bind(fd.get(), ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd.get(), 16) < 0) {
      last = ErrnoText(errno);
      continue;
    }
    if (absl::Status s = SetNonBlocking(fd.get()); !s.ok()) return s;
    return fd;
  }
  return absl::UnavailableError(absl::StrCat("cannot listen on port ", port, ": ", last));
}

Acceptor::Acceptor() { reserve_.reset(open("/dev/null", O_RDONLY | O_CLOEXEC)); }

Acceptor::Result Acceptor::Accept(int listen_fd, int* fd) {
  for (;;) {
    *fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (*fd >= 0) {
      // Take it back.
      if (!reserve_.valid()) reserve_.reset(open("/dev/null", O_RDONLY | O_CLOEXEC));
      return Result::kAccepted;
    }
    const int err = errno;
    if (err == EINTR || err == ECONNABORTED) continue;
    if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
      if (!reserve_.valid()) return Result::kExhausted;
      reserve_.reset();
      Fd victim(accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC));
      const bool shed = victim.valid();
      victim.reset();  // before the reserve is taken again: it needs the slot
      reserve_.reset(open("/dev/null", O_RDONLY | O_CLOEXEC));
      return shed ? Result::kShed : Result::kExhausted;
    }
    return Result::kNone;  // EAGAIN, or an error that belongs to one connection only.
  }
}

absl::StatusOr<Fd> AcceptTcp(int listen_fd, Deadline deadline, const Canceller* cancel,
                             Acceptor* acceptor) {
  for (;;) {
    if (absl::Status s = WaitFd(listen_fd, POLLIN, deadline, cancel, "waiting for a client");
        !s.ok()) {
      return s;
    }
    int raw = -1;
    switch (acceptor->Accept(listen_fd, &raw)) {
      case Acceptor::Result::kAccepted: {
        Fd fd(raw);
        TuneSocket(fd.get());
        return fd;
      }
      case Acceptor::Result::kNone:
      case Acceptor::Result::kShed:
        break;
      case Acceptor::Result::kExhausted: {
        // Nothing to shed with: wait for descriptors to come back (or the cancel).
        pollfd p{cancel != nullptr ? cancel->fd() : -1, POLLIN, 0};
        (void)poll(&p, 1, 100);
        if (cancel != nullptr && cancel->cancelled()) return absl::CancelledError("stopped");
        break;
      }
    }
  }
}

uint16_t LocalPort(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) < 0) return 0;
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return 0;
}

std::string PeerAddress(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) < 0) return "?";
  return Numeric(reinterpret_cast<sockaddr*>(&ss), len);
}

namespace {

std::string HostPort(const std::string& address, uint16_t port) {
  return absl::StrCat(
      address.find(':') != std::string::npos ? absl::StrCat("[", address, "]") : address, ":",
      port);
}

uint16_t PeerPort(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) < 0) return 0;
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return 0;
}

}  // namespace

std::string LocalEndpoint(int fd) { return HostPort(LocalAddress(fd), LocalPort(fd)); }
std::string PeerEndpoint(int fd) { return HostPort(PeerAddress(fd), PeerPort(fd)); }

std::string LocalAddress(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) < 0) return "?";
  return Numeric(reinterpret_cast<sockaddr*>(&ss), len);
}

absl::Status WriteAll(int fd, const void* data, size_t size, Deadline deadline,
                      const Canceller* cancel, std::string_view what) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = send(fd, p, size, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      FABRIC_RETURN_IF_ERROR(WaitFd(fd, POLLOUT, deadline, cancel, what));
      continue;
    }
    return absl::UnavailableError(
        absl::StrCat(Av(what), ": connection to the peer lost (", ErrnoText(errno), ")"));
  }
  return absl::OkStatus();
}

absl::Status ReadAll(int fd, void* data, size_t size, Deadline deadline, const Canceller* cancel,
                     std::string_view what) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t n = recv(fd, p, size, 0);
    if (n > 0) {
      p += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) {
      return absl::UnavailableError(absl::StrCat(Av(what), ": the peer closed the connection"));
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      FABRIC_RETURN_IF_ERROR(WaitFd(fd, POLLIN, deadline, cancel, what));
      continue;
    }
    return absl::UnavailableError(
        absl::StrCat(Av(what), ": connection to the peer lost (", ErrnoText(errno), ")"));
  }
  return absl::OkStatus();
}

absl::Status Channel::Send(const wire::Message& m) {
  const std::vector<uint8_t> frame = wire::Encode(m);
  return WriteAll(fd_.get(), frame.data(), frame.size(), Deadline::In(timeout_), cancel_,
                  absl::StrCat("sending ", Av(wire::TypeName(wire::TypeOf(m)))));
}

absl::StatusOr<wire::Message> Channel::Recv(std::string_view what, Deadline deadline) {
  uint8_t head[wire::kHeaderSize];
  const std::string step = absl::StrCat("waiting for ", Av(what));
  FABRIC_RETURN_IF_ERROR(ReadAll(fd_.get(), head, sizeof head, deadline, cancel_, step));
  absl::StatusOr<wire::Header> h = wire::DecodeHeader(head);
  if (!h.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad message from the peer: ", h.status().message()));
  }
  std::vector<uint8_t> body(h->length);
  FABRIC_RETURN_IF_ERROR(ReadAll(fd_.get(), body.data(), body.size(), deadline, cancel_, step));
  absl::StatusOr<wire::Message> m = wire::DecodeBody(h->type, body);
  if (!m.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad message from the peer: ", m.status().message()));
  }
  return m;
}

bool Channel::Readable() const {
  pollfd p{fd_.get(), POLLIN, 0};
  return poll(&p, 1, 0) > 0;
}

Channel::Pending Channel::Peek() const {
  // A Done's body holds a flag, a count and at most kMaxText bytes of message.
  uint8_t buf[wire::kHeaderSize + 2 * wire::kMaxText];
  const ssize_t n = recv(fd_.get(), buf, sizeof buf, MSG_PEEK | MSG_DONTWAIT);
  if (n < 0) {
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? Pending::kNothing
                                                                     : Pending::kOther;
  }
  if (n == 0) return Pending::kOther;  // EOF
  const size_t got = static_cast<size_t>(n);
  if (got < wire::kHeaderSize) return Pending::kPartial;
  absl::StatusOr<wire::Header> h = wire::DecodeHeader(std::span(buf, wire::kHeaderSize));
  if (!h.ok() || h->type != wire::Type::kDone) return Pending::kOther;
  if (wire::kHeaderSize + h->length > sizeof buf) return Pending::kOther;
  if (got < wire::kHeaderSize + h->length) return Pending::kPartial;
  absl::StatusOr<wire::Message> m =
      wire::DecodeBody(h->type, std::span(buf + wire::kHeaderSize, h->length));
  if (!m.ok()) return Pending::kOther;
  return std::get<wire::Done>(*m).ok ? Pending::kSuccess : Pending::kOther;
}

absl::Status Channel::Unexpected(const wire::Message& m, wire::Type want,
                                 std::string_view what) const {
  if (const auto* r = std::get_if<wire::Reject>(&m)) {
    return absl::FailedPreconditionError(absl::StrCat("peer refused: ", r->reason));
  }
  if (const auto* d = std::get_if<wire::Done>(&m); d != nullptr && !d->ok) {
    return absl::AbortedError(absl::StrCat("peer failed: ", d->message));
  }
  return absl::InvalidArgumentError(absl::StrCat("expected ", Av(wire::TypeName(want)), " (",
                                                 Av(what), "), the peer sent ",
                                                 Av(wire::TypeName(wire::TypeOf(m)))));
}

}  // namespace fabric::probes
