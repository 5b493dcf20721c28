// An owned file descriptor: closed on every path out unless released. The one fd owner of the
// project (host reads, sockets, epoll and event fds).
#pragma once

#include <unistd.h>

#include <cerrno>
#include <utility>

namespace fabric {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  // Closes the descriptor held (if any) and takes `fd`. close(2)'s result is ignored on purpose:
  // after EINTR or EIO the descriptor is gone on Linux, and there is nothing to retry.
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }
  // Closes the descriptor now and reports close(2)'s result, for a file just written (where a
  // failed close can mean lost data) or a close worth a warning: 0, or close(2)'s errno (errno
  // is left set too). 0 when none is held. The descriptor is given up either way.
  int Close() {
    const int fd = std::exchange(fd_, -1);
    if (fd < 0 || ::close(fd) == 0) return 0;
    return errno;
  }

 private:
  int fd_ = -1;
};

}  // namespace fabric
