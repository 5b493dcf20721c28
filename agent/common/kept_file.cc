#include "agent/common/kept_file.h"

#include <errno.h>
#include <sys/stat.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/common/atomic_file.h"
#include "agent/common/errno.h"

namespace fabric {

KeptFile::KeptFile(std::string dir, std::string name, std::string what)
    : dir_(std::move(dir)),
      name_(std::move(name)),
      what_(std::move(what)),
      path_(absl::StrCat(dir_, "/", name_)) {}

bool KeptFile::Unchanged(const std::string& text) const {
  struct stat st;
  return !written_.empty() && text == written_ && ::stat(path_.c_str(), &st) == 0 &&
         st.st_ino == ino_ && st.st_size == size_ && st.st_mtim.tv_sec == mtime_.tv_sec &&
         st.st_mtim.tv_nsec == mtime_.tv_nsec;
}

absl::StatusOr<bool> KeptFile::Write(const std::string& text) {
  if (Unchanged(text)) return false;
  struct stat st;
  if (::stat(dir_.c_str(), &st) != 0) {
    int err = errno;
    // Readers (runtimes, jobs) only look; its parent must exist.
    if (err == ENOENT && ::mkdir(dir_.c_str(), 0755) == 0) return Write(text);
    if (err == ENOENT) {
      err = errno;
      return absl::NotFoundError(absl::StrCat(
          what_, " directory ", dir_, " does not exist and cannot be created: ", ErrnoText(err)));
    }
    return ErrnoError(err, absl::StrCat(what_, " directory ", dir_));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(what_, " directory ", dir_, " is not a directory"));
  }
  written_.clear();
  auto wrote = ReplaceFileIfChanged(dir_, name_, text);
  if (!wrote.ok()) return wrote.status();
  if (::stat(path_.c_str(), &st) == 0) {  // Else the next Write reads the file to compare.
    written_ = text;
    ino_ = st.st_ino;
    size_ = st.st_size;
    mtime_ = st.st_mtim;
  }
  return *wrote;
}

absl::StatusOr<bool> KeptFile::Remove() {
  written_.clear();
  return RemoveFileIfPresent(dir_, name_);
}

}  // namespace fabric
