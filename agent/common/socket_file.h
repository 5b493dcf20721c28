// The file of a Unix socket a process listens on: refuse a path another process serves, replace
// a stale one, and at teardown remove only the file this process bound. Two agents may share a
// directory; one that stops must not delete a path that another has since bound.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace fabric {

// Which file a bound socket is, from lstat(2) right after bind(2).
struct BoundSocketFile {
  std::string path;
  dev_t dev = 0;
  ino_t ino = 0;
};

// Before binding `path`: nothing there is fine; a socket file whose connect(2) is refused
// (ECONNREFUSED: its listener is gone) is stale and removed. A listener still there (any socket
// type), a file that is not a socket, or a connect that fails otherwise is an error that names
// `path` and `flag`, the option that picks another path: AlreadyExists when live, else
// FailedPrecondition.
absl::Status ClearStaleSocket(const std::string& path, std::string_view flag);

// Records the file just bound at `path`.
absl::StatusOr<BoundSocketFile> RecordBoundSocket(const std::string& path);

// Binds a Unix socket at `path` with `mode` from the moment anyone can reach it, whatever the
// umask, for a binder that only takes a path (a gRPC server's "unix:" port): `bind` binds at a
// path in a private directory (0700) beside `path` (".sockXXXXXX/s": 13 bytes), the file gets
// `mode` there and is then renamed onto `path` (replacing a stale socket: call ClearStaleSocket
// first). Returns the file at `path`; on an error nothing is left behind but what `bind` holds.
absl::StatusOr<BoundSocketFile> BindSocketWithMode(
    const std::string& path, mode_t mode,
    absl::FunctionRef<absl::Status(const std::string& private_path)> bind);

// Unlinks `f.path` only while it is still the file recorded (same st_dev and st_ino); true when
// it was removed. Another process's socket at the same path is left alone.
bool RemoveBoundSocket(const BoundSocketFile& f);

}  // namespace fabric
