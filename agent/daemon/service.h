// The FabricAgent gRPC service over the snapshot store. Every call reads one immutable snapshot.
#pragma once

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/daemon/snapshot.h"
#include "fabric/v1/agent.grpc.pb.h"

namespace fabric {

// absl and gRPC share the canonical status codes; the message is kept as it is.
grpc::Status ToGrpc(const absl::Status& s);

class FabricAgentService final : public v1::FabricAgent::Service {
 public:
  // `poll` bounds how long a watch stream waits before it checks whether its client is gone.
  explicit FabricAgentService(const SnapshotStore* store, absl::Duration poll = absl::Seconds(1))
      : store_(store), poll_(poll) {}

  grpc::Status GetInventory(grpc::ServerContext* ctx, const v1::GetInventoryRequest* req,
                            v1::Inventory* out) override;
  grpc::Status SelectNics(grpc::ServerContext* ctx, const v1::SelectNicsRequest* req,
                          v1::Selection* out) override;
  grpc::Status Place(grpc::ServerContext* ctx, const v1::PlaceRequest* req,
                     v1::PlaceResponse* out) override;
  grpc::Status WatchInventory(grpc::ServerContext* ctx, const v1::WatchInventoryRequest* req,
                              grpc::ServerWriter<v1::InventoryEvent>* writer) override;
  grpc::Status GetHealth(grpc::ServerContext* ctx, const v1::GetHealthRequest* req,
                         v1::Health* out) override;
  grpc::Status Ping(grpc::ServerContext*, const v1::PingRequest*, v1::PingResponse*) override {
    return grpc::Status::OK;
  }

 private:
  absl::StatusOr<std::shared_ptr<const Snapshot>> Ready() const;

  const SnapshotStore* store_;
  absl::Duration poll_;
};

}  // namespace fabric
