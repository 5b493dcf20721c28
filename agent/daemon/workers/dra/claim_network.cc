#include "agent/daemon/workers/dra/claim_network.h"

#include <sys/stat.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/common/excerpt.h"
#include "agent/common/log.h"
#include "agent/hostfs/host_fs.h"

namespace fabric {
namespace {

// Records read in one pass: fabric-cni writes one per pod attachment.
constexpr size_t kMaxRecords = 4096;

std::string NetworkKey(const std::vector<dra::DeviceNetwork>& net) {
  std::string key;
  for (const dra::DeviceNetwork& n : net) {
    absl::StrAppend(&key, n.pool, "/", n.device, "=", n.data.interface_name, ",",
                    n.data.hardware_address);
    for (const std::string& ip : n.data.ips) absl::StrAppend(&key, ",", ip);
    key += ';';
  }
  return key;
}

}  // namespace

void ClaimNetwork::Track(const dra::ParsedClaim& claim, std::vector<dra::PreparedDevice> devices,
                         absl::Time now) {
  if (claim.pods.empty() || devices.empty()) return;  // No pod to look for.
  std::lock_guard<std::mutex> lock(mu_);
  claims_[claim.uid] = Entry{claim, std::move(devices), now, "", ""};
}

void ClaimNetwork::Forget(const std::string& uid) {
  std::lock_guard<std::mutex> lock(mu_);
  claims_.erase(uid);
}

void ClaimNetwork::ReadRecords() {
  struct stat st {};
  if (stat(dir_.c_str(), &st) != 0) {
    if (dir_changed_ns_ != -1 || !records_.empty()) ++records_version_;
    records_.clear();
    dir_changed_ns_ = -1;
    return;
  }
  // A record is written by rename into the directory and removed by unlink: either changes it.
  const int64_t changed = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  if (changed == dir_changed_ns_) return;
  const HostFsImpl fs("/");
  absl::StatusOr<std::vector<std::string>> names = fs.ListDir(dir_);
  if (!names.ok()) return;
  std::sort(names->begin(), names->end());  // The first record wins when pods share a claim.
  std::vector<podrecord::PodRecord> records;
  for (const std::string& name : *names) {
    if (!podrecord::InodeOfName(name)) continue;
    if (records.size() == kMaxRecords) break;
    absl::StatusOr<std::string> bytes = fs.ReadFile(absl::StrCat(dir_, "/", name));
    if (!bytes.ok()) continue;  // Removed since the listing.
    absl::StatusOr<podrecord::PodRecord> r = podrecord::ParseRecord(*bytes);
    if (r.ok() && !r->pod_uid.empty()) records.push_back(*std::move(r));
  }
  records_ = std::move(records);
  dir_changed_ns_ = changed;
  ++records_version_;
}

absl::StatusOr<bool> ClaimNetwork::Write(const Entry& e,
                                         const std::vector<dra::DeviceNetwork>& net) {
  const std::string path = dra::ClaimApiPath(e.claim.namespace_, e.claim.name);
  auto got = api_->Call({"GET", path, ""});
  if (!got.ok()) return got.status();
  if (got->code == 404) return absl::NotFoundError("the claim is gone");
  if (got->code != 200) {
    return absl::UnavailableError(absl::StrCat("HTTP ", got->code, " ", Excerpt(got->body, 200)));
  }
  absl::StatusOr<dra::ParsedClaim> now = dra::ParseClaim(got->body);
  if (!now.ok()) return now.status();
  if (now->uid != e.claim.uid) return absl::NotFoundError("the claim was replaced (another UID)");
  absl::StatusOr<std::optional<std::string>> update = dra::ClaimStatusUpdate(got->body, net);
  if (!update.ok()) return update.status();
  if (!update->has_value()) return false;
  auto put = api_->Call({"PUT", absl::StrCat(path, "/status"), **update});
  if (!put.ok()) return put.status();
  if (put->code == 409) return absl::AbortedError("changed meanwhile (409): next pass");
  if (put->code != 200) {
    return absl::UnavailableError(absl::StrCat("HTTP ", put->code, " ", Excerpt(put->body, 200)));
  }
  return true;
}

int ClaimNetwork::Tick(absl::Time now) {
  std::map<std::string, Entry> claims;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (claims_.empty()) return 0;
    claims = claims_;
  }
  ReadRecords();
  int written = 0;
  for (auto& [uid, e] : claims) {
    // Matched against these records before, and written (or nothing to write): only the
    // give-up clock moves. A write that failed is tried again every pass.
    const bool seen = e.looked_at == records_version_ && e.error.empty();
    const std::vector<dra::DeviceNetwork> net =
        seen ? std::vector<dra::DeviceNetwork>{} : dra::NetworkOf(e.claim, e.devices, records_);
    const std::string key = NetworkKey(net);
    bool drop = false;
    std::string error;
    if (net.empty()) {
      drop = e.written.empty() && now - e.since > give_up_;
      if (drop) {
        Log(LogLevel::kInfo, "DRA claim ", e.claim.namespace_, "/", e.claim.name,
            ": no pod record names its NICs after ", absl::FormatDuration(give_up_),
            "; its status gets no network data");
      }
    } else if (key != e.written) {
      absl::StatusOr<bool> w = Write(e, net);
      if (w.ok()) {
        written += *w ? 1 : 0;
        e.written = key;
      } else if (absl::IsNotFound(w.status())) {
        drop = true;
      } else {
        error = std::string(w.status().message());
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    auto it = claims_.find(uid);
    if (it == claims_.end()) continue;  // Unprepared meanwhile.
    if (drop) {
      claims_.erase(it);
      continue;
    }
    it->second.written = e.written;
    it->second.looked_at = records_version_;
    if (!error.empty() && error != it->second.error) {
      Log(LogLevel::kWarning, "DRA claim ", e.claim.namespace_, "/", e.claim.name,
          ": writing its network data: ", error);
    }
    it->second.error = error;
  }
  return written;
}

}  // namespace fabric
