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
#include "agent/common/excerpt.h"
#include "agent/common/ip.h"
#include "agent/common/strings.h"

namespace fabric {

#define FABRIC_GRPC_OR_RETURN(call)                               \
  do {                                                            \
    if (absl::Status st_ = FromGrpc(call); !st_.ok()) return st_; \
  } while (0)

absl::StatusOr<std::string> GrpcTarget(std::string_view target) {
  if (target.empty()) return absl::InvalidArgumentError("--target is empty");
  std::string_view path;
  if (absl::StartsWith(Av(target), "unix://")) {
    path = target.substr(7);
  } else if (absl::StartsWith(Av(target), "unix:")) {
    path = target.substr(5);
  } else if (target[0] == '/' || target[0] == '.') {
    path = target;
  } else if (absl::StartsWith(Av(target), "dns:") || absl::StartsWith(Av(target), "ipv4:") ||
             absl::StartsWith(Av(target), "ipv6:")) {
    return std::string(target);  // gRPC's own target URIs, for those who need them.
  } else {
    const size_t scheme = target.find("://");
    if (scheme != std::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("--target: unknown scheme ",
                                                     Excerpt(target.substr(0, scheme), 20),
                                                     " (unix:///PATH, /PATH or HOST:PORT)"));
    }
    auto hp = ParseHostPort(target, /*allow_zero=*/false);
    if (!hp.ok())
      return absl::InvalidArgumentError(absl::StrCat("--target: ", hp.status().message()));
    if (hp->host.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--target: ", Excerpt(target, 40), " has no host (HOST:PORT)"));
    }
    return std::string(target);
  }
  if (path.empty() || path.find('\0') != std::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("--target: ", Excerpt(target, 40), " names no socket path"));
  }
  return absl::StrCat("unix:", Av(path));
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

namespace {

absl::Status NotReachable(std::string_view target, std::string_view grpc_message) {
  // gRPC's text ends in the OS's reason: "...last error: UNKNOWN: unix:/p: No such file or
  // directory". Keep that reason only, short.
  std::string_view reason = grpc_message;
  if (size_t at = reason.rfind(": "); at != std::string_view::npos) reason = reason.substr(at + 2);
  if (reason.size() > 80) reason = reason.substr(0, 80);
  if (absl::StartsWith(Av(target), "unix:")) target = target.substr(5);  // As --target takes it.
  if (absl::StrContains(Av(grpc_message), "Permission denied")) {
    return absl::UnavailableError(absl::StrCat(
        "fabric-agent at ", Av(target),
        " refused this user (Permission denied): its socket admits root and the socket's group"));
  }
  return absl::UnavailableError(
      absl::StrCat("fabric-agent is not running at ", Av(target), " (", Av(reason),
                   "): start it, or use --sysfs=/sys to read this host directly"));
}

}  // namespace

absl::Status AgentClient::FromGrpc(const grpc::Status& s) const {
  if (s.ok()) return absl::OkStatus();
  const auto code = static_cast<absl::StatusCode>(s.error_code());
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE &&
      (absl::StrContains(s.error_message(), "failed to connect") ||
       absl::StrContains(s.error_message(), "DNS resolution failed") ||
       absl::StrContains(s.error_message(), "Connection refused"))) {
    return NotReachable(target_, s.error_message());
  }
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE ||
      s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    return absl::Status(code, absl::StrCat("fabric-agent not serving at ", target_, " (",
                                           Excerpt(s.error_message(), 200), ")"));
  }
  return absl::Status(code, s.error_message());
}

absl::StatusOr<v1::Inventory> AgentClient::GetInventory() {
  v1::Inventory out;
  auto ctx = Context();
  FABRIC_GRPC_OR_RETURN(stub_->GetInventory(ctx.get(), v1::GetInventoryRequest(), &out));
  return out;
}

absl::StatusOr<v1::Selection> AgentClient::SelectNics(const v1::SelectNicsRequest& req) {
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

absl::StatusOr<v1::PortCountersResponse> AgentClient::GetPortCounters(
    const v1::GetPortCountersRequest& req) {
  v1::PortCountersResponse out;
  auto ctx = Context();
  FABRIC_GRPC_OR_RETURN(stub_->GetPortCounters(ctx.get(), req, &out));
  return out;
}

absl::StatusOr<v1::Health> AgentClient::GetHealth() {
  v1::Health out;
  auto ctx = Context();
  FABRIC_GRPC_OR_RETURN(stub_->GetHealth(ctx.get(), v1::GetHealthRequest(), &out));
  return out;
}

absl::StatusOr<v1::DoctorReport> AgentClient::Doctor(const v1::DoctorRequest& req) {
  v1::DoctorReport out;
  auto ctx = Context();
  FABRIC_GRPC_OR_RETURN(stub_->Doctor(ctx.get(), req, &out));
  return out;
}

absl::StatusOr<v1::PingResponse> AgentClient::Ping() {
  v1::PingResponse out;
  auto ctx = Context();
  FABRIC_GRPC_OR_RETURN(stub_->Ping(ctx.get(), v1::PingRequest(), &out));
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
  if (absl::Status s = Connected(); !s.ok()) return s;
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

absl::Status AgentClient::Connected() {
  // Fail at the first failed attempt, as unary calls do, instead of waiting out the timeout.
  const auto deadline = std::chrono::system_clock::now() + absl::ToChronoNanoseconds(timeout_);
  grpc_connectivity_state state = channel_->GetState(/*try_to_connect=*/true);
  while (state != GRPC_CHANNEL_READY) {
    if (state == GRPC_CHANNEL_TRANSIENT_FAILURE || state == GRPC_CHANNEL_SHUTDOWN) {
      // A unary call names the reason the channel failed.
      v1::Health unused;
      auto ctx = Context();
      grpc::Status s = stub_->GetHealth(ctx.get(), v1::GetHealthRequest(), &unused);
      if (s.ok()) return absl::OkStatus();
      return FromGrpc(s);
    }
    if (!channel_->WaitForStateChange(state, deadline)) {
      return absl::DeadlineExceededError(
          absl::StrCat("fabric-agent at ", target_, " did not answer within --timeout"));
    }
    state = channel_->GetState(/*try_to_connect=*/true);
  }
  return absl::OkStatus();
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
