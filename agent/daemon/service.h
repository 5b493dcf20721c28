// The FabricAgent gRPC service over the snapshot store. Every call reads one immutable snapshot.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/daemon/announcer.h"
#include "agent/daemon/listener.h"
#include "agent/daemon/prober.h"
#include "agent/daemon/snapshot.h"
#include "fabric/v1/agent.grpc.pb.h"

namespace fabric {

// absl and gRPC share the canonical status codes; the message is kept as it is.
grpc::Status ToGrpc(const absl::Status& s);

// SelectNics and Ping use gRPC's callback API: they answer on the thread that read the request
// (no hand-off to a sync worker), and SelectNics sends a cached answer's bytes as they are. Ping
// shares that path so it stays the honest floor for SelectNics.
using FabricAgentBase = v1::FabricAgent::WithCallbackMethod_Ping<
    v1::FabricAgent::WithRawCallbackMethod_SelectNics<v1::FabricAgent::Service>>;

// Refusals of the API, for metrics: control calls denied, requests over a limit.
class ApiCounters {
 public:
  void Denied(std::string_view method, grpc::StatusCode code);
  void OverLimit(std::string_view limit);
  // (method, code name) -> count, and limit -> count.
  std::map<std::pair<std::string, std::string>, uint64_t> denied() const;
  std::map<std::string, uint64_t> over_limit() const;
  std::atomic<int64_t> watches{0};  // Open watch streams.

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, uint64_t> denied_;
  std::map<std::string, uint64_t> over_limit_;
};

struct ServiceOptions {
  // How long a watch stream waits before it checks whether its client is gone.
  absl::Duration poll = absl::Seconds(1);
  // A watch client that has not taken an event for this long (stuck, or far too slow) is
  // dropped, so that it holds neither a server thread nor an old snapshot for long.
  absl::Duration watch_timeout = absl::Seconds(30);
  // Who is behind each connection; null: every caller may make control calls (in-process tests).
  const CallerTable* callers = nullptr;
  // Each open watch stream holds a server thread.
  size_t max_watches = 128;
  size_t max_watches_per_caller = 16;
  ApiCounters* counters = nullptr;  // Optional.
};

class FabricAgentService final : public FabricAgentBase {
 public:
  // `announcer` and `prober` may be null (their methods then answer UNAVAILABLE).
  explicit FabricAgentService(const SnapshotStore* store, Announcer* announcer = nullptr,
                              Prober* prober = nullptr, ServiceOptions options = {});
  ~FabricAgentService() override;

  grpc::Status GetInventory(grpc::ServerContext* ctx, const v1::GetInventoryRequest* req,
                            v1::Inventory* out) override;
  grpc::ServerUnaryReactor* SelectNics(grpc::CallbackServerContext* ctx,
                                       const grpc::ByteBuffer* req, grpc::ByteBuffer* out) override;
  grpc::Status Place(grpc::ServerContext* ctx, const v1::PlaceRequest* req,
                     v1::PlaceResponse* out) override;
  grpc::Status WatchInventory(grpc::ServerContext* ctx, const v1::WatchInventoryRequest* req,
                              grpc::ServerWriter<v1::InventoryEvent>* writer) override;
  grpc::Status GetHealth(grpc::ServerContext* ctx, const v1::GetHealthRequest* req,
                         v1::Health* out) override;
  grpc::Status Announce(grpc::ServerContext* ctx, const v1::AnnounceRequest* req,
                        v1::AnnounceResponse* out) override;
  grpc::Status ListAnnouncements(grpc::ServerContext* ctx, const v1::ListAnnouncementsRequest* req,
                                 v1::ListAnnouncementsResponse* out) override;
  grpc::Status RunProbe(grpc::ServerContext* ctx, const v1::RunProbeRequest* req,
                        v1::ProbeResult* out) override;
  grpc::Status ListProbeResults(grpc::ServerContext* ctx, const v1::ListProbeResultsRequest* req,
                                v1::ListProbeResultsResponse* out) override;
  grpc::ServerUnaryReactor* Ping(grpc::CallbackServerContext* ctx, const v1::PingRequest*,
                                 v1::PingResponse*) override {
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

 private:
  absl::StatusOr<std::shared_ptr<const Snapshot>> Ready() const;
  // Control calls (those that make the agent send, probe or change something) need a caller
  // who may make them: PERMISSION_DENIED, or UNAUTHENTICATED where the connection carries no
  // identity. Logged and counted.
  grpc::Status AuthorizeControl(const grpc::ServerContext* ctx, std::string_view method);
  std::optional<Caller> CallerOf(const grpc::ServerContext* ctx) const;
  // SelectNics' answer as serialized bytes, from the snapshot's cache or computed into it.
  absl::StatusOr<std::shared_ptr<const std::string>> Select(const v1::SelectNicsRequest& req);

  const SnapshotStore* store_;
  Announcer* announcer_;
  Prober* prober_;
  ServiceOptions opt_;
  ApiCounters own_counters_;
  ApiCounters* counters_;

  // Writes to watch clients in progress, by context, with when they started; a reaper thread
  // cancels those older than watch_timeout_.
  void Reap();
  std::mutex watch_mu_;
  std::condition_variable watch_cv_;
  std::map<grpc::ServerContext*, absl::Time> writing_;
  std::map<std::string, size_t> watches_by_caller_;  // Open watch streams per Caller::Key().
  size_t watches_ = 0;
  bool stopping_ = false;
  std::thread reaper_;
};

}  // namespace fabric
