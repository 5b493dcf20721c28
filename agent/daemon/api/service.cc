#include "agent/daemon/api/service.h"

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/common/log.h"
#include "agent/common/version.h"
#include "agent/daemon/api/raw_call.h"
#include "agent/inventory/changes/changes.h"
#include "agent/policy/place/place.h"
#include "agent/policy/select/env.h"
#include "agent/policy/select/gpu_names.h"
#include "agent/policy/select/select.h"
#include "agent/policy/select/select_request.h"
#include "agent/publish/metrics/port_counters.h"

namespace fabric {
grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

FabricAgentService::FabricAgentService(const SnapshotStore* store, Announcer* announcer,
                                       Prober* prober, ServiceOptions options)
    : store_(store),
      announcer_(announcer),
      prober_(prober),
      opt_(options),
      counters_(options.counters != nullptr ? options.counters : &own_counters_),
      watches_(store, {options.watch_timeout, options.max_watches, options.max_watches_per_caller},
               counters_) {}

FabricAgentService::~FabricAgentService() {
  std::unique_lock<std::mutex> lock(blocking_mu_);
  blocking_cv_.wait(lock, [this] { return blocking_ == 0; });
}

std::optional<Caller> FabricAgentService::CallerOf(const grpc::ServerContextBase& ctx) const {
  if (opt_.callers == nullptr) return std::nullopt;
  return opt_.callers->Find(ctx.peer());
}

grpc::Status FabricAgentService::AuthorizeControl(const grpc::ServerContextBase& ctx,
                                                  std::string_view method) {
  if (opt_.callers == nullptr) return grpc::Status::OK;
  std::optional<Caller> caller = CallerOf(ctx);
  if (caller && caller->control) return grpc::Status::OK;
  const grpc::StatusCode code = !caller || caller->anonymous ? grpc::StatusCode::UNAUTHENTICATED
                                                             : grpc::StatusCode::PERMISSION_DENIED;
  const std::string who = caller ? caller->Name() : ctx.peer();
  const std::string why = caller ? caller->denied : "the connection carries no identity";
  Log(LogLevel::kWarning, "denied ", std::string(method), " to ", who, ": ", why);
  counters_->Denied(method, code);
  return grpc::Status(code, absl::StrCat(std::string(method), " is a control call: ", why));
}

bool FabricAgentService::Offload(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(blocking_mu_);
    if (blocking_ >= opt_.max_blocking_calls) return false;
    ++blocking_;
  }
  std::thread([this, fn = std::move(fn)] {
    fn();
    // Notified under the lock: the destructor may free the condition variable as soon as it
    // sees zero.
    std::lock_guard<std::mutex> lock(blocking_mu_);
    --blocking_;
    blocking_cv_.notify_all();
  }).detach();
  return true;
}

template <typename Req, typename Resp, typename Fn>
FabricAgentService::Reactor* FabricAgentService::Unary(Ctx* ctx, const Bytes* in, Bytes* out, Fn fn,
                                                       bool blocking) {
  Reactor* reactor = ctx->DefaultReactor();
  auto req = std::make_shared<Req>();
  if (absl::Status d = DecodeRequest(*in, req.get()); !d.ok()) {
    reactor->Finish(ToGrpc(d));
    return reactor;
  }
  auto run = [reactor, out, req, fn = std::move(fn)] {
    Resp resp;
    grpc::Status st = fn(*req, &resp);
    if (st.ok()) st = EncodeResponse(resp, out);
    reactor->Finish(st);
  };
  if (!blocking) {
    run();
  } else if (!Offload(run)) {
    counters_->OverLimit("max_threads");
    reactor->Finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                 absl::StrCat("too many calls running: --max-threads=",
                                              opt_.max_blocking_calls, " reached")));
  }
  return reactor;
}

absl::StatusOr<std::shared_ptr<const Snapshot>> FabricAgentService::Ready() const {
  auto s = store_->Current();
  if (s == nullptr) return absl::UnavailableError("the first inventory is not ready yet");
  return s;
}

template <typename Req, typename Resp, typename Fn>
FabricAgentService::Reactor* FabricAgentService::Control(Ctx* ctx, const Bytes* in, Bytes* out,
                                                         std::string_view method, Fn fn) {
  if (grpc::Status a = AuthorizeControl(*ctx, method); !a.ok()) {
    Reactor* reactor = ctx->DefaultReactor();
    reactor->Finish(a);
    return reactor;
  }
  return Unary<Req, Resp>(ctx, in, out, std::move(fn), /*blocking=*/true);
}

FabricAgentService::Reactor* FabricAgentService::GetInventory(Ctx* ctx, const Bytes* in,
                                                              Bytes* out) {
  return Unary<v1::GetInventoryRequest, v1::Inventory>(
      ctx, in, out, [this](const v1::GetInventoryRequest&, v1::Inventory* resp) {
        auto s = Ready();
        if (!s.ok()) return ToGrpc(s.status());
        FillInventory(**s, resp);
        return grpc::Status::OK;
      });
}

absl::StatusOr<std::shared_ptr<const std::string>> FabricAgentService::Select(
    const v1::SelectNicsRequest& req) {
  auto s = Ready();
  if (!s.ok()) return s.status();
  // The request's GPUs, read as fabricctl reads them on its own (RequestedGpus): the names
  // (visible ones expanded, all listed) are the key. Errors are not cached, so a bad request
  // costs a selection each time, and only well-formed ones fill the cache.
  auto gpus = RequestedGpus(*(*s)->host, req);
  if (!gpus.ok()) return gpus.status();
  std::string key = req.include_rejected() ? "+\n" : "-\n";
  // The rank and consumers as written: the same text gives the same answer.
  switch (req.rank_case()) {
    case v1::SelectNicsRequest::kRankGpu:
      absl::StrAppend(&key, "g", req.rank_gpu(), "\n");
      break;
    case v1::SelectNicsRequest::kRankPosition:
      absl::StrAppend(&key, "p", req.rank_position(), "\n");
      break;
    default:
      key.append("-\n");
  }
  absl::StrAppend(&key, req.consumers(), "\n", req.nccl_version(), "\n");
  for (const std::string& g : *gpus) {
    key.append(g);
    key.push_back('\n');
  }
  if (auto hit = selections_.Find(*s, key)) return hit;
  auto sel = SelectForRequest(*(*s)->host, *gpus, req, (*s)->policy, opt_.mig);
  if (!sel.ok()) return sel.status();
  if (!req.include_rejected()) {
    for (v1::GpuAssignment& a : *sel->mutable_assignments()) a.clear_rejected();
  }
  auto bytes = std::make_shared<const std::string>(sel->SerializeAsString());
  selections_.Insert(*s, key, bytes);
  return bytes;
}

FabricAgentService::Reactor* FabricAgentService::SelectNics(Ctx* ctx, const Bytes* in, Bytes* out) {
  // Answers from the cache of serialized selections: no message is built per call.
  Reactor* reactor = ctx->DefaultReactor();
  v1::SelectNicsRequest req;
  absl::Status st = DecodeRequest(*in, &req);
  if (st.ok()) {
    auto bytes = Select(req);
    if (bytes.ok()) *out = BytesToBuffer(**bytes);
    st = bytes.status();
  }
  reactor->Finish(ToGrpc(st));
  return reactor;
}

FabricAgentService::Reactor* FabricAgentService::Place(Ctx* ctx, const Bytes* in, Bytes* out) {
  return Unary<v1::PlaceRequest, v1::PlaceResponse>(
      ctx, in, out, [this](const v1::PlaceRequest& req, v1::PlaceResponse* resp) {
        auto s = Ready();
        if (!s.ok()) return ToGrpc(s.status());
        auto placed = fabric::Place(*(*s)->host, req, (*s)->policy, opt_.mig);
        if (!placed.ok()) return ToGrpc(placed.status());
        *resp = *std::move(placed);
        return grpc::Status::OK;
      });
}

grpc::ServerWriteReactor<FabricAgentService::Bytes>* FabricAgentService::WatchInventory(
    Ctx* ctx, const Bytes* in) {
  v1::WatchInventoryRequest req;
  if (absl::Status d = DecodeRequest(*in, &req); !d.ok()) return watches_.Refuse(ToGrpc(d));
  const std::optional<Caller> caller = CallerOf(*ctx);
  return watches_.Open(ctx, caller ? caller->Key() : ctx->peer(), caller ? caller->Name() : "");
}

FabricAgentService::Reactor* FabricAgentService::GetHealth(Ctx* ctx, const Bytes* in, Bytes* out) {
  return Unary<v1::GetHealthRequest, v1::Health>(
      ctx, in, out, [this](const v1::GetHealthRequest&, v1::Health* resp) {
        auto s = Ready();
        if (!s.ok()) return ToGrpc(s.status());
        *resp = CurrentHealth(**s, prober_);
        return grpc::Status::OK;
      });
}

FabricAgentService::Reactor* FabricAgentService::Ping(Ctx* ctx, const Bytes* in, Bytes* out) {
  return Unary<v1::PingRequest, v1::PingResponse>(
      ctx, in, out, [](const v1::PingRequest&, v1::PingResponse* resp) {
        resp->set_agent_version(kFabricVersion);
        return grpc::Status::OK;
      });
}

FabricAgentService::Reactor* FabricAgentService::Announce(Ctx* ctx, const Bytes* in, Bytes* out) {
  // Sends frames and waits for their repeats.
  return Control<v1::AnnounceRequest, v1::AnnounceResponse>(
      ctx, in, out, "Announce", [this](const v1::AnnounceRequest& req, v1::AnnounceResponse* resp) {
        if (announcer_ == nullptr) return grpc::Status(grpc::UNAVAILABLE, "announcing is off");
        auto done = announcer_->Announce(req);
        if (!done.ok()) return ToGrpc(done.status());
        for (auto& a : *done) *resp->add_announcements() = std::move(a);
        return grpc::Status::OK;
      });
}

FabricAgentService::Reactor* FabricAgentService::ListAnnouncements(Ctx* ctx, const Bytes* in,
                                                                   Bytes* out) {
  return Unary<v1::ListAnnouncementsRequest, v1::ListAnnouncementsResponse>(
      ctx, in, out,
      [this](const v1::ListAnnouncementsRequest& req, v1::ListAnnouncementsResponse* resp) {
        if (announcer_ == nullptr) return grpc::Status(grpc::UNAVAILABLE, "announcing is off");
        for (auto& a : announcer_->List(req.container_id())) {
          *resp->add_announcements() = std::move(a);
        }
        return grpc::Status::OK;
      });
}

FabricAgentService::Reactor* FabricAgentService::RunProbe(Ctx* ctx, const Bytes* in, Bytes* out) {
  // A probe runs for seconds.
  return Control<v1::RunProbeRequest, v1::ProbeResult>(
      ctx, in, out, "RunProbe", [this](const v1::RunProbeRequest& req, v1::ProbeResult* resp) {
        if (prober_ == nullptr) return grpc::Status(grpc::UNAVAILABLE, "probing is off");
        auto r = prober_->Run(req);
        if (!r.ok()) return ToGrpc(r.status());
        *resp = *std::move(r);
        return grpc::Status::OK;
      });
}

FabricAgentService::Reactor* FabricAgentService::ListProbeResults(Ctx* ctx, const Bytes* in,
                                                                  Bytes* out) {
  return Unary<v1::ListProbeResultsRequest, v1::ListProbeResultsResponse>(
      ctx, in, out,
      [this](const v1::ListProbeResultsRequest& req, v1::ListProbeResultsResponse* resp) {
        if (prober_ == nullptr) return grpc::Status(grpc::UNAVAILABLE, "probing is off");
        *resp = prober_->List(req);
        return grpc::Status::OK;
      });
}

// A read: open to every caller the socket or TLS admits, like GetInventory.
FabricAgentService::Reactor* FabricAgentService::GetPortCounters(Ctx* ctx, const Bytes* in,
                                                                 Bytes* out) {
  return Unary<v1::GetPortCountersRequest, v1::PortCountersResponse>(
      ctx, in, out,
      [this](const v1::GetPortCountersRequest& req, v1::PortCountersResponse* resp) {
        if (opt_.sysfs == nullptr) {
          return grpc::Status(grpc::StatusCode::UNAVAILABLE, "port counters are not served here");
        }
        auto s = Ready();
        if (!s.ok()) return ToGrpc(s.status());
        auto read = metrics::ReadHostPortCounters(*(*s)->host, *opt_.sysfs, req);
        if (!read.ok()) return ToGrpc(read.status());
        *resp = *std::move(read);
        return grpc::Status::OK;
      },
      /*blocking=*/true);
}

// A read: the request's variables judged against the agent's host; nothing is sent or changed.
FabricAgentService::Reactor* FabricAgentService::Doctor(Ctx* ctx, const Bytes* in, Bytes* out) {
  return Unary<v1::DoctorRequest, v1::DoctorReport>(
      ctx, in, out, [this, ctx](const v1::DoctorRequest& req, v1::DoctorReport* resp) {
        auto r = JudgeJob(req, [ctx] { return ctx->IsCancelled(); });
        if (!r.ok()) return ToGrpc(r.status());
        *resp = *std::move(r);
        return grpc::Status::OK;
      });
}

}  // namespace fabric
