// HostSource by discovery here: the sysfs/procfs roots and the agent config file, read as the
// agent reads them (--sysfs/--procfs).
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "agent/config/config.h"
#include "agent/fabricctl/host_source.h"
#include "agent/hostfs/host_fs.h"
#include "agent/inventory/discovery/discovery.h"
#include "agent/inventory/discovery/parse.h"
#include "agent/inventory/topology/nccl_topo.h"
#include "agent/policy/health/health.h"
#include "agent/policy/place/place.h"
#include "agent/policy/select/env.h"
#include "agent/policy/select/gpu_names.h"
#include "agent/policy/select/pairing.h"
#include "agent/policy/select/select.h"
#include "agent/publish/metrics/port_counters.h"

namespace fabric::ctl {
namespace {

class LocalSource : public HostSource {
 public:
  explicit LocalSource(LocalOptions opt) : opt_(std::move(opt)) {}

  absl::StatusOr<v1::Host> Inventory() override {
    auto loaded = Load();
    if (!loaded.ok()) return loaded.status();
    return std::move(loaded->host);
  }

  absl::StatusOr<v1::Selection> Select(const v1::SelectNicsRequest& req) override {
    auto loaded = Load();
    if (!loaded.ok()) return loaded.status();
    const v1::Host& host = loaded->host;
    auto sel = launch::SelectOnHost(host, loaded->config.selection(), req,
                                    absl::StrCat("under ", host.sysfs_root(), "/class/infiniband"));
    if (absl::IsNotFound(sel.status()) && host.rdma_devices().empty()) return sel.status();
    if (sel.ok()) return sel;
    std::string msg(sel.status().message());
    // Point at discovery problems that explain an unknown GPU.
    for (const v1::FieldProblem& p : host.problems()) {
      for (const std::string& g : req.gpus()) {
        auto canon = ParsePciAddress(g);
        if (canon.ok() && p.path().find(*canon) != std::string::npos) {
          absl::StrAppend(&msg, "; ", *canon, " could not be read: ", p.reason());
        }
      }
    }
    // Bad input (malformed, duplicate, not a GPU) is a usage error; a GPU or port the host
    // lacks is a failed query.
    if (absl::IsInvalidArgument(sel.status())) return absl::InvalidArgumentError(msg);
    return absl::FailedPreconditionError(msg);
  }

  absl::StatusOr<v1::PlaceResponse> Place(const v1::PlaceRequest& req) override {
    auto loaded = Load();
    if (!loaded.ok()) return loaded.status();
    auto placed =
        fabric::Place(loaded->host, req, loaded->config.selection(), ProcessMigResolver());
    if (placed.ok() || absl::IsInvalidArgument(placed.status())) return placed;
    return absl::FailedPreconditionError(placed.status().message());
  }

  // Discovery once per command: the second reading reads the same ports' files again.
  absl::StatusOr<v1::PortCountersResponse> Counters(
      const v1::GetPortCountersRequest& req) override {
    if (!counters_host_) {
      auto loaded = Load();
      if (!loaded.ok()) return loaded.status();
      counters_host_ = std::move(loaded->host);
    }
    HostFsImpl sysfs(opt_.sysfs);
    return metrics::ReadHostPortCounters(*counters_host_, sysfs, req);
  }

  // What cannot be discovered is UNKNOWN: nothing is known to be wrong with the host.
  HealthReport Health() override {
    HealthReport r;
    auto loaded = Load();
    if (!loaded.ok()) {
      v1::Finding f;
      f.set_severity(v1::SEVERITY_UNKNOWN);
      f.set_check("discovery");
      f.set_message(std::string(loaded.status().message()));
      AddFinding(&r.health, std::move(f));
      return r;
    }
    r.health = EvaluateHealth(loaded->host, loaded->config.selection());
    r.host = std::move(loaded->host);
    return r;
  }

  absl::StatusOr<HealthReport> Liveness() override {
    return absl::InvalidArgumentError(
        "--liveness asks the agent; it does not go with --sysfs/--procfs");
  }

 private:
  struct Loaded {
    v1::Host host;
    v1::AgentConfig config;
  };

  // The config first (a bad one is a usage error), then discovery (3: the roots cannot be read).
  absl::StatusOr<Loaded> Load() const {
    Loaded out;
    if (!opt_.config.empty()) {
      auto config = LoadConfig(opt_.config);
      if (!config.ok()) return UsageError(config.status());
      out.config = *std::move(config);
    }
    HostFsImpl sysfs(opt_.sysfs);
    HostFsImpl procfs(opt_.procfs);
    auto host = Discover(sysfs, procfs);
    if (!host.ok()) return UnreadableError(host.status());
    out.host = *std::move(host);
    ApplyNcclTopology(out.config.selection().nccl_topo_file(), nullptr, &out.host);
    // As the agent does per snapshot: select and topo read the same host-wide pairing.
    *out.host.mutable_pairing() = PairGpus(out.host, out.config.selection());
    return out;
  }

  LocalOptions opt_;
  std::optional<v1::Host> counters_host_;
};

}  // namespace

std::unique_ptr<HostSource> LocalHostSource(const LocalOptions& local) {
  return std::make_unique<LocalSource>(local);
}

}  // namespace fabric::ctl
