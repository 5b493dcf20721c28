#include "agent/daemon/transport/read_guard.h"

#include <dlfcn.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <memory>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "agent/common/log.h"
#include "agent/daemon/transport/h2_guard.h"

namespace fabric::read_guard {
namespace {

struct Entry {
  Entry(std::string name, double per_second, double burst, const struct stat& st)
      : guard(per_second, burst), who(std::move(name)), dev(st.st_dev), ino(st.st_ino) {}
  H2Guard guard;
  std::string who;
  // The socket guarded: gRPC closes a connection's descriptor without telling us, and the number
  // may come back as anything (a netlink socket). Checked before the guard acts on a verdict.
  dev_t dev;
  ino_t ino;
};

struct State {
  absl::Mutex mu;
  absl::flat_hash_map<int, std::unique_ptr<Entry>> by_fd ABSL_GUARDED_BY(mu);
  std::atomic<size_t> size{0};  // by_fd.size(): reads skip the lock while nothing is guarded.
  std::atomic<uint64_t> floods{0};
};

// Never destroyed: gRPC's threads may still read while the process exits.
State& S() {
  static State* s = new State();
  return *s;
}

// After a read of `n` > 0 bytes on `fd` into `msg`: `n`, or -1 (ECONNRESET) when the read
// takes the connection over its reset budget.
ssize_t Inspect(int fd, const msghdr* msg, ssize_t n) {
  State& s = S();
  std::string flooded;
  {
    absl::MutexLock lock(&s.mu);
    auto it = s.by_fd.find(fd);
    if (it == s.by_fd.end()) return n;
    Entry& e = *it->second;
    const absl::Time now = absl::Now();
    size_t left = static_cast<size_t>(n);
    H2Guard::Verdict v = H2Guard::Verdict::kOk;
    for (size_t i = 0; i < msg->msg_iovlen && left > 0 && v == H2Guard::Verdict::kOk; ++i) {
      const size_t len = std::min(left, msg->msg_iov[i].iov_len);
      v = e.guard.Feed(std::string_view(static_cast<const char*>(msg->msg_iov[i].iov_base), len),
                       now);
      left -= len;
    }
    if (v == H2Guard::Verdict::kOk) return n;
    struct stat st {};
    const bool same = fstat(fd, &st) == 0 && st.st_dev == e.dev && st.st_ino == e.ino;
    if (same && v == H2Guard::Verdict::kResetFlood) flooded = std::move(e.who);
    // A stale entry goes; so does one that saw no HTTP/2 (gRPC closes that connection itself).
    s.by_fd.erase(it);
    s.size.store(s.by_fd.size(), std::memory_order_relaxed);
    if (flooded.empty()) return n;
  }
  s.floods.fetch_add(1, std::memory_order_relaxed);
  shutdown(fd, SHUT_RDWR);  // The client sees its connection end; gRPC sees the error below.
  Log(LogLevel::kWarning, "closed the connection of ", flooded,
      ": it reset streams faster than the rapid-reset budget");
  errno = ECONNRESET;
  return -1;
}

using RecvmsgFn = ssize_t (*)(int, msghdr*, int);

RecvmsgFn Next() {
  static const RecvmsgFn next = reinterpret_cast<RecvmsgFn>(dlsym(RTLD_NEXT, "recvmsg"));
  return next;
}

}  // namespace

bool Active() { return dlsym(RTLD_DEFAULT, "recvmsg") == reinterpret_cast<void*>(&::recvmsg); }

void Guard(int fd, std::string who, double resets_per_second, double reset_burst) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return;  // Not open: gRPC will fail it anyway.
  State& s = S();
  absl::MutexLock lock(&s.mu);
  s.by_fd[fd] = std::make_unique<Entry>(std::move(who), resets_per_second, reset_burst, st);
  s.size.store(s.by_fd.size(), std::memory_order_relaxed);
}

void Forget(int fd) {
  State& s = S();
  if (s.size.load(std::memory_order_relaxed) == 0) return;
  absl::MutexLock lock(&s.mu);
  s.by_fd.erase(fd);
  s.size.store(s.by_fd.size(), std::memory_order_relaxed);
}

uint64_t ResetFloods() { return S().floods.load(std::memory_order_relaxed); }

}  // namespace fabric::read_guard

// The process's recvmsg (see read_guard.h). Peeks and error-queue reads carry no client bytes.
extern "C" ssize_t recvmsg(int fd, msghdr* msg, int flags) {
  const fabric::read_guard::RecvmsgFn next = fabric::read_guard::Next();
  if (next == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  const ssize_t n = next(fd, msg, flags);
  if (n <= 0 || (flags & (MSG_PEEK | MSG_ERRQUEUE)) != 0 ||
      fabric::read_guard::S().size.load(std::memory_order_relaxed) == 0) {
    return n;
  }
  return fabric::read_guard::Inspect(fd, msg, n);
}
