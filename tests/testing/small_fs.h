// A small tmpfs in a private mount namespace, for tests of writers on a file system that is full
// or read-only (a CDI or NFD directory in the field): real ENOSPC and EROFS, not a fake. The
// test process enters its own mount namespace once (unshare CLONE_NEWNS, mounts private), so
// nothing is seen outside it; the mount goes away on destruction. Needs root (CAP_SYS_ADMIN).
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace fabric::testing {

class SmallFs {
 public:
  // A tmpfs of `bytes` mounted on a fresh directory. FailedPrecondition (the caller skips) when
  // the process may not make a mount namespace or mount.
  static absl::StatusOr<std::unique_ptr<SmallFs>> Mount(size_t bytes = 64 * 1024);
  ~SmallFs();
  SmallFs(const SmallFs&) = delete;
  SmallFs& operator=(const SmallFs&) = delete;

  const std::string& dir() const { return dir_; }
  // Writes a filler file until the file system is full (ENOSPC).
  absl::Status Fill();
  // Remounts it read-only (EROFS for every write, root's too).
  absl::Status ReadOnly();

 private:
  SmallFs() = default;
  std::string dir_;
};

}  // namespace fabric::testing
