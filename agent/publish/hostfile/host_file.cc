#include "agent/publish/hostfile/host_file.h"

#include <sys/stat.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "agent/common/version.h"
#include "agent/common/working_dir.h"
#include "agent/hostfs/host_fs.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace fabric::hostfile {

static_assert(kMaxBytes == HostFs::kMaxFileBytes, "ReadHostFile reads through HostFs");

std::string HostFileBytes(const v1::Host& host, const v1::SelectionPolicy& policy,
                          uint64_t netns_inode) {
  v1::PublishedHost p;
  p.set_netns_inode(netns_inode);
  p.set_format(kFormat);
  *p.mutable_host() = host;
  *p.mutable_policy() = policy;
  p.set_agent_version(kFabricVersion);
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);  // Map order: same host, same bytes.
    p.SerializeToCodedStream(&coded);
  }
  return out;
}

absl::StatusOr<v1::PublishedHost> ParseHostFile(std::string_view bytes) {
  if (bytes.size() > kMaxBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(bytes.size(), " bytes: more than a published host (", kMaxBytes, ")"));
  }
  v1::PublishedHost p;
  if (!p.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::InvalidArgumentError("not a published host (the protobuf does not parse)");
  }
  if (p.format() != kFormat) {
    return absl::FailedPreconditionError(
        absl::StrCat("format ", p.format(), ", this reader knows ", kFormat,
                     p.format() > kFormat ? " (written by a newer agent)" : ""));
  }
  if (!p.has_host()) return absl::FailedPreconditionError("no host in it");
  return p;
}

absl::StatusOr<HostFile> ReadHostFile(const std::string& given) {
  // A relative --host-file is the working directory's, not "/"'s (HostFsImpl's root).
  const std::string path = FromWorkingDir(given);
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 && errno == ENOENT) {
    return absl::NotFoundError(
        absl::StrCat("no published host at ", path, " (fabric-agent writes it: --host-file-dir)"));
  }
  // HostFs's read: capped (kMaxBytes), EINTR-safe, errno as status.
  absl::StatusOr<std::string> bytes = HostFsImpl("/").ReadFile(path);
  if (!bytes.ok()) {
    return absl::Status(bytes.status().code(),
                        absl::StrCat("published host: ", bytes.status().message()));
  }
  absl::StatusOr<v1::PublishedHost> p = ParseHostFile(*bytes);
  if (!p.ok()) {
    return absl::Status(p.status().code(),
                        absl::StrCat("published host ", path, ": ", p.status().message()));
  }
  return HostFile{*std::move(p), absl::TimeFromTimespec(st.st_mtim)};
}

uint64_t OwnNetnsInode() {
  struct stat st {};
  return stat("/proc/self/ns/net", &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

}  // namespace fabric::hostfile
