// A file the agent keeps for other programs to read (the CDI spec, the published host): replaced
// atomically, only when its bytes change, so that readers never see a half-written file and an
// unchanged inventory costs no write at all.
#pragma once

#include <sys/types.h>

#include <string>

#include "absl/status/statusor.h"

namespace fabric {

class KeptFile {
 public:
  // `dir`/`name`; `what` names the directory in errors ("CDI" gives "CDI directory /run/cdi").
  KeptFile(std::string dir, std::string name, std::string what);

  // Writes `text` when the file does not hold it (ReplaceFileIfChanged: a dot file, fsync,
  // rename); returns whether it wrote. When `text` is what this writer wrote last and the file is
  // still that one (same inode, size and mtime), nothing is read. A missing directory is created
  // (mode 0755, not its parents). Errors name the path and the errno's text: NotFound (no such
  // directory and none can be made), FailedPrecondition (not a directory, a read-only file
  // system), ResourceExhausted (ENOSPC), PermissionDenied. The old file stays.
  absl::StatusOr<bool> Write(const std::string& text);
  // Removes the file; whether it was there.
  absl::StatusOr<bool> Remove();

  const std::string& dir() const { return dir_; }
  const std::string& path() const { return path_; }

 private:
  bool Unchanged(const std::string& text) const;

  const std::string dir_;
  const std::string name_;
  const std::string what_;
  const std::string path_;
  std::string written_;  // What this writer last wrote (or found there); empty: nothing yet.
  ino_t ino_ = 0;
  off_t size_ = 0;
  struct timespec mtime_ = {};
};

}  // namespace fabric
