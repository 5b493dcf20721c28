// The CDI spec file in its directory (/var/run/cdi): replaced atomically, only when its bytes
// change, so that runtimes re-reading the directory never see a half-written spec and an
// unchanged inventory costs no write at all.
#pragma once

#include <sys/types.h>

#include <string>

#include "absl/status/statusor.h"

namespace fabric::cdi {

// Where runtimes look (podman 4.3 only here and in /etc/cdi), and the file: "<vendor>-<class>".
inline constexpr char kDefaultDir[] = "/var/run/cdi";
inline constexpr char kSpecFile[] = "fabric.io-rdma.json";

class SpecWriter {
 public:
  // `dir`: the CDI directory; the file is kSpecFile in it.
  explicit SpecWriter(std::string dir);

  // Writes `json` when the file does not hold it (ReplaceFileIfChanged: a dot file, fsync,
  // rename); returns whether it wrote. When `json` is what this writer wrote last and the file is
  // still that one (same inode, size and mtime), nothing is read. A missing directory is created
  // (mode 0755, not its parents). Errors name the path and the errno's text: NotFound (no such
  // directory and none can be made), FailedPrecondition (not a directory, a read-only file
  // system), ResourceExhausted (ENOSPC), PermissionDenied. The old file stays.
  absl::StatusOr<bool> Write(const std::string& json);
  // Removes the file (a host with no RDMA device left has no spec); whether it was there.
  absl::StatusOr<bool> Remove();

  const std::string& path() const { return path_; }

 private:
  bool Unchanged(const std::string& json) const;

  const std::string dir_;
  const std::string path_;
  std::string written_;  // What this writer last wrote (or found there); empty: nothing yet.
  ino_t ino_ = 0;
  off_t size_ = 0;
  struct timespec mtime_ = {};
};

}  // namespace fabric::cdi
