// Sockets for the out-of-band channel and the TCP transport: every blocking step is bounded by a
// deadline and can be cancelled from another thread (ProbeServer::Stop).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "agent/common/fd.h"
#include "agent/fabric/probes/clock.h"
#include "agent/fabric/probes/wire.h"

namespace fabric::probes {

using Fd = ::fabric::UniqueFd;

// Stops a probe from another thread: every wait also polls the eventfd, and the data-path loops
// read the flag.
class Canceller {
 public:
  static absl::StatusOr<std::unique_ptr<Canceller>> Create();
  void Cancel();
  bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }
  int fd() const { return fd_.get(); }

 private:
  explicit Canceller(Fd fd) : fd_(std::move(fd)) {}
  Fd fd_;
  std::atomic<bool> cancelled_{false};
};

// Waits until `fd` has `events` (POLLIN/POLLOUT); DeadlineExceeded naming `what`, or Cancelled.
absl::Status WaitFd(int fd, short events, Deadline deadline, const Canceller* cancel,
                    std::string_view what);

// Connects to host:port within `deadline`. A refused connection (nothing listens) fails at once,
// as perftest does, unless `retry_until` is later: then it is tried again every 100 ms until
// then (a responder that is starting). Any other failure is final.
absl::StatusOr<Fd> ConnectTcp(const std::string& host, uint16_t port, Deadline deadline,
                              const Canceller* cancel, Deadline retry_until = Deadline::At(0));
// Listens on bind:port (empty bind: every address; port 0: any free port).
absl::StatusOr<Fd> ListenTcp(const std::string& bind, uint16_t port);
// accept4 that survives descriptor exhaustion. On EMFILE/ENFILE the kernel leaves the connection
// pending, so a poll loop would spin on it: the reserve descriptor is released, the connection
// accepted and closed at once (its client sees the connection closed and may retry), and the
// reserve taken again.
class Acceptor {
 public:
  Acceptor();
  Acceptor(const Acceptor&) = delete;
  Acceptor& operator=(const Acceptor&) = delete;

  enum class Result {
    kAccepted,   // *fd is a new connection (non-blocking, close-on-exec).
    kNone,       // Nothing pending.
    kShed,       // Out of descriptors: one pending connection was closed.
    kExhausted,  // Out of descriptors and no reserve to shed with: back off before retrying.
  };
  Result Accept(int listen_fd, int* fd);

 private:
  Fd reserve_;
};

// Waits for and accepts one connection; through descriptor exhaustion it sheds and backs off
// with `acceptor` instead of failing.
absl::StatusOr<Fd> AcceptTcp(int listen_fd, Deadline deadline, const Canceller* cancel,
                             Acceptor* acceptor);
uint16_t LocalPort(int fd);
std::string PeerAddress(int fd);  // numeric host
std::string LocalAddress(int fd);
// "ADDR:PORT" ("[V6]:PORT") of each end: one connection as either side names it.
std::string LocalEndpoint(int fd);
std::string PeerEndpoint(int fd);

absl::Status WriteAll(int fd, const void* data, size_t size, Deadline deadline,
                      const Canceller* cancel, std::string_view what);
// EOF is Unavailable("peer closed the connection").
absl::Status ReadAll(int fd, void* data, size_t size, Deadline deadline, const Canceller* cancel,
                     std::string_view what);

// The control connection of one test: framed messages, each receive bounded by `timeout`.
class Channel {
 public:
  Channel(Fd fd, absl::Duration timeout, const Canceller* cancel)
      : fd_(std::move(fd)), timeout_(timeout), cancel_(cancel) {}
  int fd() const { return fd_.get(); }
  absl::Duration timeout() const { return timeout_; }
  const Canceller* cancel() const { return cancel_; }

  absl::Status Send(const wire::Message& m);
  // Any message; `what` names the step for errors.
  absl::StatusOr<wire::Message> Recv(std::string_view what, Deadline deadline);
  absl::StatusOr<wire::Message> Recv(std::string_view what) {
    return Recv(what, Deadline::In(timeout_));
  }
  // A message of type T. A Reject becomes FailedPrecondition("peer refused: ..."), a failed Done
  // Aborted("peer failed: ..."); any other type is an error.
  template <typename T>
  absl::StatusOr<T> RecvAs(std::string_view what, Deadline deadline);
  template <typename T>
  absl::StatusOr<T> RecvAs(std::string_view what) {
    return RecvAs<T>(what, Deadline::In(timeout_));
  }
  // Whether a message (or EOF) is waiting, without blocking.
  bool Readable() const;
  // What is waiting, looked at without consuming it. A successful Done lets a side still
  // draining its last completions go on waiting for them instead of failing at once.
  enum class Pending { kNothing, kPartial, kSuccess, kOther };
  Pending Peek() const;

 private:
  absl::Status Unexpected(const wire::Message& m, wire::Type want, std::string_view what) const;

  Fd fd_;
  absl::Duration timeout_;
  const Canceller* cancel_;
};

template <typename T>
absl::StatusOr<T> Channel::RecvAs(std::string_view what, Deadline deadline) {
  absl::StatusOr<wire::Message> m = Recv(what, deadline);
  if (!m.ok()) return m.status();
  if (T* t = std::get_if<T>(&*m)) {
    if constexpr (std::is_same_v<T, wire::Done>) {
      if (!t->ok) return absl::AbortedError(absl::StrCat("peer failed: ", t->message));
    }
    return std::move(*t);
  }
  return Unexpected(*m, wire::TypeOf(wire::Message(T{})), what);
}

}  // namespace fabric::probes
