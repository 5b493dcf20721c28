#include "agent/publish/cdi/cdi_writer.h"

#include <errno.h>
#include <sys/stat.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/common/atomic_file.h"
#include "agent/common/errno.h"

namespace fabric::cdi {

SpecWriter::SpecWriter(std::string dir)
    : dir_(std::move(dir)), path_(absl::StrCat(dir_, "/", kSpecFile)) {}

bool SpecWriter::Unchanged(const std::string& json) const {
  struct stat st;
  return !written_.empty() && json == written_ && ::stat(path_.c_str(), &st) == 0 &&
         st.st_ino == ino_ && st.st_size == size_ && st.st_mtim.tv_sec == mtime_.tv_sec &&
         st.st_mtim.tv_nsec == mtime_.tv_nsec;
}

absl::StatusOr<bool> SpecWriter::Write(const std::string& json) {
  if (Unchanged(json)) return false;
  struct stat st;
  if (::stat(dir_.c_str(), &st) != 0) {
    int err = errno;
    // Runtimes create it only when they write a spec themselves; its parent must exist.
    if (err == ENOENT && ::mkdir(dir_.c_str(), 0755) == 0) return Write(json);
    if (err == ENOENT) {
      err = errno;
      return absl::NotFoundError(absl::StrCat(
          "CDI directory ", dir_, " does not exist and cannot be created: ", ErrnoText(err)));
    }
    return ErrnoError(err, absl::StrCat("CDI directory ", dir_));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("CDI directory ", dir_, " is not a directory"));
  }
  written_.clear();
  auto wrote = ReplaceFileIfChanged(dir_, kSpecFile, json);
  if (!wrote.ok()) return wrote.status();
  if (::stat(path_.c_str(), &st) == 0) {  // Else the next Write reads the file to compare.
    written_ = json;
    ino_ = st.st_ino;
    size_ = st.st_size;
    mtime_ = st.st_mtim;
  }
  return *wrote;
}

absl::StatusOr<bool> SpecWriter::Remove() {
  written_.clear();
  return RemoveFileIfPresent(dir_, kSpecFile);
}

}  // namespace fabric::cdi
