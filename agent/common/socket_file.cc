#include "agent/common/socket_file.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "agent/common/errno.h"
#include "agent/common/fd.h"
#include "agent/common/strings.h"

namespace fabric {

absl::Status ClearStaleSocket(const std::string& path, std::string_view flag) {
  struct stat sb;
  if (lstat(path.c_str(), &sb) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(path, ": ", ErrnoText(errno)));
  }
  if (!S_ISSOCK(sb.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " exists and is not a socket; refusing to replace it"));
  }
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("socket path too long: ", path));
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  // Non-blocking, so a listener with a full backlog answers EAGAIN instead of stalling start-up.
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return absl::InternalError(absl::StrCat("socket: ", ErrnoText(errno)));
  int rc;
  do {
    rc = connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  } while (rc != 0 && errno == EINTR);
  const int err = rc == 0 ? 0 : errno;
  fd.reset();
  if (err == ECONNREFUSED) {
    // Stale: nothing listens. Gone already (ENOENT) is fine too.
    if (unlink(path.c_str()) != 0 && errno != ENOENT) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot remove the stale socket ", path, ": ", ErrnoText(errno)));
    }
    return absl::OkStatus();
  }
  if (err == ENOENT) return absl::OkStatus();
  // Connected, EAGAIN (backlog full) or EPROTOTYPE (a listener of another socket type): live.
  if (err == 0 || err == EAGAIN || err == EPROTOTYPE) {
    return absl::AlreadyExistsError(absl::StrCat("another process is listening on ", path,
                                                 "; stop it or set ", Av(flag),
                                                 " to another path"));
  }
  return absl::FailedPreconditionError(
      absl::StrCat("cannot tell whether something listens on ", path, " (connect: ", ErrnoText(err),
                   "); remove it or set ", Av(flag), " to another path"));
}

absl::StatusOr<BoundSocketFile> RecordBoundSocket(const std::string& path) {
  struct stat sb;
  if (lstat(path.c_str(), &sb) != 0) {
    return absl::InternalError(absl::StrCat("lstat ", path, ": ", ErrnoText(errno)));
  }
  return BoundSocketFile{path, sb.st_dev, sb.st_ino};
}

bool RemoveBoundSocket(const BoundSocketFile& f) {
  if (f.path.empty()) return false;
  struct stat sb;
  // Between this check and unlink another process could still replace the file; the window is
  // that of two system calls, where it was the whole lifetime of the agent.
  if (lstat(f.path.c_str(), &sb) != 0 || sb.st_dev != f.dev || sb.st_ino != f.ino) return false;
  return unlink(f.path.c_str()) == 0;
}

absl::StatusOr<BoundSocketFile> BindSocketWithMode(
    const std::string& path, mode_t mode,
    absl::FunctionRef<absl::Status(const std::string& private_path)> bind) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  // A short name: the private path is the longer only for a name under 14 bytes.
  std::string dir =
      ((parent.empty() ? std::filesystem::path(".") : parent) / ".sockXXXXXX").string();
  if (mkdtemp(dir.data()) == nullptr) {  // Mode 0700: only this user reaches what is inside.
    return absl::UnavailableError(absl::StrCat("cannot bind ", path, ": a private directory in ",
                                               parent.string(), ": ", ErrnoText(errno)));
  }
  const std::string tmp = dir + "/s";
  if (tmp.size() >= sizeof(sockaddr_un::sun_path)) {
    (void)rmdir(dir.c_str());
    return absl::InvalidArgumentError(absl::StrCat("cannot bind ", path, ": its private path ", tmp,
                                                   " is longer than a Unix socket takes"));
  }
  absl::Status s = bind(tmp);
  if (s.ok() && chmod(tmp.c_str(), mode) != 0) {
    s = absl::UnavailableError(absl::StrCat("chmod ", tmp, ": ", ErrnoText(errno)));
  }
  if (s.ok() && rename(tmp.c_str(), path.c_str()) != 0) {
    s = absl::UnavailableError(absl::StrCat("rename to ", path, ": ", ErrnoText(errno)));
  }
  (void)unlink(tmp.c_str());  // Left only by a failure.
  (void)rmdir(dir.c_str());
  if (!s.ok()) return s;
  return RecordBoundSocket(path);
}

}  // namespace fabric
