// The daemon's state, shared by its start-up steps and loop (agent.cc) and the inventory cycle
// (inventory_cycle.cc). Only for this folder.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "agent/common/socket_file.h"
#include "agent/config/config.h"
#include "agent/daemon/agent.h"
#include "agent/daemon/agent_metrics.h"
#include "agent/daemon/announcer.h"
#include "agent/daemon/api_server.h"
#include "agent/daemon/event_sources.h"
#include "agent/daemon/ib_neighbors.h"
#include "agent/daemon/lldp_listener.h"
#include "agent/daemon/memory.h"
#include "agent/daemon/prober.h"
#include "agent/daemon/service.h"
#include "agent/daemon/snapshot.h"
#include "agent/daemon/tls.h"
#include "agent/inventory/changes/changes.h"
#include "agent/inventory/discovery/refresh.h"
#include "agent/inventory/hostfs/host_fs.h"
#include "agent/publish/metrics/http_server.h"

namespace fabric {

// Everything start-up builds; the steps' teardowns release it in reverse order.
struct AgentState {
  AgentState(const AgentOptions& o, Notifier* n)
      : opt(o), notifier(n), sysfs(o.sysfs), procfs(o.procfs) {}

  const AgentOptions& opt;
  Notifier* notifier;
  HostFsImpl sysfs;
  HostFsImpl procfs;

  int signal_fd = -1;
  v1::AgentConfig config;
  int lock_fd = -1;
  std::string lock_path;
  BoundSocketFile socket_file;  // Set once the API server is bound: teardown removes only that.
  std::string announce_socket;  // --announce-socket resolved ("auto"); empty: none.

  SnapshotStore store;
  uint64_t generation = 0;
  // The first inventory, for "GID table changed since start". Shared with the first snapshot
  // (Publish sets only its pairing, never GIDs).
  std::shared_ptr<const v1::Host> start_host = std::make_shared<const v1::Host>();
  std::string agent_findings_key;
  absl::Status last_scan;
  // While rescans are not trusted (transient read failures): since when, how many retries so
  // far, when the next one runs, and the finding that says so. Loop thread only.
  absl::Time stale_since = absl::InfiniteFuture();
  int stale_retries = 0;
  absl::Time stale_retry_at = absl::InfiniteFuture();
  std::optional<v1::Finding> stale_finding;
  std::string nfd_written;  // The NFD file's content as last written: unchanged is not rewritten.

  std::vector<std::unique_ptr<EventSource>> sources;
  std::unique_ptr<EventSource> config_watch;  // --config changes reload it, as SIGHUP does.
  std::unique_ptr<LldpListener> lldp;         // Null with --lldp=false.
  std::unique_ptr<IbNeighbors> ib;            // Null with --ib-neighbors=false.
  std::unique_ptr<Announcer> announcer;
  std::unique_ptr<Prober> prober;
  CallerTable callers;
  ApiCounters api_counters;
  std::unique_ptr<FabricAgentService> service;
  std::unique_ptr<ApiServer> api;
  std::unique_ptr<metrics::MetricsHttpServer> metrics;

  EventLog events;         // Loop thread only; each snapshot gets a copy.
  AgentCounters counters;  // Read by scrapes.
  HeapTrimmer trimmer;
  std::unique_ptr<TlsContext> tls;
};

// ---- inventory_cycle.cc ----

// Which kernel event sources work, for health and metrics.
void CountSources(AgentState& st);

// Builds and publishes a snapshot when the host, the policy or the agent's findings changed.
// `drift_of`: a safety-net rescan ("rescan (periodic)"): the served inventory is what events kept
// up to date, so each change it finds is one no event announced, or a targeted refresh gone
// wrong; logged as such and counted. The full result wins.
void Publish(AgentState& st, std::optional<RefreshedHost> host, bool policy_changed,
             const std::string& drift_of = "");

// A full rescan. `policy_changed`: the config was just reloaded, so publish even when the host is
// the same. `safety_net`: no event asked for it (periodic, reload), so whatever it finds that
// the served inventory lacks is drift of the targeted refreshes, logged and counted.
void Rescan(AgentState& st, const std::string& why, bool policy_changed = false,
            bool safety_net = false);

// What the events in `scope` changed: a targeted refresh, nothing for unrelated netdevs, or a
// full rescan when the scope or the plan says so.
void RefreshFor(AgentState& st, const ChangeScope& scope, const std::string& why);

}  // namespace fabric
