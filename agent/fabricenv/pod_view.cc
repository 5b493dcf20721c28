#include "agent/fabricenv/pod_view.h"

#include <ifaddrs.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/common/ip.h"
#include "agent/common/working_dir.h"
#include "agent/fabricenv/pod_host.h"
#include "agent/hostfs/host_fs.h"

namespace fabric::podenv {
namespace {

std::string PortsText(const std::vector<podrecord::PodRecord>& records) {
  std::vector<std::string> out;
  for (const podrecord::PodRecord& r : records) {
    for (const jobenv::Pick& p : r.ports) {
      out.push_back(absl::StrCat(p.netdev, ": ", p.Port(),
                                 p.gid_index ? absl::StrCat(" GID ", *p.gid_index) : " no GID"));
    }
  }
  return absl::StrJoin(out, ", ");
}

}  // namespace

Here ReadHere() {
  Here h;
  h.netns_inode = hostfile::OwnNetnsInode();
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) == 0) {
    for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
      std::set<std::string>& addrs = h.interfaces[a->ifa_name];
      if (a->ifa_addr == nullptr) continue;
      if (a->ifa_addr->sa_family == AF_INET) {
        in6_addr v4{};
        std::memcpy(&v4, &reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr, 4);
        addrs.insert(IpToString(AF_INET, v4));
      } else if (a->ifa_addr->sa_family == AF_INET6) {
        addrs.insert(
            IpToString(AF_INET6, reinterpret_cast<const sockaddr_in6*>(a->ifa_addr)->sin6_addr));
      }
    }
    freeifaddrs(list);
  }
  if (const char* d = std::getenv(kDevicesVar); d != nullptr) h.devices = d;
  return h;
}

std::string RecordsDirOf(const std::string& host_file_path) {
  const size_t slash = host_file_path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : host_file_path.substr(0, slash);
  return absl::StrCat(dir.empty() ? "/" : dir, dir.empty() ? "" : "/", podrecord::kDirName);
}

absl::StatusOr<View> ViewFor(hostfile::HostFile file, const std::string& records_dir,
                             const Here& here) {
  View v;
  const uint64_t host_ns = file.published.netns_inode();
  if (host_ns == 0 || here.netns_inode == 0 || here.netns_inode == host_ns) {
    if (!here.devices.empty()) {
      absl::StatusOr<v1::PublishedHost> narrowed = NarrowToDevices(file.published, here.devices);
      if (!narrowed.ok()) return narrowed.status();
      file.published = *std::move(narrowed);
      v.provenance.push_back(
          absl::StrCat("NICs: ", kDevicesVar, "=", here.devices, " (the device plugin's)"));
    }
    v.file = std::move(file);
    return v;
  }
  // In a pod with its own network: fabric-cni's records of this namespace, checked against it.
  const std::string prefix = podrecord::FilePrefix(here.netns_inode);
  const HostFsImpl fs("/");
  absl::StatusOr<std::vector<std::string>> names = fs.ListDir(FromWorkingDir(records_dir));
  std::vector<podrecord::PodRecord> records;
  size_t read = 0;
  for (const std::string& name : names.ok() ? *names : std::vector<std::string>{}) {
    if (!absl::StartsWith(name, prefix) || !absl::EndsWith(name, ".json")) continue;
    if (++read > podrecord::kMaxFiles) {
      v.notes.push_back(absl::StrCat("more than ", podrecord::kMaxFiles, " records for inode ",
                                     here.netns_inode, ": the rest skipped"));
      break;
    }
    const std::string path = absl::StrCat(records_dir, "/", name);
    absl::StatusOr<std::string> bytes = fs.ReadFile(FromWorkingDir(path));
    absl::StatusOr<podrecord::PodRecord> r =
        bytes.ok() ? podrecord::ParseRecord(*bytes)
                   : absl::StatusOr<podrecord::PodRecord>(bytes.status());
    absl::Status fits = r.ok() ? podrecord::CheckRecord(*r, here.interfaces) : r.status();
    if (!fits.ok()) {
      v.notes.push_back(absl::StrCat(path, " skipped: ", fits.message()));
      continue;
    }
    records.push_back(*std::move(r));
  }
  if (records.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "this process is in a pod's network namespace (inode ", here.netns_inode,
        ", not the host's) and ", records_dir, " holds no valid fabric-cni record of it",
        v.notes.empty() ? "" : absl::StrCat(" (", absl::StrJoin(v.notes, "; "), ")"),
        ": the pod has no RDMA interface, or its network has no fabric-cni with envDir"));
  }
  absl::StatusOr<v1::PublishedHost> narrowed = NarrowToPod(file.published, records);
  if (!narrowed.ok()) return narrowed.status();
  file.published = *std::move(narrowed);
  v.pod = true;
  v.provenance.push_back(absl::StrCat("NICs: the pod's, from fabric-cni's records in ", records_dir,
                                      " (", PortsText(records), ")"));
  v.file = std::move(file);
  return v;
}

}  // namespace fabric::podenv
