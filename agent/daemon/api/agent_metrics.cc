#include "agent/daemon/api/agent_metrics.h"

#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "agent/common/version.h"
#include "agent/daemon/transport/read_guard.h"
#include "agent/inventory/changes/event_log.h"
#include "agent/inventory/query/host_query.h"
#include "agent/inventory/topology/topology.h"
#include "agent/policy/health/health.h"
#include "agent/policy/select/select.h"
#include "agent/publish/metrics/exposition.h"
#include "agent/publish/metrics/host_metrics.h"

namespace fabric {
namespace {

using metrics::Exposition;
using metrics::Labels;

// "mlx5_1:1" -> {device, port}.
Labels PortLabels(const std::string& port_name) {
  const size_t colon = port_name.rfind(':');
  if (colon == std::string::npos) return {{"device", port_name}, {"port", ""}};
  return {{"device", port_name.substr(0, colon)}, {"port", port_name.substr(colon + 1)}};
}

void AgentMetrics(const MetricsSources& src, const Snapshot* snap, absl::Time now,
                  Exposition* out) {
  const AgentCounters& c = *src.counters;
  out->Gauge("fabric_agent_info", "The agent's version, and where it reads the host.",
             {{"version", kFabricVersion}, {"sysfs", src.sysfs->root()}}, 1);
  out->Gauge("fabric_agent_start_time_seconds", "When the agent started (Unix time).", {},
             absl::ToDoubleSeconds(c.started - absl::UnixEpoch()));
  out->Counter("fabric_agent_rescans_total",
               "Discoveries of the host (events, reloads and the periodic safety net).", {},
               c.rescans.load());
  out->Counter("fabric_agent_refreshes_total",
               "Inventory refreshes by kind: full (every file read: start-up, the periodic safety "
               "net, reloads, event overflow), targeted (only what the events named) and skipped "
               "(nothing in the inventory depends on what the events named).",
               {{"kind", "full"}}, c.refreshes_full.load());
  out->Counter("fabric_agent_refreshes_total", "", {{"kind", "targeted"}},
               c.refreshes_targeted.load());
  out->Counter("fabric_agent_refreshes_total", "", {{"kind", "skipped"}},
               c.refreshes_skipped.load());
  out->Counter("fabric_agent_refresh_seconds_total", "Time spent in refreshes, by kind.",
               {{"kind", "full"}}, static_cast<double>(c.refresh_full_ns.load()) / 1e9);
  out->Counter("fabric_agent_refresh_seconds_total", "", {{"kind", "targeted"}},
               static_cast<double>(c.refresh_targeted_ns.load()) / 1e9);
  out->Counter("fabric_agent_refresh_drift_total",
               "Changes a periodic or reload rescan found that the event-driven refreshes had "
               "not: a change no kernel event announces (an InfiniBand port's state, a sysctl) or "
               "a targeted refresh gone wrong. Logged each; the full result is served.",
               {}, c.refresh_drift.load());
  out->Counter("fabric_agent_rescan_errors_total",
               "Rescans that failed (the previous inventory stayed served).", {},
               c.rescan_errors.load());
  out->Counter("fabric_agent_lldp_frames_total", "LLDP frames taken from the packet sockets.", {},
               c.lldp_frames.load());
  out->Counter("fabric_agent_lldp_malformed_total",
               "LLDP frames that were not a readable LLDPDU (or longer than 1522 bytes).", {},
               c.lldp_malformed.load());
  out->Counter("fabric_agent_lldp_dropped_total",
               "LLDP frames over a netdev's rate (2 a second, bursts of 5): a flood or a loop.", {},
               c.lldp_dropped.load());
  out->Gauge("fabric_agent_lldp_listening", "Netdevs the agent listens for LLDP on.", {},
             c.lldp_listening.load());
  out->Counter("fabric_agent_netlink_resyncs_total",
               "Full resyncs after a netlink or uevent socket overflowed (ENOBUFS).", {},
               c.netlink_resyncs.load());
  out->Gauge("fabric_agent_event_source_up",
             "1 when the agent gets these kernel events (0: only the periodic rescan sees "
             "changes).",
             {{"source", "route_netlink"}}, c.route_events.load() ? 1 : 0);
  out->Gauge("fabric_agent_event_source_up", "", {{"source", "uevent"}}, c.uevents.load() ? 1 : 0);
  const int64_t ok_ns = c.last_scan_ok_unix_ns.load();
  if (ok_ns > 0) {
    const absl::Time ok = absl::FromUnixNanos(ok_ns);
    out->Gauge("fabric_inventory_last_scan_timestamp_seconds",
               "When the last successful discovery finished (Unix time).", {},
               absl::ToDoubleSeconds(ok - absl::UnixEpoch()));
    out->Gauge("fabric_inventory_age_seconds", "Seconds since the last successful discovery.", {},
               absl::ToDoubleSeconds(now - ok));
  }
  out->Counter("fabric_agent_stale_scans_total",
               "Rescans not published because reads failed for a reason that says nothing about "
               "the host (EMFILE, EIO, EACCES, ...); the last good inventory stayed served.",
               {}, c.stale_scans.load());
  const int64_t stale_ns = c.stale_since_unix_ns.load();
  out->Gauge("fabric_inventory_stale",
             "1 while the served inventory is the last good one because rescans keep failing to "
             "read part of the host.",
             {}, stale_ns > 0 ? 1 : 0);
  if (stale_ns > 0) {
    out->Gauge("fabric_inventory_stale_since_timestamp_seconds",
               "Since when the served inventory is stale (Unix time).", {},
               absl::ToDoubleSeconds(absl::FromUnixNanos(stale_ns) - absl::UnixEpoch()));
  }
  if (snap == nullptr) return;
  out->Gauge("fabric_inventory_generation",
             "Increases with every inventory that differs from the previous one.", {},
             snap->generation);
  out->Gauge("fabric_inventory_last_change_timestamp_seconds",
             "When the inventory last changed (Unix time).", {},
             absl::ToDoubleSeconds(snap->discovered_at - absl::UnixEpoch()));

  // Health: the verdict as monitoring plugins' exit code, and the findings per check.
  const v1::Health health = CurrentHealth(*snap, src.prober);
  out->Gauge("fabric_health_status",
             "The health verdict as fabricctl health exits: 0 OK, 1 WARNING, 2 CRITICAL, 3 "
             "UNKNOWN.",
             {},
             HealthExitCode(health.verdict() == v1::SEVERITY_UNSPECIFIED ? v1::SEVERITY_OK
                                                                         : health.verdict()));
  // By code too: an alert can route a port_state.down to the network team and a
  // counter.symbol_error.1h to the cable crew without parsing messages.
  std::map<std::tuple<std::string, std::string, std::string>, int> findings;
  for (const v1::Finding& f : health.findings()) {
    ++findings[{f.check(), f.code().empty() ? f.check() : f.code(), SeverityName(f.severity())}];
  }
  for (const auto& [key, n] : findings) {
    out->Gauge(
        "fabric_health_findings", "Health findings by check, code and severity.",
        {{"check", std::get<0>(key)}, {"code", std::get<1>(key)}, {"severity", std::get<2>(key)}},
        n);
  }

  // The NIC each GPU would get (the selection's ports for every GPU, under the agent's policy;
  // no environment is rendered for a scrape).
  const std::vector<std::string> gpus = ComputeGpus(*snap->host);
  if (!gpus.empty() && !snap->host->rdma_devices().empty()) {
    absl::StatusOr<v1::Selection> sel = SelectPorts(*snap->host, gpus, snap->policy);
    if (sel.ok()) {
      for (const v1::GpuAssignment& a : sel->assignments()) {
        out->Gauge("fabric_gpu_nic_distance",
                   "PCIe distance from a GPU to the NIC selection gives it, as a rank: 1 PIX, 2 "
                   "PXB, 3 PHB, 4 NODE, 5 SYS (label: the class).",
                   {{"gpu", a.gpu()},
                    {"device", a.rdma_device()},
                    {"port", absl::StrCat(a.port())},
                    {"distance", DistanceName(a.distance())}},
                   static_cast<int>(a.distance()));
      }
    }
  }

  // Events since the agent started.
  for (const auto& [port, e] : snap->events.ports()) {
    out->Counter("fabric_port_link_flaps_total",
                 "Times the agent saw the port leave ACTIVE since it started.", PortLabels(port),
                 e.link_flaps);
    out->Counter("fabric_port_gid_changes_total",
                 "Times the port's GID table changed since the agent started (the GID index a "
                 "running job uses can move).",
                 PortLabels(port), e.gid_changes);
  }
  for (const auto& [name, a] : snap->events.absent()) {
    if (now - a.since > snap->event_window) continue;
    out->Gauge("fabric_device_absent",
               "An RDMA device that disappeared while the agent ran and has not come back.",
               {{"device", name}, {"pci", a.pci_address}}, 1);
  }
}

void HealthMonitorMetrics(const HealthMonitor& h, Exposition* out) {
  const HealthMonitor::Stats s = h.stats();
  out->Counter("fabric_health_polls_total", "Polls of the health monitor.", {}, s.polls);
  out->Counter("fabric_health_counter_reads_total",
               "Counter files the health monitor read (only those its rules name).", {}, s.reads);
  out->Counter("fabric_health_counter_read_errors_total",
               "Counter reads that failed (a vanished file, the firmware's access error).", {},
               s.read_errors);
  out->Counter("fabric_health_kmsg_lines_total",
               "Kernel log lines a NIC or PCIe rule matched, by whether they named a device the "
               "monitor watches.",
               {{"device", "watched"}}, s.kmsg_matched);
  out->Counter("fabric_health_kmsg_lines_total", "", {{"device", "other"}}, s.kmsg_other);
  out->Counter("fabric_health_kmsg_records_total",
               "Kernel log records the agent read, and those skipped before the rules: not the "
               "kernel's (written from user space).",
               {{"result", "read"}}, s.kmsg.read);
  out->Counter("fabric_health_kmsg_records_total", "", {{"result", "not_kernel"}},
               s.kmsg.not_kernel);
  out->Counter("fabric_health_kmsg_lost_total",
               "Kernel log records lost before the rules saw them: overwritten in the ring "
               "buffer before they were read (times, EPIPE), malformed, over the rate bound, "
               "failed reads, and ends of the source (a FIFO's writer left).",
               {{"reason", "overwritten"}}, s.kmsg.overruns);
  out->Counter("fabric_health_kmsg_lost_total", "", {{"reason", "malformed"}}, s.kmsg.malformed);
  out->Counter("fabric_health_kmsg_lost_total", "", {{"reason", "rate"}}, s.kmsg.rate_dropped);
  out->Counter("fabric_health_kmsg_lost_total", "", {{"reason", "read_error"}},
               s.kmsg.source_errors);
  out->Counter("fabric_health_kmsg_lost_total", "", {{"reason", "source_ended"}}, s.kmsg.ends);
  out->Gauge("fabric_health_counter_backoff_ports",
             "Ports whose counters are not read now: the firmware refused them (back-off).", {},
             s.backoff_ports);
}

void DevicePluginMetrics(const DevicePlugins& d, Exposition* out) {
  const DevicePlugins::Counts c = d.counts();
  out->Counter("fabric_device_plugin_refused_total",
               "Device plugin calls refused: bytes that are not the request (a string not UTF-8), "
               "or a request over a bound or naming what the resource does not list.",
               {{"reason", "parse"}}, c.refused_parse);
  out->Counter("fabric_device_plugin_refused_total", "", {{"reason", "invalid"}},
               c.refused_invalid);
  out->Counter("fabric_device_plugin_streams_dropped_total",
               "ListAndWatch streams ended by the agent: replaced by a newer one over the limit, "
               "or stalled (their reader stopped reading).",
               {{"reason", "evicted"}}, c.streams_evicted);
  out->Counter("fabric_device_plugin_streams_dropped_total", "", {{"reason", "stalled"}},
               c.streams_stalled);
}

void ProbeMetrics(const Prober& p, Exposition* out) {
  const Prober::Stats s = p.stats();
  out->Counter("fabric_probe_runs_total", "Probes this agent ran (scheduled and on demand).",
               {{"result", "ok"}}, s.runs_ok);
  out->Counter("fabric_probe_runs_total", "", {{"result", "failed"}}, s.runs_failed);
  if (!p.responder().empty()) {
    out->Counter("fabric_probe_responder_tests_total", "Tests the responder served for peers.",
                 {{"result", "ok"}}, s.served_ok);
    out->Counter("fabric_probe_responder_tests_total", "", {{"result", "failed"}}, s.served_failed);
  }
  if (p.perftest_responders()) {
    out->Counter("fabric_probe_perftest_tests_total",
                 "Stock perftest clients served (--probe-perftest).", {{"result", "ok"}},
                 s.perftest_ok);
    out->Counter("fabric_probe_perftest_tests_total", "", {{"result", "failed"}},
                 s.perftest_failed);
    out->Gauge("fabric_probe_perftest_responders_down",
               "--probe-perftest lines not serving now: their device or port cannot be used; "
               "the port stays closed while they retry.",
               {}, s.perftest_down);
  }
  for (const v1::ProbeResult& r : p.Latest()) {
    const Labels l = {{"device", r.device()},
                      {"port", r.device().empty() ? "" : absl::StrCat(r.port())},
                      {"peer", r.peer()},
                      {"test", r.test()},
                      {"transport", r.transport()}};
    out->Gauge("fabric_probe_success", "1 when the latest probe of this kind succeeded.", l,
               r.ok() ? 1 : 0);
    out->Gauge("fabric_probe_last_run_timestamp_seconds",
               "When the latest probe of this kind started (Unix time).", l,
               static_cast<double>(r.started().seconds()) + r.started().nanos() * 1e-9);
    if (!r.ok()) continue;
    if (r.has_bw_avg_gbps()) {
      out->Gauge("fabric_probe_bandwidth_bytes_per_second",
                 "Average payload bandwidth of the latest bandwidth probe.", l,
                 r.bw_avg_gbps() * 1e9 / 8);
    }
    if (r.has_fraction_of_rate()) {
      out->Gauge("fabric_probe_port_rate_ratio",
                 "The latest RDMA bandwidth probe as a fraction of the port's rate.", l,
                 r.fraction_of_rate());
    }
    if (r.has_t_typical_us()) {
      out->Gauge("fabric_probe_latency_seconds",
                 "Typical (median) latency of the latest latency probe.", l,
                 r.t_typical_us() * 1e-6);
      out->Gauge("fabric_probe_latency_p99_seconds", "99th percentile of the latest latency probe.",
                 l, r.p99_us() * 1e-6);
    }
  }
}

void AnnounceMetrics(const Announcer& a, Exposition* out) {
  const AnnouncerStats s = a.Stats();
  out->Counter("fabric_announce_handoffs_total", "Pod interfaces fabric-cni handed to the agent.",
               {{"result", "accepted"}}, s.handoffs);
  out->Counter("fabric_announce_handoffs_total", "", {{"result", "refused"}}, s.handoffs_refused);
  out->Counter("fabric_announce_frames_total",
               "Announcements sent: gratuitous ARP (arp) and unsolicited neighbour "
               "advertisements (na).",
               {{"kind", "arp"}}, s.arp_sent);
  out->Counter("fabric_announce_frames_total", "", {{"kind", "na"}}, s.na_sent);
  out->Counter("fabric_announce_send_errors_total", "Announcements that could not be sent.", {},
               s.send_errors);
  out->Counter("fabric_announce_conflicts_total",
               "Addresses another host answered for (RFC 5227 probe).", {}, s.conflicts);
  out->Counter("fabric_announce_gateway_primes_total",
               "Gateways primed (ARP request or NS), by whether they answered in time.",
               {{"result", "reachable"}}, s.gateways_reachable);
  out->Counter("fabric_announce_gateway_primes_total", "", {{"result", "unreachable"}},
               s.gateways_unreachable);
  out->Gauge("fabric_announce_interfaces", "Interfaces the agent holds, by state.",
             {{"state", "running"}}, s.running);
  out->Gauge("fabric_announce_interfaces", "", {{"state", "held"}}, s.held);
}

void ApiMetrics(const MetricsSources& src, Exposition* out) {
  if (src.api != nullptr) {
    for (const auto& [name, s] : src.api->Stats()) {
      const Labels l{{"listener", name}};
      out->Gauge("fabric_api_connections", "API connections open now, by listener.", l, s.open);
      out->Counter("fabric_api_connections_accepted_total", "API connections accepted.", l,
                   s.accepted);
      out->Counter("fabric_api_connections_refused_total",
                   "API connections over --max-connections (answered RESOURCE_EXHAUSTED).", l,
                   s.refused);
      out->Counter("fabric_api_connections_shed_total",
                   "API connections closed at once because the agent ran out of file "
                   "descriptors.",
                   l, s.shed);
    }
    const RelayStats r = src.api->relay_stats();
    out->Gauge("fabric_api_relayed_connections",
               "TCP API connections relayed by the agent now (TLS, rapid-reset guard).", {},
               r.open);
    out->Counter("fabric_api_connections_closed_total",
                 "API connections the agent closed, by reason: reset_flood (an HTTP/2 rapid "
                 "reset, on either listener), not_http2 (on TCP: a TLS client on a plaintext "
                 "port, a scanner).",
                 {{"reason", "reset_flood"}}, r.reset_floods + read_guard::ResetFloods());
    out->Counter("fabric_api_connections_closed_total", "", {{"reason", "not_http2"}}, r.not_http2);
    out->Counter("fabric_api_tls_handshake_failures_total",
                 "TLS handshakes on --listen that failed or timed out (a certificate from another "
                 "CA, none, a plaintext client).",
                 {}, r.tls_failures);
  }
  if (src.api_counters != nullptr) {
    out->Gauge("fabric_api_watch_streams", "Open WatchInventory streams.", {},
               src.api_counters->watches.load());
    for (const auto& [key, n] : src.api_counters->denied()) {
      out->Counter("fabric_api_control_denied_total",
                   "Control calls refused: the caller may not make them.",
                   {{"method", key.first}, {"reason", key.second}}, n);
    }
    for (const auto& [limit, n] : src.api_counters->over_limit()) {
      out->Counter("fabric_api_limit_refusals_total", "Requests refused at a limit, by limit.",
                   {{"limit", limit}}, n);
    }
  }
}

}  // namespace

std::string RenderAgentMetrics(const MetricsSources& src, absl::Time now) {
  const absl::Time start = absl::Now();
  Exposition out;
  const std::shared_ptr<const Snapshot> snap = src.store->Current();
  if (snap != nullptr) metrics::AppendHostMetrics(*snap->host, *src.sysfs, &out);
  AgentMetrics(src, snap.get(), now, &out);
  if (src.health != nullptr) HealthMonitorMetrics(*src.health, &out);
  if (src.prober != nullptr) ProbeMetrics(*src.prober, &out);
  if (src.device_plugins != nullptr) DevicePluginMetrics(*src.device_plugins, &out);
  if (src.announcer != nullptr) AnnounceMetrics(*src.announcer, &out);
  ApiMetrics(src, &out);
  out.Gauge("fabric_scrape_duration_seconds", "How long this scrape took to render.", {},
            absl::ToDoubleSeconds(absl::Now() - start));
  out.Gauge("fabric_scrape_dropped_samples",
            "Samples left out because they would have made the output invalid (a bug).", {},
            out.dropped());
  return out.Render();
}

}  // namespace fabric
