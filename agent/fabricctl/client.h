// fabricctl's side of the gRPC API: one call per subcommand against a running fabric-agent.
#pragma once

#include <grpcpp/security/credentials.h>

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "fabric/v1/agent.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace fabric {

// The default --target: the agent's Unix socket.
inline constexpr char kDefaultTarget[] = "unix:///run/fabric-agent/agent.sock";

// A gRPC target from --target: "unix:///p", "unix:/p", "unix:p" and "/p" are Unix sockets;
// anything else is HOST:PORT (or any gRPC target URI). Empty is InvalidArgument.
absl::StatusOr<std::string> GrpcTarget(std::string_view target);

// TLS to a TCP target (--tls-ca, and --tls-cert/--tls-key for a client certificate): PEM paths.
struct ClientTls {
  std::string ca, cert, key;
  bool on() const { return !ca.empty() || !cert.empty() || !key.empty(); }
};
// The channel credentials for `tls`: insecure when it is off; an error names the unreadable flag.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentialsFor(
    const ClientTls& tls);

class AgentClient {
 public:
  // Every call is bounded by `timeout`. Connection failures come back as Unavailable or
  // DeadlineExceeded with the target in the message.
  AgentClient(
      const std::string& grpc_target, absl::Duration timeout,
      std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials());

  absl::StatusOr<v1::Inventory> GetInventory();
  absl::StatusOr<v1::Selection> SelectNics(const v1::SelectNicsRequest& req);
  absl::StatusOr<v1::PlaceResponse> Place(const v1::PlaceRequest& req);
  absl::StatusOr<v1::PortCountersResponse> GetPortCounters(const v1::GetPortCountersRequest& req);
  absl::StatusOr<v1::Health> GetHealth();
  absl::StatusOr<v1::DoctorReport> Doctor(const v1::DoctorRequest& req);
  absl::StatusOr<v1::PingResponse> Ping();
  absl::StatusOr<v1::AnnounceResponse> Announce(const v1::AnnounceRequest& req);
  absl::StatusOr<v1::ListAnnouncementsResponse> ListAnnouncements(const std::string& container_id);
  // A test takes as long as it takes: `timeout` bounds this call instead of the client's.
  absl::StatusOr<v1::ProbeResult> RunProbe(const v1::RunProbeRequest& req, absl::Duration timeout);
  absl::StatusOr<v1::ListProbeResultsResponse> ListProbeResults(
      const v1::ListProbeResultsRequest& req);
  // WatchInventory: calls `on_event` for each event until it returns false, the stream ends, or
  // `duration` passes (then OK). Connecting is bounded by the client's timeout.
  absl::Status Watch(const std::function<bool(const v1::InventoryEvent&)>& on_event,
                     absl::Duration duration);
  // grpc.health.v1 Check for the FabricAgent service: OK only when SERVING.
  absl::Status CheckServing();

  const std::string& target() const { return target_; }

 private:
  std::unique_ptr<grpc::ClientContext> Context(absl::Duration timeout) const;
  std::unique_ptr<grpc::ClientContext> Context() const { return Context(timeout_); }
  absl::Status FromGrpc(const grpc::Status& s) const;
  // OK once the channel is connected; the reason, at once, when connecting fails.
  absl::Status Connected();

  std::string target_;
  absl::Duration timeout_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::FabricAgent::Stub> stub_;
};

}  // namespace fabric
