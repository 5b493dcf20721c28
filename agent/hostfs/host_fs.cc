#include "agent/hostfs/host_fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <deque>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "agent/common/fd.h"
#include "agent/common/strings.h"

namespace fabric {
namespace {

absl::Status Errno(int err, absl::string_view what, absl::string_view path) {
  return ErrnoStatus(err, std::string_view(what.data(), what.size()),
                     std::string_view(path.data(), path.size()));
}

constexpr char kErrnoPayload[] = "type.fabric.io/errno";

constexpr int kMaxSymlinks = 40;  // As the kernel's MAXSYMLINKS.

// Reads a whole file opened relative to `dirfd` (AT_FDCWD for absolute paths). `attribute`:
// the file is a sysfs attribute, which the kernel renders whole into at most one page, so a
// read shorter than the page is the end of it and the usual second read() that returns 0 can
// be skipped (a third of discovery's system calls). procfs files are read to a real EOF, as
// seq_file may return short reads before the end.
absl::StatusOr<std::string> ReadAt(int dirfd, const char* name, std::string_view shown,
                                   bool attribute) {
  UniqueFd fd(::openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (fd.get() < 0) return Errno(errno, "open", Av(shown));
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno(errno, "read", Av(shown));
    }
    if (n == 0) break;
    if (attribute && out.empty() && static_cast<size_t>(n) < sizeof(buf)) {
      out.assign(buf, static_cast<size_t>(n));
      break;
    }
    if (out.size() + static_cast<size_t>(n) > HostFs::kMaxFileBytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("read ", Av(shown), ": larger than ", HostFs::kMaxFileBytes, " bytes"));
    }
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> ListAt(int dirfd, const char* name,
                                                std::string_view shown) {
  UniqueFd fd(::openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return Errno(errno, "opendir", Av(shown));
  DIR* dir = ::fdopendir(fd.get());
  if (dir == nullptr) {
    const int err = errno;
    fd.reset();
    return Errno(err, "opendir", Av(shown));
  }
  fd.release();  // the DIR's now: closedir closes it
  std::vector<std::string> names;
  errno = 0;
  while (struct dirent* ent = ::readdir(dir)) {
    std::string_view entry = ent->d_name;
    if (entry == "." || entry == "..") continue;
    names.emplace_back(entry);
  }
  const int err = errno;
  ::closedir(dir);
  if (err != 0) return Errno(err, "readdir", Av(shown));
  std::sort(names.begin(), names.end());
  return names;
}

class HostDirImpl final : public HostDir {
 public:
  HostDirImpl(int fd, std::string path, std::string full)
      : fd_(fd), path_(std::move(path)), full_(std::move(full)) {}
  const std::string& path() const override { return path_; }
  absl::StatusOr<std::string> ReadFile(std::string_view name) const override {
    const std::string n(name);
    return ReadAt(fd_.get(), n.c_str(), JoinPath(full_, name), /*attribute=*/true);
  }
  absl::StatusOr<size_t> ReadSmall(std::string_view name, char* buf, size_t size) const override {
    char n[256];
    if (name.size() >= sizeof(n)) return absl::InvalidArgumentError("name too long");
    name.copy(n, name.size());
    n[name.size()] = 0;
    UniqueFd fd(::openat(fd_.get(), n, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
    if (fd.get() < 0) return Errno(errno, "open", JoinPath(full_, name));
    for (;;) {
      ssize_t got = ::read(fd.get(), buf, size);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) return Errno(errno, "read", JoinPath(full_, name));
      // As in ReadAt: an attribute shorter than the buffer has been read whole.
      if (static_cast<size_t>(got) == size) {
        return absl::OutOfRangeError(
            absl::StrCat("read ", JoinPath(full_, name), ": longer than ", size, " bytes"));
      }
      return static_cast<size_t>(got);
    }
  }
  absl::StatusOr<std::vector<std::string>> ListDir(std::string_view name) const override {
    const std::string n = name.empty() ? std::string(".") : std::string(name);
    return ListAt(fd_.get(), n.c_str(), JoinPath(full_, name));
  }
  bool Exists(std::string_view name) const override {
    struct stat st;
    return ::fstatat(fd_.get(), std::string(name).c_str(), &st, 0) == 0;
  }
  absl::StatusOr<std::unique_ptr<HostDir>> OpenDir(std::string_view name) const override {
    int fd = ::openat(fd_.get(), std::string(name).c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return Errno(errno, "opendir", JoinPath(full_, name));
    return std::unique_ptr<HostDir>(
        new HostDirImpl(fd, JoinPath(path_, name), JoinPath(full_, name)));
  }

 private:
  UniqueFd fd_;
  std::string path_;
  std::string full_;
};

}  // namespace

absl::Status ErrnoStatus(int err, std::string_view what, std::string_view path) {
  absl::Status s = absl::ErrnoToStatus(err, absl::StrCat(Av(what), " ", Av(path)));
  s.SetPayload(kErrnoPayload, absl::Cord(absl::StrCat(err)));
  return s;
}

std::optional<int> StatusErrno(const absl::Status& s) {
  const auto payload = s.GetPayload(kErrnoPayload);  // absl::optional here
  int err;
  if (!payload || !absl::SimpleAtoi(std::string(*payload), &err)) return std::nullopt;
  return err;
}

bool IsTransientReadError(const absl::Status& s) {
  if (absl::IsDeadlineExceeded(s)) return true;
  const std::optional<int> err = StatusErrno(s);
  if (!err) return false;
  switch (*err) {
    case EMFILE:
    case ENFILE:
    case ENOMEM:
    case ENOBUFS:
    case EIO:
    case EAGAIN:
    case EINTR:
    case ETIMEDOUT:
    case EACCES:
    case EPERM:
      return true;
    default:
      return false;
  }
}

std::string JoinPath(std::string_view a, std::string_view b) {
  while (!a.empty() && a.back() == '/') a.remove_suffix(1);
  while (!b.empty() && b.front() == '/') b.remove_prefix(1);
  if (a.empty()) return std::string(b);
  if (b.empty()) return std::string(a);
  return absl::StrCat(Av(a), "/", Av(b));
}

HostFsImpl::HostFsImpl(std::string root) : root_(std::move(root)) {
  while (root_.size() > 1 && root_.back() == '/') root_.pop_back();
}

std::string HostFsImpl::Full(std::string_view path) const {
  while (!path.empty() && path.front() == '/') path.remove_prefix(1);
  if (path.empty()) return root_;
  if (root_ == "/") return absl::StrCat("/", Av(path));
  return absl::StrCat(root_, "/", Av(path));
}

absl::StatusOr<std::string> HostFsImpl::ReadFile(std::string_view path) const {
  const std::string full = Full(path);
  return ReadAt(AT_FDCWD, full.c_str(), full, /*attribute=*/false);
}

absl::StatusOr<std::vector<std::string>> HostFsImpl::ListDir(std::string_view path) const {
  const std::string full = Full(path);
  return ListAt(AT_FDCWD, full.c_str(), full);
}

absl::StatusOr<std::string> HostFsImpl::ReadLink(std::string_view path) const {
  const std::string full = Full(path);
  char buf[4096];
  ssize_t n = ::readlink(full.c_str(), buf, sizeof(buf));
  if (n < 0) return Errno(errno, "readlink", full);
  if (static_cast<size_t>(n) == sizeof(buf)) {
    return absl::OutOfRangeError(absl::StrCat("readlink ", full, ": target too long"));
  }
  return std::string(buf, static_cast<size_t>(n));
}

absl::StatusOr<std::string> HostFsImpl::RealPath(std::string_view path) const {
  // Walk component by component so that links resolve inside the root, as the kernel would
  // resolve them if the root were "/".
  std::deque<std::string> todo;
  for (absl::string_view part : absl::StrSplit(Av(path), '/', absl::SkipEmpty())) {
    todo.emplace_back(part);
  }
  std::vector<std::string> resolved;
  std::string current;  // resolved, joined
  int links = 0;
  while (!todo.empty()) {
    std::string part = std::move(todo.front());
    todo.pop_front();
    if (part == ".") continue;
    if (part == "..") {
      if (!resolved.empty()) {
        resolved.pop_back();
        current = absl::StrJoin(resolved, "/");
      }
      continue;
    }
    std::string candidate = current.empty() ? part : absl::StrCat(current, "/", part);
    const std::string full = Full(candidate);
    struct stat st;
    if (::lstat(full.c_str(), &st) != 0) return Errno(errno, "lstat", full);
    if (S_ISLNK(st.st_mode)) {
      if (++links > kMaxSymlinks) {
        return absl::FailedPreconditionError(
            absl::StrCat("resolve ", Full(path), ": too many levels of symbolic links"));
      }
      absl::StatusOr<std::string> target = ReadLink(candidate);
      if (!target.ok()) return target.status();
      std::vector<std::string> parts = absl::StrSplit(*target, '/', absl::SkipEmpty());
      todo.insert(todo.begin(), parts.begin(), parts.end());
      if (!target->empty() && target->front() == '/') {
        resolved.clear();
        current.clear();
      }
      continue;
    }
    if (!todo.empty() && !S_ISDIR(st.st_mode)) {
      return absl::FailedPreconditionError(
          absl::StrCat("resolve ", Full(path), ": ", full, " is not a directory"));
    }
    resolved.push_back(std::move(part));
    current = std::move(candidate);
  }
  return current;
}

bool HostFsImpl::Exists(std::string_view path) const {
  struct stat st;
  return ::stat(Full(path).c_str(), &st) == 0;
}

absl::StatusOr<std::unique_ptr<HostDir>> HostFsImpl::OpenDir(std::string_view path) const {
  std::string full = Full(path);
  int fd = ::open(full.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Errno(errno, "opendir", full);
  return std::make_unique<HostDirImpl>(fd, std::string(path), std::move(full));
}

}  // namespace fabric
