#include "agent/fabricctl/client.h"

#include <grpcpp/grpcpp.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/common/errno.h"
#include "agent/common/strings.h"

namespace fabric {

#define FABRIC_GRPC_OR_RETURN(call)                               \
  do {                                                            \
    if (absl::Status st_ = FromGrpc(call); !st_.ok()) return st_; \
  } while (0)

absl::StatusOr<std::string> GrpcTarget(std::string_view target) {
  if (target.empty()) return absl::InvalidArgumentError("--target is empty");
  if (target.substr(0, 7) == "unix://") return absl::StrCat("unix:", Av(target.substr(7)));
  if (target.substr(0, 5) == "unix:") return std::string(target);
  if (target[0] == '/' || target[0] == '.') return absl::StrCat("unix:", Av(target));
  return std::string(target);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentialsFor(
    const ClientTls& tls) {
  if (!tls.on()) return grpc::InsecureChannelCredentials();
  if (tls.cert.empty() != tls.key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  grpc::SslCredentialsOptions o;
  for (auto [flag, path, into] : {std::tuple{"--tls-ca", &tls.ca, &o.pem_root_certs},
                                  std::tuple{"--tls-cert", &tls.cert, &o.pem_cert_chain},
                                  std::tuple{"--tls-key", &tls.key, &o.pem_private_key}}) {
    if (path->empty()) continue;  // No --tls-ca: the system's roots.
    std::ifstream in(*path, std::ios::binary);
    if (!in.is_open()) {
      return absl::InvalidArgumentError(absl::StrCat(flag, "=", *path, ": ", ErrnoText(errno)));
    }
    std::string pem((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (pem.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(flag, "=", *path, ": missing or empty"));
    }
    *into = std::move(pem);
  }
  return grpc::SslCredentials(o);
}

AgentClient::AgentClient(const std::string& grpc_target, absl::Duration timeout,
                         std::shared_ptr<grpc::ChannelCredentials> credentials)
    : target_(grpc_target),
      timeout_(timeout),
      channel_(grpc::CreateChannel(grpc_target, std::move(credentials))),
      stub_(v1::FabricAgent::NewStub(channel_)) {}

std::unique_ptr<grpc::ClientContext> AgentClient::Context(absl::Duration timeout) const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + absl::ToChronoNanoseconds(timeout));
  return ctx;
}

absl::Status AgentClient::FromGrpc(const grpc::Status& s) const {
  if (s.ok()) return absl::OkStatus();
  const auto code = static_cast<absl::StatusCode>(s.error_code());
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE ||
      s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    return absl::Status(
        code, absl::StrCat("fabric-agent not serving at ", target_, " (", s.error_message(), ")"));
  }
  return absl::Status(code, s.error_message());
}

absl::StatusOr<v1::Inventory> AgentClient::GetInventory() {
  v1::Inventory out;
  auto ctx = Context();
  FABRIC_GRPC_OR_RETURN(stub_->GetInventory(ctx.get(), v1::GetInventoryRequest(), &out));
  return out;
}

absl::StatusOr<v1::Selection> AgentClient::SelectNics(const std::vector<std::string>& gpus,
                                                      bool include_rejected,
                                                      const v1::VisibleDevices* visible) {
  v1::SelectNicsRequest req;
  req.set_include_rejected(include_rejected);
  for (const std::string& g : gpus) req.add_gpus(g);
  if (visible != nullptr) *req.mutable_visible() = *visible;
  v1::Selection out;
  auto ctx = Context();
  FABRIC_GRPC_OR_RETURN(stub_->SelectNics(ctx.get(), req, &out));
  return out;
}

absl::StatusOr<v1::PlaceResponse> AgentClient::Place(const v1::PlaceRequest& req) {
  v1::PlaceResponse out;
  auto ctx = Context();
  FABRIC_GRPC_OR_RETURN(stub_->Place(ctx.get(), req, &out));
  return out;
}

absl::StatusOr<v1::Health> AgentClient::GetHealth() {
  v1::Health out;
  auto ctx = Context();
  FABRIC_GRPC_OR_RETURN(stub_->GetHealth(ctx.get(), v1::GetHealthRequest(), &out));
  return out;
}

absl::StatusOr<v1::AnnounceResponse> AgentClient::Announce(const v1::AnnounceRequest& req) {
  v1::AnnounceResponse out;
  auto ctx = Context();
  FABRIC_GRPC_OR_RETURN(stub_->Announce(ctx.get(), req, &out));
  return out;
}

absl::StatusOr<v1::ListAnnouncementsResponse> AgentClient::ListAnnouncements(
    const std::string& container_id) {
  v1::ListAnnouncementsRequest req;
  req.set_container_id(container_id);
  v1::ListAnnouncementsResponse out;
  auto ctx = Context();
  FABRIC_GRPC_OR_RETURN(stub_->ListAnnouncements(ctx.get(), req, &out));
  return out;
}

absl::StatusOr<v1::ProbeResult> AgentClient::RunProbe(const v1::RunProbeRequest& req,
                                                      absl::Duration timeout) {
  v1::ProbeResult out;
  auto ctx = Context(timeout);
  FABRIC_GRPC_OR_RETURN(stub_->RunProbe(ctx.get(), req, &out));
  return out;
}

absl::StatusOr<v1::ListProbeResultsResponse> AgentClient::ListProbeResults(
    const v1::ListProbeResultsRequest& req) {
  v1::ListProbeResultsResponse out;
  auto ctx = Context();
  FABRIC_GRPC_OR_RETURN(stub_->ListProbeResults(ctx.get(), req, &out));
  return out;
}

absl::Status AgentClient::Watch(const std::function<bool(const v1::InventoryEvent&)>& on_event,
                                absl::Duration duration) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  if (duration != absl::InfiniteDuration()) {
    ctx->set_deadline(std::chrono::system_clock::now() + absl::ToChronoNanoseconds(duration));
  }
  // Fail fast when the agent is not there, instead of waiting out the whole duration.
  if (!channel_->WaitForConnected(std::chrono::system_clock::now() +
                                  absl::ToChronoNanoseconds(timeout_))) {
    return absl::UnavailableError(absl::StrCat("fabric-agent not serving at ", target_));
  }
  auto reader = stub_->WatchInventory(ctx.get(), v1::WatchInventoryRequest());
  v1::InventoryEvent event;
  while (reader->Read(&event)) {
    if (!on_event(event)) {
      ctx->TryCancel();
      (void)reader->Finish();
      return absl::OkStatus();
    }
  }
  grpc::Status s = reader->Finish();
  if (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) return absl::OkStatus();
  return FromGrpc(s);
}

absl::Status AgentClient::CheckServing() {
  auto stub = grpc::health::v1::Health::NewStub(channel_);
  grpc::health::v1::HealthCheckRequest req;
  req.set_service("fabric.v1.FabricAgent");
  grpc::health::v1::HealthCheckResponse resp;
  auto ctx = Context();
  if (absl::Status s = FromGrpc(stub->Check(ctx.get(), req, &resp)); !s.ok()) return s;
  if (resp.status() != grpc::health::v1::HealthCheckResponse::SERVING) {
    return absl::UnavailableError(
        absl::StrCat("fabric-agent at ", target_, " is ",
                     grpc::health::v1::HealthCheckResponse::ServingStatus_Name(resp.status())));
  }
  return absl::OkStatus();
}

}  // namespace fabric
