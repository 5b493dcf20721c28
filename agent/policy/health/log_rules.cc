#include "agent/policy/health/log_rules.h"

#include <algorithm>

namespace fabric {
namespace {

constexpr v1::Severity kCrit = v1::SEVERITY_CRITICAL;
constexpr v1::Severity kWarn = v1::SEVERITY_WARNING;
constexpr v1::RepairAction kReseat = v1::REPAIR_ACTION_RESEAT_CABLE;
constexpr v1::RepairAction kSwitch = v1::REPAIR_ACTION_CHECK_SWITCH_PORT;
constexpr v1::RepairAction kReboot = v1::REPAIR_ACTION_REBOOT;
constexpr v1::RepairAction kReplace = v1::REPAIR_ACTION_REPLACE_NIC;
constexpr v1::RepairAction kInspect = v1::REPAIR_ACTION_HARDWARE_INSPECTION;
constexpr v1::RepairAction kNone = v1::REPAIR_ACTION_NONE;

// The needles are the drivers' printk format strings with the conversions cut out (a '*' where
// a number or a name goes). Sources: drivers/net/ethernet/mellanox/mlx5/core/{cmd,health,events,
// en_main}.c, en/reporter_tx.c; broadcom/bnxt/{bnxt.c,bnxt_hwrm.c};
// infiniband/hw/bnxt_re/qplib_rcfw.c; infiniband/hw/irdma/main.c; intel/ice/ice_main.c;
// pensando/ionic/{ionic_dev,ionic_main,ionic_lif}.c; net/sched/sch_generic.c;
// drivers/pci/pcie/{aer,dpc}.c, drivers/pci/pci.c.
const std::vector<LogRule>* BuildRules() {
  return new std::vector<LogRule>{
      // --- mlx5 (ConnectX): the NVSentinel set first, fatal before non-fatal. ---
      {"cmd_exec_timeout", kCrit, "mlx5_core", "timeout. Will cause a leak of a command resource",
       kReboot,
       "a firmware command never completed; the driver leaked its buffer rather than risk DMA "
       "into freed memory and cannot manage the device until a driver reload or reboot"},
      {"health_poll_failed", kCrit, "mlx5_core", "device's health compromised", kReboot,
       "the firmware health counter stopped moving: the firmware is hung"},
      {"health_poll_failed", kCrit, "mlx5_core", "Fatal error * detected", kReboot,
       "the health poll saw a fatal sensor (PCI unreadable, NIC disabled, firmware asked for a "
       "reset); the device is in error state"},
      {"unrecoverable_err", kCrit, "mlx5_core", "unrecoverable hardware error", kInspect,
       "the firmware's health syndrome is an unrecoverable hardware error"},
      {"unrecoverable_err", kCrit, "mlx5_core", ": HW fatal error", kInspect,
       "the firmware's health syndrome is a hardware fatal error"},
      {"health_recovery_failed", kCrit, "mlx5_core", "health recovery failed", kReplace,
       "the driver's recovery after a fatal error failed: the device stays down"},
      {"health_recovery_failed", kCrit, "mlx5_core", "health recovery flow aborted", kInspect,
       "recovery gave up: PCI reads of the device still fail"},
      {"pci_slot_unavailable", kCrit, "mlx5_core", "PCI slot is unavailable", kInspect,
       "the device's registers read as all ones: it fell off the bus"},
      {"port_module_high_temp", kWarn, "mlx5_core", "Port module event*High Temperature", kInspect,
       "the transceiver is over temperature; the port may shut down"},
      {"module_unplugged", kWarn, "mlx5_core", "Port module event: module *, Cable unplugged",
       kReseat, "the transceiver or cable was removed: the port is down"},
      {"port_module_error", kWarn, "mlx5_core", "Port module event[error]: module ", kReseat,
       "the transceiver reported an error (power budget, bad or shorted cable, I2C bus stuck)"},
      {"pci_power_insufficient", kWarn, "mlx5_core", "Detected insufficient power on the PCIe slot",
       kInspect,
       "the slot advertises less power than the adapter needs; it may throttle (benign on some "
       "platforms that advertise 0 W)"},
      {"access_reg_failed", kWarn, "mlx5_core", "ACCESS_REG(0x805)*failed", kNone,
       "a register read was refused, typically counters on firmware-restricted functions; noise "
       "unless it floods"},
      {"mlx5_tx_timeout_detected", kWarn, "mlx5_core", "TX timeout detected", kNone,
       "a send queue stalled; the driver recovers the queue"},
      {"mlx5_tx_timeout_detected", kWarn, "mlx5_core", "TX timeout on queue: ", kNone,
       "a send queue stalled; the driver recovers the queue"},
      {"link_down_log", kWarn, "mlx5_core|ionic", ": Link down$", kSwitch,
       "the port lost its link; repeats are a flap"},

      // --- bnxt_en and bnxt_re (Broadcom): bnxt_re prints under its PCI parent, bnxt_en. ---
      {"bnxt_fw_fatal", kCrit, "bnxt_en", "Fatal firmware reset event", kReboot,
       "the firmware hit a fatal condition and is being reset: traffic stops meanwhile"},
      {"bnxt_fw_fatal", kCrit, "bnxt_en", "Firmware fatal reset event", kReboot,
       "the firmware hit a fatal condition and is being reset: traffic stops meanwhile"},
      {"bnxt_fw_not_responding", kCrit, "bnxt_en", "Firmware not responding, status: ", kReboot,
       "the firmware does not answer the driver"},
      {"bnxt_re_cmd_timeout", kCrit, "bnxt_en", "cmdq[*]=* timedout (", kReboot,
       "an RDMA firmware command timed out; the RDMA control path is stuck"},
      {"bnxt_hwrm_timeout", kWarn, "bnxt_en", "Error (timeout: * msg {", kNone,
       "a firmware command timed out"},
      {"tx_timeout", kWarn, "bnxt_en", "TX timeout detected, starting reset task!", kNone,
       "a send queue stalled; the driver resets the rings"},
      {"link_down_log", kWarn, "bnxt_en|ice", ": NIC Link is Down$", kSwitch,
       "the port lost its link; repeats are a flap"},

      // --- irdma (Intel E810 on ice, X722 on i40e, IPU on idpf) and ice. ---
      {"irdma_critical_err", kCrit, "ice|i40e|idpf", "critical PE Error, GLPE_CRITERR=", kReboot,
       "the RDMA protocol engine reported a critical error; the function is reset"},
      {"irdma_critical_err", kCrit, "ice|i40e|idpf", ": HMC Error$", kReboot,
       "the RDMA host memory cache reported an error; the function is reset"},
      {"irdma_critical_err", kCrit, "ice|i40e|idpf", ": PE Push Error$", kReboot,
       "the RDMA protocol engine reported a push error; the function is reset"},
      {"irdma_reset_requested", kWarn, "ice|i40e|idpf", ": Requesting a reset$", kNone,
       "irdma asked the LAN driver for a reset (after a critical error or a stuck control queue)"},
      {"tx_timeout", kWarn, "ice", "tx_timeout recovery level ", kNone,
       "a send queue stalled; the driver escalates resets by level"},

      // --- ionic (AMD Pensando). ---
      {"ionic_fw_down", kCrit, "ionic", "FW heartbeat stalled at ", kReboot,
       "the firmware heartbeat stopped"},
      {"ionic_fw_down", kCrit, "ionic", "DEVCMD * failed - FW halted", kReboot,
       "a device command failed because the firmware halted"},
      {"ionic_fw_down", kCrit, "ionic", "DEVCMD * interrupted - FW is down", kReboot,
       "a device command was cut off because the firmware is down"},
      {"ionic_devcmd_timeout", kWarn, "ionic", "DEVCMD * timeout after ", kNone,
       "a device command timed out"},
      {"tx_timeout", kWarn, "ionic", "Tx Timeout triggered - txq ", kNone,
       "a send queue stalled; the driver resets the queues"},

      // --- Kernel core: any driver. ---
      // Old: WARN "NETDEV WATCHDOG: eth2 (mlx5_core): transmit queue 3 timed out"; 6.9+:
      // netdev_crit "mlx5_core 0000:3b:00.0 eth2: NETDEV WATCHDOG: CPU: 3: transmit queue 3 timed
      // out 5000 ms".
      {"netdev_watchdog", kWarn, "", "NETDEV WATCHDOG: *transmit queue * timed out", kNone,
       "a transmit queue made no progress for the watchdog period; the driver's recovery runs"},
      // AER: "Uncorrected"/"Corrected" before v6.8, "Uncorrectable"/"Correctable" since. The
      // "received from" line names the sender; "PCIe Bus Error" is printed by the device itself.
      {"pcie_aer_fatal", kCrit, "", "severity=Uncorrected (Fatal)", kInspect,
       "an uncorrectable fatal PCIe error: the link is reset and the device may be lost"},
      {"pcie_aer_fatal", kCrit, "", "severity=Uncorrectable (Fatal)", kInspect,
       "an uncorrectable fatal PCIe error: the link is reset and the device may be lost"},
      {"pcie_aer_fatal", kCrit, "", "Uncorrected (Fatal) error* received", kInspect,
       "an uncorrectable fatal PCIe error: the link is reset and the device may be lost"},
      {"pcie_aer_fatal", kCrit, "", "Uncorrectable (Fatal) error* received", kInspect,
       "an uncorrectable fatal PCIe error: the link is reset and the device may be lost"},
      {"pcie_aer_nonfatal", kWarn, "", "severity=Uncorrected (Non-Fatal)", kInspect,
       "an uncorrectable non-fatal PCIe error: a transaction was lost"},
      {"pcie_aer_nonfatal", kWarn, "", "severity=Uncorrectable (Non-Fatal)", kInspect,
       "an uncorrectable non-fatal PCIe error: a transaction was lost"},
      {"pcie_aer_nonfatal", kWarn, "", "Uncorrected (Non-Fatal) error* received", kInspect,
       "an uncorrectable non-fatal PCIe error: a transaction was lost"},
      {"pcie_aer_nonfatal", kWarn, "", "Uncorrectable (Non-Fatal) error* received", kInspect,
       "an uncorrectable non-fatal PCIe error: a transaction was lost"},
      {"pcie_aer_correctable", kWarn, "", "severity=Corrected,", kNone,
       "a correctable PCIe error (retried by the link); a steady rate means a marginal link"},
      {"pcie_aer_correctable", kWarn, "", "severity=Correctable,", kNone,
       "a correctable PCIe error (retried by the link); a steady rate means a marginal link"},
      {"pcie_aer_correctable", kWarn, "", "Corrected error* received", kNone,
       "a correctable PCIe error (retried by the link); a steady rate means a marginal link"},
      {"pcie_aer_correctable", kWarn, "", "Correctable error* received", kNone,
       "a correctable PCIe error (retried by the link); a steady rate means a marginal link"},
      {"pcie_dpc_containment", kCrit, "", "DPC: containment event", kInspect,
       "the port isolated its link after an uncorrectable error: the devices below are cut off"},
      {"pcie_link_degraded", kWarn, "", "available PCIe bandwidth, limited by ", kInspect,
       "the PCIe link trained below what the device and slot can do"},
  };
}

bool DriverMatches(std::string_view prefixes, std::string_view line) {
  if (prefixes.empty()) return true;
  while (true) {
    const size_t bar = prefixes.find('|');
    const std::string_view alt = prefixes.substr(0, bar);
    if (!alt.empty() && line.size() > alt.size() && line.substr(0, alt.size()) == alt &&
        (line[alt.size()] == ' ' || line[alt.size()] == ':')) {
      return true;
    }
    if (bar == std::string_view::npos) return false;
    prefixes.remove_prefix(bar + 1);
  }
}

bool NeedleMatches(std::string_view needle, std::string_view line) {
  bool anchored = false;
  if (!needle.empty() && needle.back() == '$') {
    anchored = true;
    needle.remove_suffix(1);
  }
  size_t pos = 0;
  while (true) {
    const size_t star = needle.find('*');
    const std::string_view frag = needle.substr(0, star);
    const bool last = star == std::string_view::npos;
    if (last && anchored) {
      // The last fragment ends the line, after what the earlier fragments took.
      return line.size() >= pos + frag.size() && line.substr(line.size() - frag.size()) == frag;
    }
    if (!frag.empty()) {
      const size_t at = line.find(frag, pos);
      if (at == std::string_view::npos) return false;
      pos = at + frag.size();
    }
    if (last) return true;
    needle.remove_prefix(star + 1);
  }
}

bool IsHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

// The PCI address at the start of `s` ("0000:3b:00.0", domain 4 to 8 hex digits as the kernel's
// %04x prints it), followed by the end, ':', ' ', ',' or ')'; "" otherwise.
std::string_view LeadingBdf(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && i < 8 && IsHex(s[i])) ++i;
  if (i < 4) return {};
  const size_t domain = i;
  // ":bb:dd.f"
  if (s.size() < domain + 8) return {};
  const std::string_view rest = s.substr(domain, 8);
  if (rest[0] != ':' || !IsHex(rest[1]) || !IsHex(rest[2]) || rest[3] != ':' || !IsHex(rest[4]) ||
      !IsHex(rest[5]) || rest[6] != '.' || rest[7] < '0' || rest[7] > '7') {
    return {};
  }
  const size_t end = domain + 8;
  if (end < s.size() && s[end] != ':' && s[end] != ' ' && s[end] != ',' && s[end] != ')') {
    return {};
  }
  return s.substr(0, end);
}

// A network interface name as the kernel allows it: 1 to 15 bytes, no '/', ':' or whitespace.
bool IsIfName(std::string_view s) {
  if (s.empty() || s.size() > 15) return false;
  return std::none_of(s.begin(), s.end(), [](char c) {
    return c == '/' || c == ':' || c == '(' || static_cast<unsigned char>(c) <= ' ' ||
           static_cast<unsigned char>(c) >= 0x7f;
  });
}

std::string DeviceOf(std::string_view line, std::string_view dict_device) {
  // AER's root port reports the sender: "pcieport 0000:00:01.0: AER: Corrected error message
  // received from 0000:3b:00.0" (older kernels: "... error received: 0000:3b:00.0").
  for (std::string_view marker : {"error message received from ", "error received: "}) {
    const size_t at = line.find(marker);
    if (at == std::string_view::npos) continue;
    const std::string_view bdf = LeadingBdf(line.substr(at + marker.size()));
    if (!bdf.empty()) return std::string(bdf);
  }
  // dev_printk: "<driver> <device>[ <netdev or ibdev>]: message".
  const size_t sp = line.find(' ');
  if (sp != std::string_view::npos && sp > 0) {
    const std::string_view bdf = LeadingBdf(line.substr(sp + 1));
    if (!bdf.empty()) return std::string(bdf);
  }
  // The watchdog's WARN before 6.9 names the netdev: "NETDEV WATCHDOG: eth2 (mlx5_core): ...".
  constexpr std::string_view kWatchdog = "NETDEV WATCHDOG: ";
  if (const size_t at = line.find(kWatchdog); at != std::string_view::npos) {
    const std::string_view rest = line.substr(at + kWatchdog.size());
    const size_t paren = rest.find(" (");
    if (paren != std::string_view::npos && IsIfName(rest.substr(0, paren))) {
      return std::string(rest.substr(0, paren));
    }
  }
  return DeviceFromDict(dict_device);
}

}  // namespace

const std::vector<LogRule>& NicLogRules() {
  static const std::vector<LogRule>* rules = BuildRules();
  return *rules;
}

std::string DeviceFromDict(std::string_view dict_device) {
  // DEVICE= is "+subsystem:name" for most devices, "n<ifindex>", "c<major>:<minor>" or
  // "b<major>:<minor>" otherwise (Documentation/ABI/testing/dev-kmsg). Nothing longer is a name.
  if (dict_device.size() > 64) return "";
  if (!dict_device.empty() && dict_device[0] == '+') {
    const size_t colon = dict_device.find(':');
    if (colon == std::string_view::npos) return "";
    return std::string(dict_device.substr(colon + 1));
  }
  return std::string(dict_device);
}

std::optional<LogMatch> MatchNicLog(std::string_view message, std::string_view dict_device) {
  for (const LogRule& rule : NicLogRules()) {
    if (DriverMatches(rule.driver_prefix, message) && NeedleMatches(rule.needle, message)) {
      return LogMatch{&rule, DeviceOf(message, dict_device)};
    }
  }
  return std::nullopt;
}

v1::Finding KernelLogFinding(const LogMatch& m, std::string_view subject, std::string_view line,
                             uint64_t count) {
  constexpr size_t kMaxEvidence = 512;
  v1::Finding f;
  f.set_severity(m.rule->severity);
  f.set_check("kmsg");
  f.set_code("kmsg." + std::string(m.rule->code));
  f.set_subject(std::string(subject));
  f.set_message(std::string(m.rule->why));
  std::string evidence(line.substr(0, kMaxEvidence));
  if (line.size() > kMaxEvidence) evidence += "...";
  if (count > 1) evidence += " (" + std::to_string(count) + " times)";
  f.set_evidence(std::move(evidence));
  f.set_repair(m.rule->repair);
  return f;
}

LogDedup::LogDedup(LogDedupOptions options) : options_(options) {
  options_.max_entries = std::max<size_t>(options_.max_entries, 1);
}

LogDedup::Sighting LogDedup::Observe(std::string_view code, std::string_view device,
                                     absl::Time now) {
  // Codes come from the table and never hold a NUL, so the first NUL splits the key.
  std::string key;
  key.reserve(code.size() + 1 + device.size());
  key.append(code).push_back('\0');
  key.append(device);
  if (auto it = index_.find(key); it != index_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second);  // Most recently seen.
    Entry& e = *it->second;
    if (now - e.first < options_.window) {
      ++e.count;
      e.last = std::max(e.last, now);
      return {false, e.count, 0};
    }
    const uint64_t suppressed = e.count - 1;
    e.first = now;
    e.last = now;
    e.count = 1;
    return {true, 1, suppressed};
  }
  if (lru_.size() >= options_.max_entries) {
    const Entry& old = lru_.back();
    std::string old_key = old.code;
    old_key.push_back('\0');
    old_key.append(old.device);
    index_.erase(old_key);
    lru_.pop_back();
    ++evicted_;
  }
  lru_.push_front(Entry{std::string(code), std::string(device), now, now, 1});
  index_.emplace(std::move(key), lru_.begin());
  return {true, 1, 0};
}

std::vector<LogDedup::Entry> LogDedup::Entries() const {
  return std::vector<Entry>(lru_.begin(), lru_.end());
}

}  // namespace fabric
