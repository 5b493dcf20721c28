#include "agent/daemon/service.h"

#include <google/protobuf/util/time_util.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "agent/changes/changes.h"
#include "agent/common/log.h"
#include "agent/place/place.h"
#include "agent/select/select.h"

namespace fabric {
namespace {

void FillInventory(const Snapshot& s, v1::Inventory* out) {
  *out->mutable_host() = s.host;
  out->set_generation(s.generation);
  *out->mutable_discovered_at() =
      google::protobuf::util::TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(s.discovered_at));
  s.events.Fill(absl::Now(), s.event_window, out);
}

}  // namespace

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

void ApiCounters::Denied(std::string_view method, grpc::StatusCode code) {
  std::lock_guard<std::mutex> lock(mu_);
  ++denied_[{std::string(method),
             code == grpc::StatusCode::UNAUTHENTICATED ? "unauthenticated" : "permission_denied"}];
}

void ApiCounters::OverLimit(std::string_view limit) {
  std::lock_guard<std::mutex> lock(mu_);
  ++over_limit_[std::string(limit)];
}

std::map<std::pair<std::string, std::string>, uint64_t> ApiCounters::denied() const {
  std::lock_guard<std::mutex> lock(mu_);
  return denied_;
}

std::map<std::string, uint64_t> ApiCounters::over_limit() const {
  std::lock_guard<std::mutex> lock(mu_);
  return over_limit_;
}

FabricAgentService::FabricAgentService(const SnapshotStore* store, Announcer* announcer,
                                       Prober* prober, ServiceOptions options)
    : store_(store),
      announcer_(announcer),
      prober_(prober),
      opt_(options),
      counters_(options.counters != nullptr ? options.counters : &own_counters_),
      reaper_([this] { Reap(); }) {}

std::optional<Caller> FabricAgentService::CallerOf(const grpc::ServerContext* ctx) const {
  if (opt_.callers == nullptr) return std::nullopt;
  return opt_.callers->Find(ctx->peer());
}

grpc::Status FabricAgentService::AuthorizeControl(const grpc::ServerContext* ctx,
                                                  std::string_view method) {
  if (opt_.callers == nullptr) return grpc::Status::OK;
  std::optional<Caller> caller = CallerOf(ctx);
  if (caller && caller->control) return grpc::Status::OK;
  const grpc::StatusCode code = !caller || caller->anonymous ? grpc::StatusCode::UNAUTHENTICATED
                                                             : grpc::StatusCode::PERMISSION_DENIED;
  const std::string who = caller ? caller->Name() : ctx->peer();
  const std::string why = caller ? caller->denied : "the connection carries no identity";
  Log(LogLevel::kWarning, "denied ", std::string(method), " to ", who, ": ", why);
  counters_->Denied(method, code);
  return grpc::Status(code, absl::StrCat(std::string(method), " is a control call: ", why));
}

FabricAgentService::~FabricAgentService() {
  {
    std::lock_guard<std::mutex> lock(watch_mu_);
    stopping_ = true;
  }
  watch_cv_.notify_all();
  reaper_.join();
}

void FabricAgentService::Reap() {
  std::unique_lock<std::mutex> lock(watch_mu_);
  while (!stopping_) {
    absl::Time next = absl::InfiniteFuture();
    const absl::Time now = absl::Now();
    for (auto& [ctx, since] : writing_) {
      if (now - since >= opt_.watch_timeout) {
        Log(LogLevel::kWarning, "dropping watch client ", ctx->peer(), ": it took no event for ",
            absl::FormatDuration(now - since));
        ctx->TryCancel();
        since = absl::InfiniteFuture();  // Cancelled once; its Write returns and unregisters.
      } else {
        next = std::min(next, since + opt_.watch_timeout);
      }
    }
    // Sleeps without a timeout while no write is in progress: an idle agent does not wake.
    if (next == absl::InfiniteFuture()) {
      watch_cv_.wait(lock);
    } else {
      watch_cv_.wait_until(lock, absl::ToChronoTime(next));
    }
  }
}

absl::StatusOr<std::shared_ptr<const Snapshot>> FabricAgentService::Ready() const {
  auto s = store_->Current();
  if (s == nullptr) return absl::UnavailableError("the first inventory is not ready yet");
  return s;
}

grpc::Status FabricAgentService::GetInventory(grpc::ServerContext*, const v1::GetInventoryRequest*,
                                              v1::Inventory* out) {
  auto s = Ready();
  if (!s.ok()) return ToGrpc(s.status());
  FillInventory(**s, out);
  return grpc::Status::OK;
}

absl::StatusOr<std::shared_ptr<const std::string>> FabricAgentService::Select(
    const v1::SelectNicsRequest& req) {
  auto s = Ready();
  if (!s.ok()) return s.status();
  if (req.gpus().empty()) {
    return absl::InvalidArgumentError("gpus is empty: name at least one GPU by PCI address");
  }
  // The request as given is the key: errors are not cached, so a bad request costs a selection
  // each time, and only well-formed ones fill the cache.
  std::string key = req.include_rejected() ? "+\n" : "-\n";
  for (const std::string& g : req.gpus()) {
    key.append(g);
    key.push_back('\n');
  }
  if (auto hit = (*s)->selections.Find(key)) return hit;
  std::vector<std::string> gpus(req.gpus().begin(), req.gpus().end());
  auto sel = fabric::SelectNics((*s)->host, gpus, (*s)->policy);
  if (!sel.ok()) return sel.status();
  if (!req.include_rejected()) {
    for (v1::GpuAssignment& a : *sel->mutable_assignments()) a.clear_rejected();
  }
  auto bytes = std::make_shared<const std::string>(sel->SerializeAsString());
  (*s)->selections.Insert(key, bytes);
  return bytes;
}

grpc::ServerUnaryReactor* FabricAgentService::SelectNics(grpc::CallbackServerContext* ctx,
                                                         const grpc::ByteBuffer* req,
                                                         grpc::ByteBuffer* out) {
  auto* reactor = ctx->DefaultReactor();
  std::vector<grpc::Slice> slices;
  v1::SelectNicsRequest request;
  std::string in;
  if (req->Dump(&slices).ok()) {
    for (const grpc::Slice& sl : slices) {
      in.append(reinterpret_cast<const char*>(sl.begin()), sl.size());
    }
  }
  if (!request.ParseFromString(in)) {
    reactor->Finish(
        grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "SelectNicsRequest does not parse"));
    return reactor;
  }
  auto bytes = Select(request);
  if (!bytes.ok()) {
    reactor->Finish(ToGrpc(bytes.status()));
    return reactor;
  }
  grpc::Slice slice((*bytes)->data(), (*bytes)->size());
  *out = grpc::ByteBuffer(&slice, 1);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::Status FabricAgentService::Place(grpc::ServerContext*, const v1::PlaceRequest* req,
                                       v1::PlaceResponse* out) {
  auto s = Ready();
  if (!s.ok()) return ToGrpc(s.status());
  auto placed = fabric::Place((*s)->host, *req, (*s)->policy);
  if (!placed.ok()) return ToGrpc(placed.status());
  *out = *std::move(placed);
  return grpc::Status::OK;
}

grpc::Status FabricAgentService::WatchInventory(grpc::ServerContext* ctx,
                                                const v1::WatchInventoryRequest*,
                                                grpc::ServerWriter<v1::InventoryEvent>* writer) {
  auto first = Ready();
  if (!first.ok()) return ToGrpc(first.status());
  // Each open stream holds a server thread: bounded in total and per caller.
  const std::optional<Caller> caller = CallerOf(ctx);
  const std::string key = caller ? caller->Key() : ctx->peer();
  {
    std::lock_guard<std::mutex> lock(watch_mu_);
    const char* limit = nullptr;
    size_t bound = 0;
    if (watches_ >= opt_.max_watches) {
      limit = "max_watches", bound = opt_.max_watches;
    } else if (watches_by_caller_[key] >= opt_.max_watches_per_caller) {
      limit = "max_watches_per_caller", bound = opt_.max_watches_per_caller;
    }
    if (limit != nullptr) {
      if (watches_by_caller_[key] == 0) watches_by_caller_.erase(key);
      counters_->OverLimit(limit);
      return grpc::Status(
          grpc::StatusCode::RESOURCE_EXHAUSTED,
          absl::StrCat("too many watch streams: --", absl::StrReplaceAll(limit, {{"_", "-"}}), "=",
                       bound, " reached", caller ? absl::StrCat(" (", caller->Name(), ")") : ""));
    }
    ++watches_;
    ++watches_by_caller_[key];
    ++counters_->watches;
  }
  struct Release {
    FabricAgentService* self;
    const std::string& key;
    ~Release() {
      std::lock_guard<std::mutex> lock(self->watch_mu_);
      --self->watches_;
      if (--self->watches_by_caller_[key] == 0) self->watches_by_caller_.erase(key);
      --self->counters_->watches;
    }
  } release{this, key};
  std::shared_ptr<const Snapshot> last = *first;
  v1::InventoryEvent event;
  FillInventory(*last, event.mutable_inventory());
  // A write blocks while the client does not read (flow control): register it for the reaper.
  auto write = [&]() {
    {
      std::lock_guard<std::mutex> lock(watch_mu_);
      writing_[ctx] = absl::Now();
    }
    watch_cv_.notify_all();
    const bool ok = writer->Write(event);
    std::lock_guard<std::mutex> lock(watch_mu_);
    writing_.erase(ctx);
    return ok;
  };
  if (!write()) return grpc::Status::OK;  // The client left.
  // Each event's changes are against the last snapshot this client got, so a slow client that
  // skipped generations still learns everything that changed.
  while (!ctx->IsCancelled()) {
    auto next = store_->WaitNewer(last->generation, opt_.poll);
    if (store_->shutting_down()) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "fabric-agent is shutting down");
    }
    if (next == nullptr || next->generation <= last->generation) continue;
    event.Clear();
    FillInventory(*next, event.mutable_inventory());
    for (v1::InventoryChange& c : DiffHosts(last->host, next->host)) {
      next->events.SetCount(&c);
      *event.add_changes() = std::move(c);
    }
    if (!write()) return grpc::Status::OK;
    last = std::move(next);
  }
  return grpc::Status::CANCELLED;
}

grpc::Status FabricAgentService::GetHealth(grpc::ServerContext*, const v1::GetHealthRequest*,
                                           v1::Health* out) {
  auto s = Ready();
  if (!s.ok()) return ToGrpc(s.status());
  *out = CurrentHealth(**s, prober_, absl::Now());
  return grpc::Status::OK;
}

grpc::Status FabricAgentService::Announce(grpc::ServerContext* ctx, const v1::AnnounceRequest* req,
                                          v1::AnnounceResponse* out) {
  if (grpc::Status a = AuthorizeControl(ctx, "Announce"); !a.ok()) return a;
  if (announcer_ == nullptr) return grpc::Status(grpc::UNAVAILABLE, "announcing is off");
  auto done = announcer_->Announce(*req);
  if (!done.ok()) return ToGrpc(done.status());
  for (auto& a : *done) *out->add_announcements() = std::move(a);
  return grpc::Status::OK;
}

grpc::Status FabricAgentService::ListAnnouncements(grpc::ServerContext*,
                                                   const v1::ListAnnouncementsRequest* req,
                                                   v1::ListAnnouncementsResponse* out) {
  if (announcer_ == nullptr) return grpc::Status(grpc::UNAVAILABLE, "announcing is off");
  for (auto& a : announcer_->List(req->container_id())) *out->add_announcements() = std::move(a);
  return grpc::Status::OK;
}

grpc::Status FabricAgentService::RunProbe(grpc::ServerContext* ctx, const v1::RunProbeRequest* req,
                                          v1::ProbeResult* out) {
  if (grpc::Status a = AuthorizeControl(ctx, "RunProbe"); !a.ok()) return a;
  if (prober_ == nullptr) return grpc::Status(grpc::UNAVAILABLE, "probing is off");
  auto r = prober_->Run(*req);
  if (!r.ok()) return ToGrpc(r.status());
  *out = *std::move(r);
  return grpc::Status::OK;
}

grpc::Status FabricAgentService::ListProbeResults(grpc::ServerContext*,
                                                  const v1::ListProbeResultsRequest* req,
                                                  v1::ListProbeResultsResponse* out) {
  if (prober_ == nullptr) return grpc::Status(grpc::UNAVAILABLE, "probing is off");
  *out = prober_->List(*req);
  return grpc::Status::OK;
}

}  // namespace fabric
