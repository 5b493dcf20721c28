// A file that readers must never see half-written (the NFD feature file, the CDI spec): written
// to a dot file beside it, synced, renamed over it, only when its content changes.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace fabric {

// Replaces DIR/NAME with `text` atomically: a dot file in DIR (".NAME.XXXXXX": readers that
// skip dot files, or take only *.json, never open it), fsync, rename over the old file, fsync of
// DIR. Nothing is written when the file already holds `text`; returns whether it wrote. On any
// error the old file stays as it was and no temp file is left. Errors carry the errno's code
// (NotFound: DIR does not exist; PermissionDenied; ResourceExhausted for ENOSPC; EROFS is
// FailedPrecondition) and name the path and the errno's text. DIR's own checks (exists, is a
// directory) are the caller's, whose message can say what the directory is for.
absl::StatusOr<bool> ReplaceFileIfChanged(const std::string& dir, const std::string& name,
                                          std::string_view text, mode_t mode = 0644);

// Removes DIR/NAME; returns whether it was there.
absl::StatusOr<bool> RemoveFileIfPresent(const std::string& dir, const std::string& name);

// absl's code for `err` with "<what>: <strerror>".
absl::Status ErrnoError(int err, const std::string& what);

}  // namespace fabric
