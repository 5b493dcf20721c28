// The host's Prometheus metrics: RDMA ports (state, rate, traffic and error counters, RoCE
// hw_counters, GIDs) and the PCIe links of RDMA NICs and accelerators. Names follow node_exporter's
// infiniband collector where it has one, prefixed fabric_ instead of node_infiniband_.
// agent/publish/metrics/README.md lists every metric, its labels and meaning.
#pragma once

#include "agent/hostfs/host_fs.h"
#include "agent/publish/metrics/exposition.h"
#include "fabric/v1/host.pb.h"

namespace fabric::metrics {

// Appends the metrics of `host` (the inventory) to `out`, reading what changes without a rescan
// at call time below `sysfs`: each port's state, physical state and rate, and its counters/ and
// hw_counters/. Devices, ports, netdevs, PCI addresses, GIDs and PCIe links come from `host`.
// An RDMA device of `host` whose sysfs directory is gone (removed since the inventory was
// taken) is left out entirely, and so is an accelerator whose PCI function is gone; a port
// without counters/ simply has no counter series. Files that cannot be read or parsed never
// stop the scrape: they are left out and counted per port (fabric_port_read_errors).
void AppendHostMetrics(const v1::Host& host, const HostFs& sysfs, Exposition* out);

}  // namespace fabric::metrics
