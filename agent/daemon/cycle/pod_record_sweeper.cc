#include "agent/daemon/cycle/pod_record_sweeper.h"

#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "agent/common/errno.h"
#include "agent/common/log.h"
#include "agent/hostfs/host_fs.h"
#include "agent/publish/podrecord/pod_record.h"

namespace fabric {
namespace {

// Whether the record at `path` belongs to a pod that is gone.
bool Stale(const HostFs& fs, const std::string& path, absl::Time now) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  if (now - absl::FromTimeT(st.st_mtime) < PodRecordSweeper::kGrace) return false;
  absl::StatusOr<std::string> bytes = fs.ReadFile(path);
  if (!bytes.ok()) return false;
  absl::StatusOr<podrecord::PodRecord> r = podrecord::ParseRecord(*bytes);
  if (!r.ok()) return true;  // Nobody can use it; fabric-cni writes only whole records.
  if (r->netns.empty() || r->netns.front() != '/') return false;
  const std::string parent = r->netns.substr(0, r->netns.rfind('/'));
  struct stat ns {};
  if (stat(r->netns.c_str(), &ns) == 0) {
    // Another namespace at that path now, but only if it is one in this view: without mount
    // propagation a container sees the empty file the namespace was mounted on.
    struct statfs type {};
    const bool nsfs = statfs(r->netns.c_str(), &type) == 0 && type.f_type == NSFS_MAGIC;
    return nsfs && static_cast<uint64_t>(ns.st_ino) != r->netns_inode;
  }
  struct stat dir {};
  // Gone only where its directory is visible: an unmounted path proves nothing.
  return errno == ENOENT && !parent.empty() && stat(parent.c_str(), &dir) == 0;
}

}  // namespace

void PodRecordSweeper::MaybeSweep(absl::Time now) {
  if (now - last_ < kInterval) return;
  last_ = now;
  if (const int n = Sweep(now); n > 0) {
    Log(LogLevel::kInfo, "removed ", n, " pod records of pods that are gone from ", dir_);
  }
}

int PodRecordSweeper::Sweep(absl::Time now) {
  const HostFsImpl fs("/");
  absl::StatusOr<std::vector<std::string>> names = fs.ListDir(dir_);
  error_ = absl::OkStatus();
  if (!names.ok()) return 0;  // No pod has written one yet.
  int removed = 0;
  for (const std::string& name : *names) {
    if (!podrecord::InodeOfName(name)) continue;
    const std::string path = absl::StrCat(dir_, "/", name);
    if (!Stale(fs, path, now)) continue;
    if (unlink(path.c_str()) == 0) {
      ++removed;
    } else if (errno != ENOENT) {
      error_ = absl::PermissionDeniedError(absl::StrCat("remove ", path, ": ", ErrnoText(errno)));
    }
  }
  return removed;
}

void PodRecordSweeper::Findings(absl::Time, std::vector<v1::Finding>* out) const {
  if (error_.ok()) return;
  v1::Finding f;
  f.set_severity(v1::SEVERITY_WARNING);
  f.set_check("pod-records");
  f.set_message(absl::StrCat(
      "cannot remove the records of pods that are gone (", error_.message(),
      "): fabric-env in a new pod whose namespace reuses an inode skips them by their addresses"));
  out->push_back(std::move(f));
}

}  // namespace fabric
