#include "cni-hook/files.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "agent/common/errno.h"
#include "agent/common/fd.h"
#include "agent/common/status.h"
#include "cni-hook/cni.h"

namespace fabric::cni {

absl::Status MakeDir(const std::string& dir) {
  std::error_code ec;  // the non-throwing overload
  std::filesystem::create_directories(dir, ec);
  if (!ec) return absl::OkStatus();
  return Error(kIoFailure, absl::StrCat("mkdir ", dir, ": ", ec.message()));
}

absl::Status WriteAtomically(const std::string& dir, const std::string& name,
                             const std::string& text) {
  FABRIC_RETURN_IF_ERROR(MakeDir(dir));
  const std::string final_path = absl::StrCat(dir, "/", name);
  const std::string tmp = absl::StrCat(dir, "/.", name, ".", getpid(), ".tmp");
  UniqueFd fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644));
  if (!fd.valid()) {
    return Error(kIoFailure, absl::StrCat("create ", tmp, ": ", ErrnoText(errno)));
  }
  bool ok = fchmod(fd.get(), 0644) == 0;  // the umask must not narrow it
  size_t off = 0;
  while (ok && off < text.size()) {
    const ssize_t n = write(fd.get(), text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) off += static_cast<size_t>(n);
  }
  const int err = errno;
  if (fd.Close() != 0) ok = false;  // checked, and before the rename
  if (!ok || rename(tmp.c_str(), final_path.c_str()) != 0) {
    const int e = ok ? errno : err;
    unlink(tmp.c_str());
    return Error(kIoFailure, absl::StrCat("write ", final_path, ": ", ErrnoText(e)));
  }
  return absl::OkStatus();
}

absl::Status MakeDirOwnedLike(const std::string& dir, const std::string& like) {
  FABRIC_RETURN_IF_ERROR(MakeDir(dir));
  struct stat want {
  }, have{};
  if (stat(like.c_str(), &want) != 0 || lstat(dir.c_str(), &have) != 0) {
    return Error(kIoFailure, absl::StrCat("stat ", dir, ": ", ErrnoText(errno)));
  }
  if ((have.st_uid != want.st_uid || have.st_gid != want.st_gid) &&
      lchown(dir.c_str(), want.st_uid, want.st_gid) != 0) {
    return Error(kIoFailure, absl::StrCat("chown ", dir, ": ", ErrnoText(errno)));
  }
  return absl::OkStatus();
}

std::optional<uint64_t> InodeOf(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return std::nullopt;
  return static_cast<uint64_t>(st.st_ino);
}

std::optional<std::string> ReadText(const std::string& path) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return std::nullopt;
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = read(fd.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > (1 << 16)) break;
  }
  return out;
}

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return names;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') names.emplace_back(e->d_name);
  }
  closedir(d);
  return names;
}

std::string BusInfo(const std::string& ifname) {
  UniqueFd fd(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return "";
  ethtool_drvinfo info{};
  info.cmd = ETHTOOL_GDRVINFO;
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, ifname.c_str(), IFNAMSIZ - 1);
  ifr.ifr_data = reinterpret_cast<char*>(&info);
  const int rc = ioctl(fd.get(), SIOCETHTOOL, &ifr);
  fd.reset();
  if (rc != 0) return "";
  info.bus_info[sizeof(info.bus_info) - 1] = '\0';
  return info.bus_info;
}

}  // namespace fabric::cni
