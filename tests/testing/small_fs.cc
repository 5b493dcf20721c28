#include "tests/testing/small_fs.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"

namespace fabric::testing {
namespace {

absl::Status Errno(const std::string& what) {
  return absl::FailedPreconditionError(absl::StrCat(what, ": ", std::strerror(errno)));
}

// Once per process: a private mount namespace, so the test's mounts never reach the host's.
absl::Status PrivateMounts() {
  static const absl::Status entered = [] {
    if (::unshare(CLONE_NEWNS) != 0) return Errno("unshare(CLONE_NEWNS)");
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
      return Errno("mount --make-rprivate /");
    }
    return absl::OkStatus();
  }();
  return entered;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SmallFs>> SmallFs::Mount(size_t bytes) {
  if (absl::Status s = PrivateMounts(); !s.ok()) return s;
  std::string dir = (std::filesystem::temp_directory_path() / "fabric-smallfs.XXXXXX").string();
  if (::mkdtemp(dir.data()) == nullptr) return Errno("mkdtemp");
  const std::string opts = absl::StrCat("size=", bytes, ",mode=0755");
  if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, opts.c_str()) != 0) {
    absl::Status s = Errno(absl::StrCat("mount tmpfs on ", dir));
    ::rmdir(dir.c_str());
    return s;
  }
  std::unique_ptr<SmallFs> fs(new SmallFs());
  fs->dir_ = std::move(dir);
  return fs;
}

SmallFs::~SmallFs() {
  (void)::umount2(dir_.c_str(), MNT_DETACH);
  (void)::rmdir(dir_.c_str());
}

absl::Status SmallFs::Fill() {
  const std::string path = dir_ + "/.filler";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return Errno("open " + path);
  static const char block[4096] = {};
  // Bounded: the file system is small, so ENOSPC comes within its size.
  for (int i = 0; i < (1 << 20); ++i) {
    if (::write(fd, block, sizeof(block)) < 0) {
      const int err = errno;
      ::close(fd);
      if (err == ENOSPC) return absl::OkStatus();
      errno = err;
      return Errno("write " + path);
    }
  }
  ::close(fd);
  return absl::InternalError("never filled");
}

absl::Status SmallFs::ReadOnly() {
  if (::mount(nullptr, dir_.c_str(), nullptr, MS_REMOUNT | MS_RDONLY, nullptr) != 0) {
    return Errno("remount read-only " + dir_);
  }
  return absl::OkStatus();
}

}  // namespace fabric::testing
