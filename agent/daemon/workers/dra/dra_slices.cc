#include "agent/daemon/workers/dra/dra_slices.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/common/excerpt.h"
#include "agent/common/k8s_label.h"
#include "agent/common/log.h"
#include "agent/policy/health/health.h"
#include "agent/publish/deviceplugin/device_plugin.h"
#include "agent/publish/dra/slice_json.h"

namespace fabric {
namespace {

constexpr char kCheck[] = "dra";
constexpr char kSlices[] = "/apis/resource.k8s.io/v1/resourceslices";

// The server's own words for a refusal: a Status object's message, else the body's start.
std::string Refusal(const kubeapi::ApiResponse& r) {
  auto j = nlohmann::json::parse(r.body, nullptr, false);
  if (j.is_object() && j.contains("message") && j["message"].is_string()) {
    return absl::StrCat(r.code, " ", Excerpt(j["message"].get<std::string>(), 400));
  }
  return absl::StrCat(r.code, " ", Excerpt(r.body, 200));
}

bool Ok(long code) { return code >= 200 && code < 300; }

// An answer that is not the one wanted: 401 and 403 say the agent's credentials or RBAC are wrong
// (an expired token, a missing rule), anything else that the server is not serving.
absl::Status NotServed(const std::string& what, const kubeapi::ApiResponse& r) {
  const std::string message = absl::StrCat(what, ": ", Refusal(r));
  if (r.code == 401 || r.code == 403) return absl::PermissionDeniedError(message);
  return absl::UnavailableError(message);
}

}  // namespace

absl::StatusOr<std::unique_ptr<DraSlices>> DraSlices::Start(std::unique_ptr<kubeapi::KubeApi> api,
                                                            DraSlicesOptions opt) {
  if (!IsDnsSubdomain(opt.node)) {
    return absl::InvalidArgumentError(
        absl::StrCat("node name ", Excerpt(opt.node), " is not a DNS subdomain"));
  }
  auto d = std::unique_ptr<DraSlices>(new DraSlices(std::move(api), std::move(opt)));
  d->worker_ = std::thread([p = d.get()] { p->Run(); });
  return d;
}

DraSlices::DraSlices(std::unique_ptr<kubeapi::KubeApi> api, DraSlicesOptions opt)
    : api_(std::move(api)), opt_(std::move(opt)) {}

DraSlices::~DraSlices() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  if (api_ != nullptr) api_->Cancel();  // A call in flight ends now, not at its time-out.
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

std::vector<dra::Device> DraDevicesOf(const Snapshot& s, const v1::DevicePluginConfig& dp) {
  std::set<std::string> excluded;
  if (!dp.resources().empty()) {
    for (const auto& view :
         deviceplugin::PlanResources(*s.host, s.policy, dp, s.health).resources) {
      excluded.insert(view.nics.begin(), view.nics.end());
    }
  }
  return dra::Devices(*s.host, s.policy, s.health, excluded);
}

void DraSlices::Publish(const Publication& p) {
  Desired d;
  d.devices = DraDevicesOf(p.snapshot, opt_.device_plugin);
  dra::KeepVanished(published_, dra::Rfc3339(p.now), &d.devices);
  published_ = d.devices;
  const v1::Severity verdict = p.snapshot.health.verdict();
  d.condition_status = verdict == v1::SEVERITY_CRITICAL ? "False" : "True";
  d.condition_reason = verdict == v1::SEVERITY_CRITICAL  ? "FabricCritical"
                       : verdict == v1::SEVERITY_WARNING ? "FabricDegraded"
                                                         : "FabricHealthy";
  int critical = 0, warning = 0;
  std::string first;
  for (const v1::Finding& f : p.snapshot.health.findings()) {
    if (f.dry_run()) continue;
    if (f.severity() == v1::SEVERITY_CRITICAL) ++critical;
    if (f.severity() == v1::SEVERITY_WARNING) ++warning;
    if (first.empty() && f.severity() == verdict) first = FindingLine(f);
  }
  d.condition_message = critical + warning == 0
                            ? "no RDMA fabric finding"
                            : absl::StrCat(critical, " critical and ", warning,
                                           " warning fabric findings; first: ", first);
  if (d.condition_message.size() > 1024) d.condition_message.resize(1024);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (d == desired_ && desired_version_ > 0) return;
    desired_ = std::move(d);
    ++desired_version_;
  }
  cv_.notify_all();
}

void DraSlices::Findings(absl::Time, std::vector<v1::Finding>* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (last_error_.ok()) return;
  v1::Finding* f = &out->emplace_back();
  f->set_severity(v1::SEVERITY_WARNING);
  f->set_check(kCheck);
  const absl::StatusCode code = last_error_.code();
  f->set_code(code == absl::StatusCode::kUnavailable || code == absl::StatusCode::kResourceExhausted
                  ? "dra.api_unreachable"
              : code == absl::StatusCode::kPermissionDenied ? "dra.unauthorized"
                                                            : "dra.write_refused");
  f->set_message(absl::StrCat("the DRA driver's ResourceSlices for node ", opt_.node,
                              " are not up to date on the API server: ", last_error_.message()));
}

DraSlices::Stats DraSlices::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

bool DraSlices::WaitSynced(absl::Duration timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout),
                      [&] { return desired_version_ > 0 && synced_version_ == desired_version_; });
}

void DraSlices::Run() {
  absl::Duration backoff = opt_.min_backoff;
  absl::Time next = absl::InfinitePast();
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    const bool pending = desired_version_ > 0 && synced_version_ != desired_version_;
    const absl::Time now = absl::Now();
    if (!pending || now < next) {
      const absl::Duration wait = pending ? next - now : opt_.resync;
      const bool woken = cv_.wait_for(lock, absl::ToChronoNanoseconds(wait), [&] {
        return stop_ || (desired_version_ != synced_version_ && absl::Now() >= next);
      });
      if (stop_) break;
      // The periodic re-read: what the server holds is checked again as if it had changed.
      if (!woken && desired_version_ > 0 && synced_version_ == desired_version_) {
        synced_version_ = 0;
      }
      continue;
    }
    const Desired d = desired_;
    const uint64_t version = desired_version_;
    lock.unlock();
    const absl::Status s = Sync(d);
    lock.lock();
    if (s.ok()) {
      ++stats_.syncs;
      if (!last_error_.ok())
        Log(LogLevel::kInfo, "DRA: ResourceSlices of ", opt_.node, " in sync again");
      last_error_ = absl::OkStatus();
      synced_version_ = version;
      backoff = opt_.min_backoff;
      next = absl::InfinitePast();
      cv_.notify_all();
      continue;
    }
    ++stats_.failures;
    if (last_error_.ok() || last_error_.message() != s.message()) {
      Log(LogLevel::kWarning, "DRA: ", s.message(), " (retrying in ", absl::FormatDuration(backoff),
          ")");
    }
    last_error_ = s;
    // Full jitter over the upper half: agents of a whole cluster that lost the server together do
    // not come back together.
    std::uniform_real_distribution<double> half(0.5, 1.0);
    next = absl::Now() + backoff * half(jitter_);
    backoff = std::min(opt_.max_backoff, backoff * 2);
  }
}

absl::StatusOr<kubeapi::ApiResponse> DraSlices::Call(const char* method, const std::string& path,
                                                     const std::string& body,
                                                     const char* content_type) {
  return api_->Call({method, path, body, content_type});
}

absl::Status DraSlices::Sync(const Desired& d) {
  if (absl::Status s = SyncSlices(d.devices); !s.ok()) return s;
  if (opt_.node_condition) return SyncCondition(d);
  return absl::OkStatus();
}

absl::Status DraSlices::SyncSlices(const std::vector<dra::Device>& devices) {
  if (node_uid_.empty()) {
    auto r = Call("GET", absl::StrCat("/api/v1/nodes/", opt_.node), "");
    if (!r.ok()) return r.status();
    if (r->code == 200) {
      auto j = nlohmann::json::parse(r->body, nullptr, false);
      if (j.is_object() && j["metadata"].is_object() && j["metadata"]["uid"].is_string()) {
        node_uid_ = j["metadata"]["uid"].get<std::string>();
      }
    } else if (r->code != 404 && r->code != 403) {
      return NotServed(absl::StrCat("reading node ", opt_.node), *r);
    }
  }
  const std::vector<std::vector<dra::Device>> slices = dra::Split(devices);
  std::vector<std::string> keys;
  for (const auto& s : slices) keys.push_back(dra::DevicesKey(s));
  const std::string list_path = absl::StrCat(kSlices, "?fieldSelector=spec.nodeName%3D", opt_.node,
                                             "%2Cspec.driver%3D", dra::kDriver);
  for (int attempt = 0; attempt <= opt_.max_conflicts; ++attempt) {
    auto r = Call("GET", list_path, "");
    if (!r.ok()) return r.status();
    if (r->code != 200) return NotServed("listing ResourceSlices", *r);
    auto listed = dra::ParseSliceList(r->body);
    if (!listed.ok()) return absl::UnavailableError(listed.status().message());
    std::map<std::string, const dra::ListedSlice*> by_name;
    int64_t generation = 0;
    for (const dra::ListedSlice& s : *listed) {
      by_name[s.name] = &s;
      generation = std::max(generation, s.generation);
    }
    bool current = listed->size() == slices.size();
    for (size_t i = 0; current && i < slices.size(); ++i) {
      auto it = by_name.find(dra::SliceName(opt_.node, i));
      current = it != by_name.end() && it->second->devices_key == keys[i] &&
                it->second->generation == generation &&
                it->second->slice_count == static_cast<int64_t>(slices.size()) &&
                it->second->pool == opt_.node;
    }
    if (current) {
      std::lock_guard<std::mutex> lock(mu_);
      stats_.generation = generation;
      stats_.slices = slices.size();
      return absl::OkStatus();
    }
    ++generation;
    bool conflict = false;
    uint64_t writes = 0;
    for (size_t i = 0; i < slices.size() && !conflict; ++i) {
      const std::string name = dra::SliceName(opt_.node, i);
      auto it = by_name.find(name);
      dra::SliceMeta meta{opt_.node,  node_uid_,
                          generation, static_cast<int64_t>(slices.size()),
                          i,          it == by_name.end() ? "" : it->second->resource_version};
      const std::string body = dra::SliceJson(meta, slices[i]);
      auto w = it == by_name.end()
                   ? Call("POST", absl::StrCat(kSlices, "?fieldValidation=Strict"), body)
                   : Call("PUT", absl::StrCat(kSlices, "/", name, "?fieldValidation=Strict"), body);
      if (!w.ok()) return w.status();
      if (w->code == 409) {
        conflict = true;
      } else if (!Ok(w->code)) {
        return absl::InvalidArgumentError(
            absl::StrCat(it == by_name.end() ? "creating " : "updating ", name, ": ", Refusal(*w)));
      } else {
        ++writes;
      }
    }
    for (const dra::ListedSlice& s : *listed) {
      if (conflict) break;
      bool ours = false;
      for (size_t i = 0; i < slices.size() && !ours; ++i)
        ours = s.name == dra::SliceName(opt_.node, i);
      if (ours) continue;
      auto w = Call("DELETE", absl::StrCat(kSlices, "/", s.name), "");
      if (!w.ok()) return w.status();
      if (w->code == 409) {
        conflict = true;
      } else if (!Ok(w->code) && w->code != 404) {
        return absl::InvalidArgumentError(absl::StrCat("deleting ", s.name, ": ", Refusal(*w)));
      } else if (Ok(w->code)) {
        ++writes;
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    stats_.writes += writes;
    if (!conflict) {
      stats_.generation = generation;
      stats_.slices = slices.size();
      return absl::OkStatus();
    }
    ++stats_.conflicts;
  }
  return absl::AbortedError(absl::StrCat("ResourceSlices of ", opt_.node, ": ",
                                         opt_.max_conflicts + 1,
                                         " conflicts in a row (another writer?)"));
}

absl::Status DraSlices::SyncCondition(const Desired& d) {
  const std::string key =
      absl::StrCat(d.condition_status, "\n", d.condition_reason, "\n", d.condition_message);
  if (key == condition_written_) return absl::OkStatus();
  const std::string now = dra::Rfc3339(absl::Now());
  // The transition is when the status last changed, not every message's change.
  if (d.condition_status != condition_status_) condition_transition_ = now;
  nlohmann::json cond = {
      {"type", kNodeCondition},       {"status", d.condition_status},
      {"reason", d.condition_reason}, {"message", d.condition_message},
      {"lastHeartbeatTime", now},     {"lastTransitionTime", condition_transition_}};
  const nlohmann::json patch = {{"status", {{"conditions", nlohmann::json::array({cond})}}}};
  auto r = Call("PATCH", absl::StrCat("/api/v1/nodes/", opt_.node, "/status"), patch.dump(),
                "application/strategic-merge-patch+json");
  if (!r.ok()) return r.status();
  if (r->code == 404 || r->code == 403) {
    // No such node (outside a cluster) or no right to its status: the slices are what matter.
    Log(LogLevel::kWarning, "DRA: node condition not written: ", Refusal(*r));
    condition_written_ = key;
    return absl::OkStatus();
  }
  if (!Ok(r->code)) {
    return absl::InvalidArgumentError(absl::StrCat("node condition: ", Refusal(*r)));
  }
  condition_written_ = key;
  condition_status_ = d.condition_status;
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.writes;
  return absl::OkStatus();
}

}  // namespace fabric
