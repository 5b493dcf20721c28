#include "agent/common/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <optional>

#include "absl/strings/str_cat.h"
#include "agent/common/errno.h"
#include "agent/common/fd.h"

namespace fabric {
namespace {

// The file's content, or nullopt when it cannot be read (absent, a directory, ...).
std::optional<std::string> ReadAll(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return std::nullopt;
  std::string out;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      return std::nullopt;
    }
    if (n == 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

bool WriteFully(int fd, std::string_view text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

absl::Status ErrnoError(int err, const std::string& what) {
  return absl::Status(absl::ErrnoToStatusCode(err), absl::StrCat(what, ": ", ErrnoText(err)));
}

absl::StatusOr<bool> ReplaceFileIfChanged(const std::string& dir, const std::string& name,
                                          std::string_view text, mode_t mode) {
  const std::string path = absl::StrCat(dir, "/", name);
  if (std::optional<std::string> current = ReadAll(path); current && *current == text) {
    return false;
  }
  std::string tmp = absl::StrCat(dir, "/.", name, ".XXXXXX");
  UniqueFd fd(::mkstemp(tmp.data()));
  if (!fd.valid()) return ErrnoError(errno, absl::StrCat("cannot create a file in ", dir));
  auto fail = [&](const std::string& what) {
    const int err = errno;
    fd.reset();  // Before the unlink.
    ::unlink(tmp.c_str());
    return ErrnoError(err, absl::StrCat(what, " ", tmp));
  };
  if (::fchmod(fd.get(), mode) != 0) return fail("chmod");
  if (!WriteFully(fd.get(), text)) return fail("write");  // ENOSPC lands here or at fsync.
  if (::fsync(fd.get()) != 0) return fail("fsync");
  // Checked: a failed close of a written file may mean lost data. Closed before the rename.
  if (const int err = fd.Close(); err != 0) {
    ::unlink(tmp.c_str());
    return ErrnoError(err, absl::StrCat("close ", tmp));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return ErrnoError(err, absl::StrCat("rename ", tmp, " to ", path));
  }
  // The rename itself survives a crash only once the directory is synced; the file is complete
  // either way, so a failure here is not an error.
  if (UniqueFd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)); dfd.valid()) {
    (void)::fsync(dfd.get());
  }
  return true;
}

absl::StatusOr<bool> RemoveFileIfPresent(const std::string& dir, const std::string& name) {
  const std::string path = absl::StrCat(dir, "/", name);
  if (::unlink(path.c_str()) == 0) return true;
  if (errno == ENOENT) return false;
  return ErrnoError(errno, absl::StrCat("remove ", path));
}

}  // namespace fabric
