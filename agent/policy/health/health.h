// Health checks over a discovered host: what an operator checks before a job lands on a node.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "fabric/v1/health.pb.h"
#include "fabric/v1/host.pb.h"
#include "fabric/v1/select.pb.h"

namespace fabric {

// Evaluates `host`. The verdict is the worst finding: CRITICAL, then WARNING, then UNKNOWN. Ports
// named in policy.deny (unused on purpose) are not checked.
//   no_rdma_device  CRITICAL  no RDMA device at all
//   port_state      CRITICAL  a port not ACTIVE (UNKNOWN when its state cannot be read)
//   port_rate       WARNING   an active port below the most common rate of its peers (same NIC
//                             model and link layer)
//   pcie_link       WARNING   a NIC's PCIe link below its maximum speed or width; a GPU's below
//                             its maximum width (GPUs lower the link speed when idle, by design)
//   roce_gid        WARNING   an active RoCE port (not a VF: a VF's address lives in its pod)
//                             without a routable RoCE v2 GID (IPv4-mapped or global IPv6) on
//                             its own netdev (UNKNOWN when GID attributes are not visible)
//   gpudirect       WARNING   GPUs and RDMA NICs, but no GPUDirect RDMA path
//   discovery       WARNING   fields discovery could not read
//   firmware, uverbs, host_class   see health_internal.h
// Every finding has a stable code ("port_state.down") and a repair action.
v1::Health EvaluateHealth(const v1::Host& host, const v1::SelectionPolicy& policy);
// The same with the `health` config section's host classes.
v1::Health EvaluateHealth(const v1::Host& host, const v1::SelectionPolicy& policy,
                          const v1::HealthConfig& config);

// The common 8-GPU classes: NVIDIA Hopper (H100, H200, H800, H20), Blackwell (B200, B300, GB200)
// and AMD MI300X/MI325X with 8 x 400 Gb/s back-end ports; A100 with 8 x 200 Gb/s.
const std::vector<v1::HostClass>& DefaultHostClasses();
// The config's classes first (the first match wins), then the defaults unless
// no_default_host_classes.
std::vector<v1::HostClass> EffectiveHostClasses(const v1::HealthConfig& config);

// How bad a severity is, worst highest: CRITICAL 3, WARNING 2, UNKNOWN 1, OK 0.
int SeverityRank(v1::Severity s);
// Appends `f` and raises the verdict when `f` is worse and not a dry run (for findings made
// outside EvaluateHealth: the daemon's own, GID tables changed since start, daemon not serving).
// A finding without a code gets its check as code; without a repair, NONE.
void AddFinding(v1::Health* h, v1::Finding f);
// Whether `f` is about `dev`: its subject is the device, one of its ports ("mlx5_2:1"), its PCI
// function or a port's netdev. The device plugins and the DRA driver judge a NIC by this.
bool NamesDevice(const v1::Finding& f, const v1::RdmaDevice& dev);
// The monitoring-plugin exit code of a verdict: OK 0, WARNING 1, CRITICAL 2, UNKNOWN 3.
int HealthExitCode(v1::Severity verdict);

// "OK", "WARNING", "CRITICAL", "UNKNOWN".
const char* SeverityName(v1::Severity s);
// "CHECK_SWITCH_PORT", ...; "NONE" for an unset one.
std::string_view RepairName(v1::RepairAction r);

// One line per finding, as `fabricctl health` prints it:
//   CRITICAL port_state.down mlx5_2:1: port DOWN (eth2) [state DOWN, phys_state Disabled]
//   -> CHECK_SWITCH_PORT
// (one line), with "(dry run)", "(cleared, kept until <time>)" and "(seen N times)" where so.
std::string FindingLine(const v1::Finding& f);

}  // namespace fabric
