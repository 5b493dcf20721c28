// Where fabricctl's host commands (inventory, topo, select, env, health, counters) get the host:
// discovered here from a sysfs/procfs root and a config file, or asked of the node's fabric-agent.
// Each command is written once against HostSource; errors come back as absl::Status classified for
// ExitCodeFor (ctl.h).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/fabricctl/ctl.h"
#include "agent/launch/job_scope.h"  // GpuRequest: the request both sources answer.
#include "fabric/v1/agent.pb.h"

namespace fabric::ctl {

// The health verdict and, when known, the host it is about.
struct HealthReport {
  v1::Health health;
  std::optional<v1::Host> host;
};

class HostSource {
 public:
  virtual ~HostSource() = default;

  // Everything discovered on the host.
  virtual absl::StatusOr<v1::Host> Inventory() = 0;
  // The RDMA port per GPU, rejected candidates included, under the source's selection policy.
  // `req` (GpuRequest): names, all, or visible, read by RequestedGpus (gpu_names.h) wherever it
  // is answered: by the agent, or here.
  virtual absl::StatusOr<v1::Selection> Select(const v1::SelectNicsRequest& req) = 0;
  // Ranked GPU sets (the Place API): the agent's answer, or the same policy run here.
  virtual absl::StatusOr<v1::PlaceResponse> Place(const v1::PlaceRequest& req) = 0;
  // One reading of the port counters `req` asks for (GetPortCounters), no rates. NotFound for a
  // device or port the host does not have.
  virtual absl::StatusOr<v1::PortCountersResponse> Counters(
      const v1::GetPortCountersRequest& req) = 0;
  // Never fails: a source that cannot answer is itself a finding.
  virtual HealthReport Health() = 0;
  // Only whether the source answers and reports itself serving (liveness probes); an error when
  // the source has no such notion.
  virtual absl::StatusOr<HealthReport> Liveness() = 0;
};

// Local discovery: what fabricctl does with --sysfs or --procfs.
struct LocalOptions {
  std::string sysfs = "/sys";
  std::string procfs = "/proc";
  std::string config;  // Agent config file (selection policy); empty: the defaults.
};
std::unique_ptr<HostSource> LocalHostSource(const LocalOptions& local);
// The agent at common.target; connects on first use.
std::unique_ptr<HostSource> AgentHostSource(const CommonOptions& common);

}  // namespace fabric::ctl
