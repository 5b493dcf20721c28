// The daemon's state, built by its start-up steps (agent.cc) and released by their teardowns in
// reverse order, split by who owns each part. Only for this folder.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "agent/common/fd.h"
#include "agent/common/socket_file.h"
#include "agent/daemon/api/agent_metrics.h"
#include "agent/daemon/api/service.h"
#include "agent/daemon/cycle/cdi_publisher.h"
#include "agent/daemon/cycle/counters.h"
#include "agent/daemon/cycle/event_sources.h"
#include "agent/daemon/cycle/host_file_publisher.h"
#include "agent/daemon/cycle/inventory_cycle.h"
#include "agent/daemon/cycle/nfd_publisher.h"
#include "agent/daemon/cycle/pod_record_sweeper.h"
#include "agent/daemon/lifecycle/agent_options.h"
#include "agent/daemon/lifecycle/event_loop.h"
#include "agent/daemon/lifecycle/memory.h"
#include "agent/daemon/transport/api_server.h"
#include "agent/daemon/transport/tls.h"
#include "agent/daemon/workers/announcer.h"
#include "agent/daemon/workers/device_plugin.h"
#include "agent/daemon/workers/dra/dra_slices.h"
#include "agent/daemon/workers/dra/kubelet_plugin.h"
#include "agent/daemon/workers/health_monitor.h"
#include "agent/daemon/workers/ib_neighbors.h"
#include "agent/daemon/workers/lldp_listener.h"
#include "agent/daemon/workers/prober.h"
#include "agent/hostfs/host_fs.h"
#include "agent/hostfs/kmsg.h"
#include "agent/publish/kubeapi/api_client.h"
#include "agent/publish/metrics/http_server.h"
#include "fabric/v1/select.pb.h"

namespace fabric {

struct AgentState {
  AgentState(const AgentOptions& o, Notifier* n)
      : opt(o),
        notifier(n),
        sysfs(o.sysfs),
        procfs(o.procfs),
        cycle(&sysfs, &procfs, {o.rescan_interval, o.event_window}, &counters) {}

  const AgentOptions& opt;
  Notifier* notifier;
  HostFsImpl sysfs;
  HostFsImpl procfs;
  AgentCounters counters;  // Written by the loop and the cycle, read by scrapes.

  // The process: signals, the config, the socket's lock, the heap.
  struct Process {
    UniqueFd signals;
    v1::AgentConfig config;
    UniqueFd lock;
    std::string lock_path;
    BoundSocketFile socket_file;  // Set once the API server is bound: teardown removes only that.
    std::string announce_socket;  // --announce-socket resolved ("auto"); empty: none.
    HeapTrimmer trimmer;
  } process;

  // The inventory: the cycle with its store, and its publishers.
  InventoryCycle cycle;
  std::unique_ptr<NfdPublisher> nfd;  // Null without --nfd-features-dir.
  std::unique_ptr<CdiPublisher> cdi;  // Null with --no-cdi, --cdi-dir= or another sysfs root.
  std::unique_ptr<HostFilePublisher> host_file;   // Null with --host-file-dir= or another root.
  std::unique_ptr<PodRecordSweeper> pod_records;  // Beside host_file.
  // Null without device_plugin resources, with --device-plugin-dir= or another root.
  std::unique_ptr<DevicePlugins> device_plugins;
  std::unique_ptr<kubeapi::KubeApi> dra_api;  // From --dra's config until the driver starts.
  std::string dra_node;                       // This node's name for --dra.
  kubeapi::KubeConfig dra_config;             // The kubelet plugin's client is its own.
  std::unique_ptr<DraSlices> dra;             // Null without --dra.
  std::unique_ptr<DraPlugin> dra_plugin;      // Null without --dra or --dra-kubelet-dir.

  // What wakes the loop: kernel events, the config file, and the loop itself.
  struct Events {
    std::vector<std::unique_ptr<EventSource>> kernel;
    std::unique_ptr<EventSource> config_watch;  // --config changes reload it, as SIGHUP does.
    EventLoop loop;
  } events;

  // Workers beside the loop, each with threads or sockets of its own.
  struct Workers {
    std::unique_ptr<LldpListener> lldp;  // Null with --lldp=false.
    std::unique_ptr<IbNeighbors> ib;     // Null with --ib-neighbors=false.
    std::unique_ptr<Announcer> announcer;
    std::unique_ptr<Prober> prober;
    // Counters, carrier changes, AER and vanished devices, polled by the loop; a publisher.
    std::unique_ptr<HealthMonitor> health;
    // The kernel log for it (null: not read); the loop polls the source's descriptor.
    std::unique_ptr<KmsgSourceImpl> kmsg_source;
    std::unique_ptr<KmsgReader> kmsg;
  } workers;

  // What serves: TLS, the gRPC service and server, the metrics endpoint.
  struct Api {
    std::unique_ptr<TlsContext> tls;
    CallerTable callers;
    ApiCounters counters;
    std::unique_ptr<FabricAgentService> service;
    std::unique_ptr<ApiServer> server;
    std::unique_ptr<metrics::MetricsHttpServer> metrics;
  } api;
};

// The loop's sources over the state (loop.cc): signals, the config file, neighbours, kernel
// events, the refresh and reload timers, the heap trimmer and the watchdog. Runs until SIGTERM or
// SIGINT.
void RunLoop(AgentState& st);

// Which kernel event sources work, for health and metrics.
void CountSources(AgentState& st);

}  // namespace fabric
