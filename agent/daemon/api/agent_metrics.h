// What a scrape of fabric-agent --metrics returns: the host's metrics (agent/publish/metrics:
// ports, counters read now, PCIe links) plus the agent's own: inventory age and rescans, health,
// the GPU-NIC distance of each GPU's chosen NIC, link flaps and GID table changes, absent
// devices, probe results and announcements. Everything is read from thread-safe sources, so
// the HTTP server's thread renders without touching the agent's loop.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "agent/daemon/api/service.h"
#include "agent/daemon/cycle/counters.h"
#include "agent/daemon/cycle/snapshot.h"
#include "agent/daemon/transport/api_server.h"
#include "agent/daemon/workers/announcer.h"
#include "agent/daemon/workers/device_plugin.h"
#include "agent/daemon/workers/health_monitor.h"
#include "agent/daemon/workers/prober.h"
#include "agent/hostfs/host_fs.h"

namespace fabric {

struct MetricsSources {
  const SnapshotStore* store = nullptr;
  const HostFs* sysfs = nullptr;
  const AgentCounters* counters = nullptr;
  const Prober* prober = nullptr;                 // Optional.
  const Announcer* announcer = nullptr;           // Optional.
  const HealthMonitor* health = nullptr;          // Optional.
  const ApiServer* api = nullptr;                 // Optional.
  const ApiCounters* api_counters = nullptr;      // Optional.
  const DevicePlugins* device_plugins = nullptr;  // Optional.
};

// The whole exposition, as of `now`.
std::string RenderAgentMetrics(const MetricsSources& src, absl::Time now);

}  // namespace fabric
