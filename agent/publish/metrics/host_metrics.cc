#include "agent/publish/metrics/host_metrics.h"

#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/common/strings.h"
#include "agent/inventory/changes/changes.h"
#include "agent/inventory/discovery/parse.h"
#include "agent/publish/metrics/port_counters.h"

namespace fabric::metrics {
namespace {

using v1::Host;
using v1::PciFunction;
using v1::Port;
using v1::RdmaDevice;

// counters/ files with a metric of their own (node_exporter's infiniband collector names).
// The rest are fabric_port_counter_total{counter="<file>"}.
struct NamedCounter {
  std::string_view file;
  std::string_view metric;
  std::string_view help;
  uint64_t scale;  // port_rcv_data and port_xmit_data count 4-byte words.
};

constexpr NamedCounter kNamedCounters[] = {
    {"port_rcv_data", "fabric_port_data_received_bytes_total",
     "Data octets received on the port (counters/port_rcv_data, which counts 4-byte words, x4).",
     4},
    {"port_xmit_data", "fabric_port_data_transmitted_bytes_total",
     "Data octets transmitted on the port (counters/port_xmit_data, which counts 4-byte words, "
     "x4).",
     4},
    {"port_rcv_packets", "fabric_port_packets_received_total",
     "Packets received on the port, errors included (counters/port_rcv_packets).", 1},
    {"port_xmit_packets", "fabric_port_packets_transmitted_total",
     "Packets transmitted on the port, errors included (counters/port_xmit_packets).", 1},
    {"unicast_rcv_packets", "fabric_port_unicast_packets_received_total",
     "Unicast packets received on the port (counters/unicast_rcv_packets).", 1},
    {"unicast_xmit_packets", "fabric_port_unicast_packets_transmitted_total",
     "Unicast packets transmitted on the port (counters/unicast_xmit_packets).", 1},
    {"multicast_rcv_packets", "fabric_port_multicast_packets_received_total",
     "Multicast packets received on the port (counters/multicast_rcv_packets).", 1},
    {"multicast_xmit_packets", "fabric_port_multicast_packets_transmitted_total",
     "Multicast packets transmitted on the port (counters/multicast_xmit_packets).", 1},
    {"port_rcv_errors", "fabric_port_errors_received_total",
     "Packets with an error received on the port (counters/port_rcv_errors).", 1},
    {"port_xmit_discards", "fabric_port_discards_transmitted_total",
     "Outbound packets discarded because the port was down or congested "
     "(counters/port_xmit_discards).",
     1},
    {"link_downed", "fabric_port_link_downed_total",
     "Times the link failed to recover from an error state and went down (counters/link_downed).",
     1},
    {"link_error_recovery", "fabric_port_link_error_recovery_total",
     "Times the link recovered from an error state (counters/link_error_recovery).", 1},
    {"symbol_error", "fabric_port_symbol_error_total",
     "Minor link errors (symbol errors) detected on the port's lanes (counters/symbol_error).", 1},
    {"port_xmit_wait", "fabric_port_transmit_wait_total",
     "Ticks during which the port had data to transmit but sent none (counters/port_xmit_wait).",
     1},
};

// The states with a series each (PortStateWord gives their words).
constexpr v1::PortState kPortStates[] = {v1::PORT_STATE_DOWN, v1::PORT_STATE_INIT,
                                         v1::PORT_STATE_ARMED, v1::PORT_STATE_ACTIVE,
                                         v1::PORT_STATE_ACTIVE_DEFER};

Labels With(Labels labels, std::string name, std::string value) {
  labels.emplace_back(std::move(name), std::move(value));
  return labels;
}

// A counter file's value times `scale`, exact while it fits 64 bits.
SampleValue Scaled(uint64_t value, uint64_t scale) {
  if (value <= std::numeric_limits<uint64_t>::max() / scale) return value * scale;
  return static_cast<double>(value) * static_cast<double>(scale);
}

void AppendPort(const RdmaDevice& dev, const Port& port, const HostDir& dev_dir, Exposition* out) {
  auto opened = dev_dir.OpenDir(absl::StrCat("ports/", port.number()));
  if (!opened.ok()) return;  // The port is gone with its device.
  const HostDir& pd = **opened;
  const Labels base = {{"device", dev.name()}, {"port", absl::StrCat(port.number())}};
  int read_errors = 0;

  Labels info = base;
  if (std::string_view ll = LinkLayerWord(port.link_layer()); !ll.empty()) {
    info.emplace_back("link_layer", std::string(ll));
  }
  if (!port.netdev().empty()) info.emplace_back("netdev", port.netdev());
  if (!dev.pci().address().empty()) info.emplace_back("pci", dev.pci().address());
  out->Gauge("fabric_port_info",
             "RDMA port: its link layer, own netdev (RoCE) and PCI function. Always 1.", info, 1);

  // State, physical state and rate change without a rescan: read now.
  if (auto text = pd.ReadFile("state"); !text.ok()) {
    ++read_errors;
  } else if (auto state = ParsePortState(*text); !state.ok()) {
    ++read_errors;
  } else {
    for (const v1::PortState s : kPortStates) {
      out->Gauge("fabric_port_state",
                 "Port state, one series per state: 1 for the current one of DOWN, INIT, ARMED, "
                 "ACTIVE, ACTIVE_DEFER, 0 for the others.",
                 With(base, "state", std::string(PortStateWord(s))), *state == s ? 1 : 0);
    }
    out->Gauge("fabric_port_state_id",
               "Port state as the kernel numbers it (0: no change, 1: down, 2: init, 3: armed, "
               "4: active, 5: active defer).",
               base, static_cast<int>(*state));
  }
  if (auto text = pd.ReadFile("phys_state"); !text.ok()) {
    ++read_errors;
  } else if (auto phys = ParsePhysState(*text); !phys.ok()) {
    ++read_errors;
  } else {
    out->Gauge("fabric_port_physical_state_id",
               "Physical port state as the kernel numbers it (1: sleep, 2: polling, 3: disabled, "
               "4: port configuration training, 5: link up, 6: link error recovery, 7: phy "
               "test); phys_state is its name.",
               With(base, "phys_state", std::string(PhysStateWord(*phys))),
               static_cast<int>(*phys));
  }
  // The kernel fails `rate` with EINVAL while the port reports no valid link width (as when the
  // link is down): no rate, and no fault.
  if (auto text = pd.ReadFile("rate"); !text.ok()) {
    if (!absl::IsInvalidArgument(text.status())) ++read_errors;
  } else if (auto gbps = ParseRateGbps(*text); !gbps.ok()) {
    ++read_errors;
  } else {
    out->Gauge("fabric_port_rate_bytes_per_second",
               "Port data rate in bytes per second (rate in Gb/s x 10^9 / 8).", base,
               *gbps * 1e9 / 8);
  }

  out->Gauge("fabric_port_gid_entries",
             "Used entries of the port's GID table (empty slots, interface id zero, left out).",
             base, port.gids_size());
  if (auto index = RoceV2Ipv4GidIndex(dev, port)) {
    out->Gauge("fabric_port_roce_v2_ipv4_gid_index",
               "Lowest GID index of a RoCE v2 IPv4 GID on the port's own netdev (what "
               "NCCL_IB_GID_INDEX selection uses).",
               base, *index);
  }

  PortCounters counters = ReadPortCounters(pd);
  read_errors += static_cast<int>(counters.problems.size());
  // Counters with a name of their own in the table's order, then the others by file name.
  std::vector<bool> named(counters.counters.size(), false);
  for (const NamedCounter& n : kNamedCounters) {
    for (size_t i = 0; i < counters.counters.size(); ++i) {
      const Counter& c = counters.counters[i];
      if (c.name != n.file) continue;
      named[i] = true;
      out->Counter(n.metric, n.help, base, Scaled(c.value, n.scale));
    }
  }
  for (size_t i = 0; i < counters.counters.size(); ++i) {
    if (named[i]) continue;
    const Counter& c = counters.counters[i];
    out->Counter("fabric_port_counter_total",
                 "Other IB port counters (counters/<counter>), as the kernel reports them.",
                 With(base, "counter", c.name), c.value);
  }
  for (const Counter& c : counters.hw_counters) {
    if (IsHwSetting(c.name)) continue;
    if (IsHwLevel(c.name)) {
      out->Gauge("fabric_port_hw_gauge",
                 "Driver hw_counters/<counter> entries that are levels, not counts (bnxt_re's "
                 "active_* resources and their watermark_* highs).",
                 With(base, "counter", c.name), c.value);
    } else {
      out->Counter("fabric_port_hw_counter_total",
                   "Driver-specific port counters (hw_counters/<counter>), e.g. mlx5's RoCE "
                   "congestion (np_cnp_sent, rp_cnp_handled) and retransmission counters.",
                   With(base, "counter", c.name), c.value);
    }
  }
  out->Gauge("fabric_port_read_errors",
             "Files of the port (state, phys_state, rate, counters/*, hw_counters/*) that could "
             "not be read or parsed in this scrape; their series are left out.",
             base, read_errors);
}

void AppendPcieLink(const PciFunction& f, std::string_view role, Exposition* out) {
  const Labels labels = {{"pci", f.address()}, {"role", std::string(role)}};
  if (f.current_link().has_speed_gts()) {
    out->Gauge("fabric_pcie_link_speed_gts", "Current PCIe link speed, GT/s per lane.", labels,
               f.current_link().speed_gts());
  }
  if (f.max_link().has_speed_gts()) {
    out->Gauge("fabric_pcie_link_max_speed_gts", "Maximum PCIe link speed, GT/s per lane.", labels,
               f.max_link().speed_gts());
  }
  if (f.current_link().has_width()) {
    out->Gauge("fabric_pcie_link_width", "Current PCIe link width, lanes.", labels,
               f.current_link().width());
  }
  if (f.max_link().has_width()) {
    out->Gauge("fabric_pcie_link_max_width", "Maximum PCIe link width, lanes.", labels,
               f.max_link().width());
  }
}

}  // namespace

void AppendHostMetrics(const Host& host, const HostFs& sysfs, Exposition* out) {
  // Devices still present: a device removed since the inventory was taken is left out.
  const std::vector<PresentDevice> devices = PresentRdmaDevices(host, sysfs);
  std::vector<const v1::Accelerator*> accelerators;
  for (const v1::Accelerator& a : host.accelerators()) {
    if (a.management_display()) continue;
    if (sysfs.Exists(absl::StrCat("bus/pci/devices/", a.pci_address()))) {
      accelerators.push_back(&a);
    }
  }

  out->Gauge("fabric_rdma_devices", "RDMA devices (SR-IOV VFs and software devices included).", {},
             devices.size());
  out->Gauge("fabric_accelerators",
             "GPUs and other accelerators, servers' management displays excepted.", {},
             accelerators.size());
  for (const PresentDevice& d : devices) {
    for (const Port& port : d.device->ports()) AppendPort(*d.device, port, *d.dir, out);
  }
  for (const PresentDevice& d : devices) {
    if (!d.device->pci().address().empty()) AppendPcieLink(d.device->pci(), "nic", out);
  }
  for (const v1::Accelerator* a : accelerators) AppendPcieLink(a->pci(), "accelerator", out);
  for (const v1::Netdev& nd : host.netdevs()) {
    if (!nd.has_neighbor()) continue;
    const v1::Neighbor& n = nd.neighbor();
    out->Gauge("fabric_netdev_neighbor_info",
               "The switch port at the other end of the netdev's cable, as its LLDP frames say "
               "(switch: the label value the NFD leaf labels use). Always 1; absent when nothing "
               "was heard or it expired.",
               {{"netdev", nd.name()},
                {"rdma_device", nd.rdma_device()},
                {"switch", n.switch_label()},
                {"system_name", n.system_name()},
                {"chassis_id", n.chassis_id()},
                {"port_id", n.port_id()},
                {"port_description", n.port_description()}},
               1);
  }
}

}  // namespace fabric::metrics
