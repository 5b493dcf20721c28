// The FabricAgent gRPC service over the snapshot store. Every call reads one immutable snapshot.
#pragma once

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/daemon/announcer.h"
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

class FabricAgentService final : public FabricAgentBase {
 public:
  // `poll` bounds how long a watch stream waits before it checks whether its client is gone.
  // `announcer` and `prober` may be null (their methods then answer UNAVAILABLE).
  // A watch client that has not taken an event for `watch_timeout` (stuck, or far too slow) is
  // dropped, so that it holds neither a server thread nor an old snapshot for long.
  explicit FabricAgentService(const SnapshotStore* store, Announcer* announcer = nullptr,
                              Prober* prober = nullptr, absl::Duration poll = absl::Seconds(1),
                              absl::Duration watch_timeout = absl::Seconds(30));
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
  // SelectNics' answer as serialized bytes, from the snapshot's cache or computed into it.
  absl::StatusOr<std::shared_ptr<const std::string>> Select(const v1::SelectNicsRequest& req);

  const SnapshotStore* store_;
  Announcer* announcer_;
  Prober* prober_;
  absl::Duration poll_;
  absl::Duration watch_timeout_;

  // Writes to watch clients in progress, by context, with when they started; a reaper thread
  // cancels those older than watch_timeout_.
  void Reap();
  std::mutex watch_mu_;
  std::condition_variable watch_cv_;
  std::map<grpc::ServerContext*, absl::Time> writing_;
  bool stopping_ = false;
  std::thread reaper_;
};

}  // namespace fabric
