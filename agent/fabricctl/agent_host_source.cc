// HostSource through the node's fabric-agent (gRPC over its unix socket, TCP or TLS): its
// inventory, its selection policy, its health verdict.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "agent/fabricctl/client.h"
#include "agent/fabricctl/host_source.h"
#include "agent/policy/health/health.h"
#include "agent/policy/select/gpu_names.h"

namespace fabric::ctl {
namespace {

class AgentSource : public HostSource {
 public:
  explicit AgentSource(CommonOptions common) : common_(std::move(common)) {}

  absl::StatusOr<v1::Host> Inventory() override {
    auto client = Client();
    if (!client.ok()) return client.status();
    auto inv = (*client)->GetInventory();
    if (!inv.ok()) return inv.status();
    return std::move(*inv->mutable_host());
  }

  // The agent reads the request as local discovery would (RequestedGpus), against its inventory.
  absl::StatusOr<v1::Selection> Select(const v1::SelectNicsRequest& req) override {
    auto client = Client();
    if (!client.ok()) return client.status();
    return (*client)->SelectNics(req);
  }

  absl::StatusOr<v1::PlaceResponse> Place(const v1::PlaceRequest& req) override {
    auto client = Client();
    if (!client.ok()) return client.status();
    return (*client)->Place(req);
  }

  absl::StatusOr<v1::PortCountersResponse> Counters(
      const v1::GetPortCountersRequest& req) override {
    auto client = Client();
    if (!client.ok()) return client.status();
    return (*client)->GetPortCounters(req);
  }

  HealthReport Health() override {
    HealthReport r;
    auto client = Client();
    if (!client.ok()) return NotAnswering(client.status());
    auto health = (*client)->GetHealth();
    if (!health.ok()) return NotAnswering(health.status());
    r.health = *std::move(health);
    auto inv = (*client)->GetInventory();
    if (inv.ok()) r.host = std::move(*inv->mutable_host());
    return r;
  }

  absl::StatusOr<HealthReport> Liveness() override {
    auto client = Client();
    if (!client.ok()) return NotAnswering(client.status());
    if (absl::Status s = (*client)->CheckServing(); !s.ok()) return NotAnswering(s);
    HealthReport r;
    r.health.set_verdict(v1::SEVERITY_OK);
    return r;
  }

 private:
  // One connection for the command's calls.
  absl::StatusOr<AgentClient*> Client() {
    if (!client_) {
      auto client = Connect(common_);
      if (!client.ok()) return client.status();
      client_ = *std::move(client);
    }
    return client_.get();
  }

  // An agent that does not answer is itself a CRITICAL finding ("daemon").
  static HealthReport NotAnswering(const absl::Status& s) {
    HealthReport r;
    v1::Finding f;
    f.set_severity(v1::SEVERITY_CRITICAL);
    f.set_check("daemon");
    f.set_message(std::string(s.message()));
    AddFinding(&r.health, std::move(f));
    return r;
  }

  CommonOptions common_;
  std::unique_ptr<AgentClient> client_;
};

}  // namespace

std::unique_ptr<HostSource> AgentHostSource(const CommonOptions& common) {
  return std::make_unique<AgentSource>(common);
}

}  // namespace fabric::ctl
