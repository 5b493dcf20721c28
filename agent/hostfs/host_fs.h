// Every read of a host's sysfs or procfs goes through HostFs, rooted at a directory (`--sysfs`,
// `--procfs`). The same discovery code then runs on a host (/sys), in a DaemonSet (/host/sys) and
// in tests (a generated tree). Paths are relative to the root.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace fabric {

// An open directory below a HostFs root. Reads relative to it walk only the last components,
// which keeps discovery of large hosts cheap.
class HostDir {
 public:
  virtual ~HostDir() = default;
  // Root-relative path of this directory, for messages.
  virtual const std::string& path() const = 0;
  virtual absl::StatusOr<std::string> ReadFile(std::string_view name) const = 0;
  // Reads a sysfs attribute into `buf` without allocating; returns its length. An attribute
  // larger than `size` is an error. For hot loops such as GID tables.
  virtual absl::StatusOr<size_t> ReadSmall(std::string_view name, char* buf, size_t size) const = 0;
  virtual absl::StatusOr<std::vector<std::string>> ListDir(std::string_view name) const = 0;
  virtual bool Exists(std::string_view name) const = 0;
  // A subdirectory, for relative reads below it.
  virtual absl::StatusOr<std::unique_ptr<HostDir>> OpenDir(std::string_view name) const = 0;
};

class HostFs {
 public:
  virtual ~HostFs() = default;

  // The directory this HostFs reads below, as given.
  virtual const std::string& root() const = 0;

  // The whole content of a file. Sysfs attributes are at most a page; procfs files may be larger,
  // so reads are capped (kMaxFileBytes) and a larger file is an error, never a partial answer.
  virtual absl::StatusOr<std::string> ReadFile(std::string_view path) const = 0;

  // Names in a directory, sorted, without "." and "..".
  virtual absl::StatusOr<std::vector<std::string>> ListDir(std::string_view path) const = 0;

  // The target of a symbolic link, as stored.
  virtual absl::StatusOr<std::string> ReadLink(std::string_view path) const = 0;

  // `path` with every symbolic link resolved inside the root: absolute targets are taken as
  // relative to the root and ".." never climbs above it. The result is root-relative, without a
  // leading slash. A dangling link is NotFound.
  virtual absl::StatusOr<std::string> RealPath(std::string_view path) const = 0;

  // Whether `path` exists (symbolic links followed by the kernel).
  virtual bool Exists(std::string_view path) const = 0;

  // Opens a directory for relative reads. Pass a RealPath result so that no link is followed
  // outside the root.
  virtual absl::StatusOr<std::unique_ptr<HostDir>> OpenDir(std::string_view path) const = 0;

  static constexpr size_t kMaxFileBytes = 16 << 20;
};

// Reads the real file system below `root`.
class HostFsImpl final : public HostFs {
 public:
  explicit HostFsImpl(std::string root);

  const std::string& root() const override { return root_; }
  absl::StatusOr<std::string> ReadFile(std::string_view path) const override;
  absl::StatusOr<std::vector<std::string>> ListDir(std::string_view path) const override;
  absl::StatusOr<std::string> ReadLink(std::string_view path) const override;
  absl::StatusOr<std::string> RealPath(std::string_view path) const override;
  bool Exists(std::string_view path) const override;
  absl::StatusOr<std::unique_ptr<HostDir>> OpenDir(std::string_view path) const override;

 private:
  std::string Full(std::string_view path) const;

  std::string root_;
};

// A failed system call of HostFs as a status: absl's code for `err`, "<what> <path>: <strerror>",
// and `err` itself as a payload, so that callers can tell why a read failed (IsTransientReadError)
// without guessing from a code that several errnos share. Test doubles fail reads with it too.
absl::Status ErrnoStatus(int err, std::string_view what, std::string_view path);

// The errno a HostFs call failed with; nullopt when it failed for another reason (a file too
// large, a parse error, an OK status).
std::optional<int> StatusErrno(const absl::Status& s);

// Whether a failed read says nothing about the file, so that a rescan must not take the missing
// value as a fact: the reader ran short (EMFILE, ENFILE, ENOMEM, ENOBUFS), the read failed for
// now (EIO, EAGAIN, EINTR, ETIMEDOUT, or a DeadlineExceeded status), or access was refused
// (EACCES, EPERM). Not transient: evidence that the file is gone (ENOENT, ENOTDIR, ENODEV,
// ENXIO), EINVAL (unused GID attributes, a link that is down), any other errno (an attribute the
// driver does not support) and everything that is not an errno (too large, unparsable).
bool IsTransientReadError(const absl::Status& s);

// Joins root-relative path parts with "/", skipping empty parts.
std::string JoinPath(std::string_view a, std::string_view b);

}  // namespace fabric
