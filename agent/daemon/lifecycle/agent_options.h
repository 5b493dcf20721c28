// What fabric-agent is started with (its flags, parsed in main.cc) and how it tells systemd it is
// ready: the inputs of RunAgent (agent.h), apart so that the start-up state (agent_state.h) holds
// them without including what builds it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "agent/daemon/transport/tls.h"
#include "agent/publish/hostfile/host_file.h"

namespace fabric {

struct AgentOptions {
  std::string socket = "/run/fabric-agent/agent.sock";
  std::string socket_group;  // Empty: the process's group.
  std::string listen;        // "HOST:PORT" for TCP, empty for none; port 0 picks one.
  TlsOptions tls;            // TLS on `listen`; without it, TCP serves reads only.
  bool relay_unix = false;   // The socket through the rapid-reset guard too (--relay-unix).
  // Besides root and the agent's own user, members of this group may make control calls
  // (Announce, RunProbe) over the Unix socket. Empty: none.
  std::string control_group;
  // Bounds on what callers can make the agent hold (each refusal is RESOURCE_EXHAUSTED).
  size_t max_connections = 1024;       // per listener
  int max_streams = 32;                // concurrent calls per connection
  int max_threads = 256;               // server threads
  size_t max_watches = 128;            // WatchInventory streams in total ...
  size_t max_watches_per_caller = 16;  // ... and per caller (uid, or TCP address)
  std::string sysfs = "/sys";
  std::string procfs = "/proc";
  std::string config;  // JSON AgentConfig; empty: defaults.
  absl::Duration rescan_interval = absl::Minutes(5);
  std::string nfd_features_dir;
  // The CDI spec of the RDMA devices (agent/publish/cdi) is kept in this directory; empty: off.
  // Only for the live host (sysfs "/sys") unless set explicitly (`cdi_dir_explicit`): a spec of
  // another sysfs root names device nodes this host does not have.
  std::string cdi_dir = "/var/run/cdi";
  bool cdi_dir_explicit = false;
  // Prefix of the host paths of device nodes in the CDI spec and the device plugins' Allocate
  // answers (tests, hosts whose /dev is elsewhere).
  std::string dev_root;
  // The published host file (agent/publish/hostfile) is kept in this directory; empty: off. As
  // cdi_dir, only for the live host unless set explicitly.
  std::string host_file_dir = hostfile::kDefaultDir;
  bool host_file_dir_explicit = false;
  // The kubelet's device plugin directory: with resources in the config's device_plugin section
  // the agent serves them there (agent/daemon/workers/device_plugin.h); empty: off. As cdi_dir,
  // only for the live host unless set explicitly.
  std::string device_plugin_dir = "/var/lib/kubelet/device-plugins";
  bool device_plugin_dir_explicit = false;
  // The DRA driver (ResourceSlices of this node's NICs with health as device taints, the node's
  // FabricHealthy condition): off unless `dra`. The API server from `kubeconfig`, else the pod's
  // service account; this node as `node_name`, else $NODE_NAME, else the host name.
  bool dra = false;
  std::string kubeconfig;
  std::string node_name;
  // The kubelet's directory, where --dra serves its kubelet plugin (plugins_registry/ and
  // plugins/rdma.fabric.io/ below it); empty: slices only, no plugin.
  std::string dra_kubelet_dir = "/var/lib/kubelet";
  // The health monitor's memory (health-memory.pb) is kept in this directory so that a restart
  // forgets nothing; empty: not kept. As cdi_dir, only for the live host unless set explicitly.
  std::string state_dir = "/var/lib/fabric-agent";
  bool state_dir_explicit = false;
  // The kernel log the health monitor reads (NIC and PCIe fault lines); empty: none. As cdi_dir,
  // only for the live host unless set explicitly (tests pass a FIFO).
  std::string kmsg = "/dev/kmsg";
  bool kmsg_explicit = false;
  // The helper mounted into pods the device plugins allocate for (read-only at
  // /usr/local/bin/fabric-env); empty: none.
  std::string pod_helper = "/usr/bin/fabric-env";
  // NCCL's environment plugin the device plugins mount beside the helper (NCCL_ENV_PLUGIN);
  // empty: none, the NCCL variables are set at Allocate as before.
  std::string pod_nccl_env_plugin;
  // Events within this window after the first are handled by one rescan.
  absl::Duration debounce = absl::Milliseconds(50);
  int netlink_rcvbuf = 1 << 20;
  // fabric-cni hands announcement schedules over here. "auto": beside `socket`, named after it
  // (announce::HandoffSocketBeside); empty: hand-offs are not accepted.
  std::string announce_socket = "auto";
  absl::Duration announce_hold = absl::Minutes(10);
  // Listen for LLDP on every physical netdev (needs CAP_NET_RAW): which switch port each is
  // cabled to.
  bool lldp = true;
  // Ask the node behind each active InfiniBand port with directed-route SMPs (needs
  // /dev/infiniband/umad*): the InfiniBand counterpart of LLDP.
  bool ib_neighbors = true;
  // The probe responder: "ADDR:PORT", "[V6]:PORT" or ":PORT"; empty: off. The schedule is the
  // config file's `probes` section.
  std::string probe_listen;
  uint32_t probe_clients = 4;
  // The responder's allow-list ("CIDR[,CIDR...]"; empty: this host's subnets), per-peer rate
  // (tests a minute; 0: none) and the shared secret's file (empty: none), which the agent's own
  // tests use too.
  std::string probe_allow;
  std::vector<std::string> probe_perftest;  // --probe-perftest, each a server line
  uint32_t probe_rate = 6;
  std::string probe_secret_file;
  // Prometheus /metrics on "ADDR:PORT", "[V6]:PORT" or ":PORT"; empty: off.
  std::string metrics;
  // How long a vanished RDMA device is reported absent, and a link flap a health warning.
  absl::Duration event_window = absl::Hours(1);
  // A watch client that takes no event for this long is dropped.
  absl::Duration watch_timeout = absl::Seconds(30);
};

// systemd's notification protocol, behind a seam so tests can watch it without systemd.
class Notifier {
 public:
  virtual ~Notifier() = default;
  virtual void Notify(const std::string& state) = 0;
  // How often to send WATCHDOG=1 (half of WATCHDOG_USEC); zero when the watchdog is off.
  virtual absl::Duration WatchdogInterval() = 0;
};

// sd_notify(3) and sd_watchdog_enabled(3); a no-op outside systemd (no NOTIFY_SOCKET).
std::unique_ptr<Notifier> MakeSdNotifier();

}  // namespace fabric
