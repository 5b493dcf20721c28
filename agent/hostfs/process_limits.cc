#include "agent/hostfs/process_limits.h"

#include <errno.h>
#include <sys/resource.h>
#include <sys/statvfs.h>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/common/errno.h"
#include "agent/common/strings.h"
#include "agent/hostfs/host_fs.h"

namespace fabric {
namespace {

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string Unescape(absl::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && s.size() - i >= 4 && s[i + 1] >= '0' && s[i + 1] <= '3' &&
        s[i + 2] >= '0' && s[i + 2] <= '7' && s[i + 3] >= '0' && s[i + 3] <= '7') {
      out += static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::optional<uint64_t> Limit(rlim_t v) {
  if (v == RLIM_INFINITY) return std::nullopt;
  return static_cast<uint64_t>(v);
}

}  // namespace

absl::StatusOr<uint64_t> ParseCapEff(std::string_view proc_status) {
  for (absl::string_view line : absl::StrSplit(Av(proc_status), '\n')) {
    if (!absl::ConsumePrefix(&line, "CapEff:")) continue;
    line = absl::StripAsciiWhitespace(line);
    uint64_t mask = 0;
    if (line.empty() || line.size() > 16 || !absl::SimpleHexAtoi(line, &mask)) {
      return absl::InvalidArgumentError(
          absl::StrCat("CapEff is not a hex mask: ", line.substr(0, 32)));
    }
    return mask;
  }
  return absl::NotFoundError("no CapEff line");
}

std::optional<MountEntry> FindMount(std::string_view mountinfo, std::string_view mount_point) {
  std::optional<MountEntry> found;
  for (absl::string_view line : absl::StrSplit(Av(mountinfo), '\n', absl::SkipEmpty())) {
    // ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (f.size() < 7) continue;
    size_t dash = 6;
    while (dash < f.size() && f[dash] != "-") ++dash;
    if (dash + 1 >= f.size()) continue;
    if (Unescape(f[4]) != mount_point) continue;
    MountEntry e;
    e.mount_point = Unescape(f[4]);
    e.fstype = std::string(f[dash + 1]);
    for (absl::string_view opt : absl::StrSplit(f[5], ',')) e.read_only |= opt == "ro";
    found = std::move(e);  // A later mount over the same point hides the earlier.
  }
  return found;
}

ProcessLimits ReadProcessLimits(const std::string& proc, const std::string& shm) {
  ProcessLimits l;
  const HostFsImpl procfs(proc);
  rlimit r{};
  if (getrlimit(RLIMIT_MEMLOCK, &r) == 0) {
    l.memlock_soft = Limit(r.rlim_cur);
  } else {
    l.unreadable.push_back(absl::StrCat("RLIMIT_MEMLOCK: ", ErrnoText(errno)));
  }
  if (getrlimit(RLIMIT_NOFILE, &r) == 0) {
    l.nofile_soft = Limit(r.rlim_cur);
    l.nofile_hard = Limit(r.rlim_max);
  } else {
    l.unreadable.push_back(absl::StrCat("RLIMIT_NOFILE: ", ErrnoText(errno)));
  }
  if (absl::StatusOr<std::string> status = procfs.ReadFile("status"); !status.ok()) {
    l.unreadable.push_back(std::string(status.status().message()));
  } else if (absl::StatusOr<uint64_t> cap = ParseCapEff(*status); !cap.ok()) {
    l.unreadable.push_back(absl::StrCat(proc, "/status: ", cap.status().message()));
  } else {
    l.cap_ipc_lock = (*cap >> kCapIpcLock) & 1;
  }
  if (absl::StatusOr<std::string> mi = procfs.ReadFile("mountinfo"); !mi.ok()) {
    l.unreadable.push_back(std::string(mi.status().message()));
  } else {
    l.shm = FindMount(*mi, shm);
  }
  struct statvfs sv {};
  if (statvfs(shm.c_str(), &sv) == 0) {
    l.shm_size = static_cast<uint64_t>(sv.f_blocks) * sv.f_frsize;
    l.shm_free = static_cast<uint64_t>(sv.f_bavail) * sv.f_frsize;
  } else {
    l.unreadable.push_back(absl::StrCat(shm, ": ", ErrnoText(errno)));
  }
  return l;
}

}  // namespace fabric
