#include "agent/policy/health/log_rules.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

namespace fabric {
namespace {

constexpr v1::Severity kCrit = v1::SEVERITY_CRITICAL;
constexpr v1::Severity kWarn = v1::SEVERITY_WARNING;

struct Case {
  std::string line;
  std::string code;
  v1::Severity severity;
  std::string device;
  std::string dict = "";
};

// Lines as the kernel prints them (the dev_printk prefix included), one or more per rule.
const Case kMatches[] = {
    // mlx5
    {"mlx5_core 0000:56:00.0: wait_func:1189:(pid 72061): ACCESS_REG(0x805) timeout. Will cause a "
     "leak of a command resource",
     "cmd_exec_timeout", kCrit, "0000:56:00.0"},
    {"mlx5_core 0000:03:00.0: cb_timeout_handler:877:(pid 0): cmd[3]: CREATE_MKEY(0x200) Async, "
     "timeout. Will cause a leak of a command resource",
     "cmd_exec_timeout", kCrit, "0000:03:00.0"},
    {"mlx5_core 0000:d2:00.0: poll_health:174:(pid 0): device's health compromised - reached miss "
     "count",
     "health_poll_failed", kCrit, "0000:d2:00.0"},
    {"mlx5_core 0000:3b:00.0: poll_health:801:(pid 0): Fatal error 1 detected",
     "health_poll_failed", kCrit, "0000:3b:00.0"},
    {"mlx5_core 0000:d2:00.0: synd 0x8: unrecoverable hardware error", "unrecoverable_err", kCrit,
     "0000:d2:00.0"},
    {"mlx5_core 0000:d2:00.0: Health issue observed, unrecoverable hardware error, severity(3) "
     "ERROR:",
     "unrecoverable_err", kCrit, "0000:d2:00.0"},
    {"mlx5_core 0000:d2:00.0: synd 0xb: HW fatal error", "unrecoverable_err", kCrit,
     "0000:d2:00.0"},
    // The prefix without an address (as some reports quote it): the dictionary names the device.
    {"mlx5_core: synd 0x8: unrecoverable hardware error", "unrecoverable_err", kCrit,
     "0000:d2:00.0", "+pci:0000:d2:00.0"},
    {"mlx5_core 0000:d2:00.0: mlx5_health_try_recover:406:(pid 1234): health recovery failed",
     "health_recovery_failed", kCrit, "0000:d2:00.0"},
    {"mlx5_core 0000:d2:00.0: mlx5_health_try_recover:398:(pid 1234): health recovery flow "
     "aborted, PCI reads still not working",
     "health_recovery_failed", kCrit, "0000:d2:00.0"},
    {"mlx5_core 0000:d2:00.0: PCI slot is unavailable", "pci_slot_unavailable", kCrit,
     "0000:d2:00.0"},
    {"mlx5_core 0000:5c:00.0: Port module event[error]: module 0, Cable error, High Temperature",
     "port_module_high_temp", kWarn, "0000:5c:00.0"},
    {"mlx5_core 0000:12:00.0: Port module event: module 0, Cable unplugged", "module_unplugged",
     kWarn, "0000:12:00.0"},
    {"mlx5_core 0000:12:00.0: Port module event[error]: module 1, Cable error, Bad or shorted "
     "cable/module",
     "port_module_error", kWarn, "0000:12:00.0"},
    {"mlx5_core 0000:12:00.0: mlx5_pcie_event:299:(pid 268269): Detected insufficient power on "
     "the PCIe slot (27W).",
     "pci_power_insufficient", kWarn, "0000:12:00.0"},
    {"mlx5_core 0000:0b:00.1: mlx5_cmd_out_err:808:(pid 1585): ACCESS_REG(0x805) op_mod(0x1) "
     "failed, status bad parameter(0x3), syndrome (0x6c4d48), err(-22)",
     "access_reg_failed", kWarn, "0000:0b:00.1"},
    {"mlx5_core 0000:3b:00.0 eth2: TX timeout detected", "mlx5_tx_timeout_detected", kWarn,
     "0000:3b:00.0"},
    {"mlx5_core 0000:3b:00.0 eth2: TX timeout on queue: 3, SQ: 0x10d, CQ: 0x4a1, SQ Cons: 0x0 SQ "
     "Prod: 0x7, usecs since last trans: 13940000",
     "mlx5_tx_timeout_detected", kWarn, "0000:3b:00.0"},
    {"mlx5_core 0000:3b:00.0 eth2: Link down", "link_down_log", kWarn, "0000:3b:00.0"},
    // The netdev watchdog, before and after 6.9.
    {"NETDEV WATCHDOG: eth2 (mlx5_core): transmit queue 3 timed out", "netdev_watchdog", kWarn,
     "eth2"},
    {"NETDEV WATCHDOG: enp59s0f0np0 (bnxt_en): transmit queue 1 timed out 5123 ms",
     "netdev_watchdog", kWarn, "enp59s0f0np0"},
    {"mlx5_core 0000:3b:00.0 eth2: NETDEV WATCHDOG: CPU: 3: transmit queue 3 timed out 5000 ms",
     "netdev_watchdog", kWarn, "0000:3b:00.0"},
    // bnxt_en, bnxt_re
    {"bnxt_en 0000:04:00.0 eth0: Fatal firmware reset event, data1: 0x10000002, data2: 0x0, min "
     "wait 0 ms, max wait 6000 ms",
     "bnxt_fw_fatal", kCrit, "0000:04:00.0"},
    {"bnxt_en 0000:04:00.0 eth0: Firmware fatal reset event, data1: 0x10000002, data2: 0x0, min "
     "wait 0 ms, max wait 6000 ms",
     "bnxt_fw_fatal", kCrit, "0000:04:00.0"},
    {"bnxt_en 0000:04:00.0 eth0: Firmware not responding, status: 0x8000", "bnxt_fw_not_responding",
     kCrit, "0000:04:00.0"},
    {"bnxt_en 0000:04:00.0: cmdq[0x4b]=0x11 timedout (10000)msec", "bnxt_re_cmd_timeout", kCrit,
     "0000:04:00.0"},
    {"bnxt_en 0000:04:00.0 eth0: Error (timeout: 500015) msg {0x23 0x1fc} len:0",
     "bnxt_hwrm_timeout", kWarn, "0000:04:00.0"},
    {"bnxt_en 0000:04:00.0 eth0: TX timeout detected, starting reset task!", "tx_timeout", kWarn,
     "0000:04:00.0"},
    {"bnxt_en 0000:04:00.0 eth0: NIC Link is Down", "link_down_log", kWarn, "0000:04:00.0"},
    // irdma, ice
    {"ice 0000:3b:00.0 irdma0: critical PE Error, GLPE_CRITERR=0x00011424", "irdma_critical_err",
     kCrit, "0000:3b:00.0"},
    {"ice 0000:3b:00.0 rocep59s0f0: HMC Error", "irdma_critical_err", kCrit, "0000:3b:00.0"},
    {"i40e 0000:3d:00.0 iwp61s0f0: PE Push Error", "irdma_critical_err", kCrit, "0000:3d:00.0"},
    {"ice 0000:3b:00.0 irdma0: Requesting a reset", "irdma_reset_requested", kWarn, "0000:3b:00.0"},
    {"ice 0000:3b:00.0 ens785f0: tx_timeout recovery level 1, txqueue 5", "tx_timeout", kWarn,
     "0000:3b:00.0"},
    {"ice 0000:3b:00.0 ens785f0: NIC Link is Down", "link_down_log", kWarn, "0000:3b:00.0"},
    // ionic
    {"ionic 0000:24:00.0: FW heartbeat stalled at 2864301", "ionic_fw_down", kCrit, "0000:24:00.0"},
    {"ionic 0000:24:00.0: DEVCMD IONIC_CMD_LIF_INIT (20) failed - FW halted", "ionic_fw_down",
     kCrit, "0000:24:00.0"},
    {"ionic 0000:24:00.0: DEVCMD IONIC_CMD_RESET (2) interrupted - FW is down", "ionic_fw_down",
     kCrit, "0000:24:00.0"},
    {"ionic 0000:24:00.0: DEVCMD IONIC_CMD_IDENTIFY (1) timeout after 4 secs",
     "ionic_devcmd_timeout", kWarn, "0000:24:00.0"},
    {"ionic 0000:24:00.0 enp36s0np0: Tx Timeout triggered - txq 4", "tx_timeout", kWarn,
     "0000:24:00.0"},
    {"ionic 0000:24:00.0 enp36s0np0: Link down", "link_down_log", kWarn, "0000:24:00.0"},
    // PCIe core: the root port names the sender; the device's own line names itself.
    {"pcieport 0000:3a:00.0: AER: Uncorrected (Fatal) error message received from 0000:3b:00.0",
     "pcie_aer_fatal", kCrit, "0000:3b:00.0"},
    {"pcieport 0000:3a:00.0: AER: Uncorrectable (Fatal) error message received from 0000:3b:00.0 "
     "(no details found)",
     "pcie_aer_fatal", kCrit, "0000:3b:00.0"},
    {"mlx5_core 0000:3b:00.0: AER: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction "
     "Layer, (Receiver ID)",
     "pcie_aer_fatal", kCrit, "0000:3b:00.0"},
    {"mlx5_core 0000:3b:00.0: PCIe Bus Error: severity=Uncorrectable (Fatal), type=Transaction "
     "Layer, (Receiver ID)",
     "pcie_aer_fatal", kCrit, "0000:3b:00.0"},
    {"pcieport 0000:00:01.0: AER: Multiple Uncorrectable (Non-Fatal) error message received from "
     "0000:3b:00.1",
     "pcie_aer_nonfatal", kWarn, "0000:3b:00.1"},
    {"pcieport 0000:00:03.0: PCIe Bus Error: severity=Uncorrected (Non-Fatal), type=Transaction "
     "Layer, (Requester ID)",
     "pcie_aer_nonfatal", kWarn, "0000:00:03.0"},
    {"pcieport 0000:00:1c.0: AER: Corrected error received: 0000:3b:00.0", "pcie_aer_correctable",
     kWarn, "0000:3b:00.0"},
    {"bnxt_en 0000:04:00.0: AER: PCIe Bus Error: severity=Correctable, type=Physical Layer, "
     "(Receiver ID)",
     "pcie_aer_correctable", kWarn, "0000:04:00.0"},
    {"pcieport 10000:00:02.0: AER: Correctable error message received from 10000:01:00.0",
     "pcie_aer_correctable", kWarn, "10000:01:00.0"},  // A VMD domain.
    {"pcieport 0000:00:01.0: DPC: containment event, status:0x1f01 source:0x0000",
     "pcie_dpc_containment", kCrit, "0000:00:01.0"},
    {"mlx5_core 0000:3b:00.0: 63.008 Gb/s available PCIe bandwidth, limited by 8.0 GT/s PCIe x8 "
     "link at 0000:3a:00.0 (capable of 252.048 Gb/s with 16.0 GT/s PCIe x16 link)",
     "pcie_link_degraded", kWarn, "0000:3b:00.0"},
};

TEST(MatchNicLog, KernelLines) {
  for (const Case& c : kMatches) {
    SCOPED_TRACE(c.line);
    std::optional<LogMatch> m = MatchNicLog(c.line, c.dict);
    ASSERT_TRUE(m.has_value());
    ASSERT_NE(m->rule, nullptr);
    EXPECT_EQ(m->rule->code, c.code);
    EXPECT_EQ(m->rule->severity, c.severity);
    EXPECT_EQ(m->device, c.device);
  }
}

TEST(MatchNicLog, LinesThatMustNotMatch) {
  const std::string lines[] = {
      "",
      // A user's echo into /dev/kmsg: neither the driver's prefix nor its text.
      "fabric: this is a fatal test line",
      "mlx5 fatal error test",
      "echo: mlx5_core 0000:3b:00.0: Fatal error 1 detected",
      "MLX5_CORE 0000:3b:00.0: FATAL ERROR 1 DETECTED",  // Case-sensitive, as printed.
      "mlx5_core0000:3b:00.0: Fatal error 1 detected",   // Not the driver's prefix.
      // Another driver's lines with the same words.
      "e1000e 0000:00:1f.6 eno1: NIC Link is Down",
      "ixgbe 0000:05:00.0 eth4: TX timeout detected",
      "e1000e 0000:00:1f.6 eno1: Detected Hardware Unit Hang",
      "nvme nvme0: I/O 12 QID 3 timeout, aborting",
      // The healthy side of the same messages.
      "mlx5_core 0000:3b:00.0: Port module event: module 0, Cable plugged",
      "mlx5_core 0000:3b:00.0: PCIe slot advertised sufficient power (75W).",
      "mlx5_core 0000:3b:00.0: PCIe slot power capability was not advertised.",
      "mlx5_core 0000:3b:00.0 eth2: Link up",
      "mlx5_core 0000:3b:00.0 eth2: Link down event ignored",  // Anchored at the end.
      "mlx5_core 0000:3b:00.0: health recovery succeeded",
      "mlx5_core 0000:3b:00.0: 252.048 Gb/s available PCIe bandwidth (16.0 GT/s PCIe x16 link)",
      "ionic 0000:24:00.0: FW heartbeat restored at 2864302",
      "bnxt_en 0000:04:00.0 eth0: NIC Link is up, 100000 Mbps full duplex, Flow control: none",
      // Lines cut in half.
      "mlx5_core 0000:56:00.0: wait_func:1189:(pid 72061): ACCESS_REG(0x805) timeout. Will cause "
      "a le",
      "NETDEV WATCHDOG: eth2 (mlx5_core): transmit queue 3",
      "pcieport 0000:00:01.0: AER: PCIe Bus Error: severity=Uncorrected (Fat",
      "mlx5_core 0000:3b:00.0: Port module event: module 0, Cable unplu",
  };
  for (const std::string& line : lines) {
    std::optional<LogMatch> m = MatchNicLog(line);
    EXPECT_FALSE(m.has_value()) << line << " matched " << m->rule->code;
  }
}

TEST(MatchNicLog, TableIsWellFormedAndEveryRuleIsReachable) {
  std::set<std::string_view> codes;
  for (const LogRule& rule : NicLogRules()) {
    SCOPED_TRACE(rule.needle);
    EXPECT_FALSE(rule.code.empty());
    EXPECT_FALSE(rule.needle.empty());
    EXPECT_FALSE(rule.why.empty());
    EXPECT_TRUE(v1::RepairAction_IsValid(rule.repair) &&
                rule.repair != v1::REPAIR_ACTION_UNSPECIFIED)
        << rule.repair;
    EXPECT_TRUE(rule.severity == kCrit || rule.severity == kWarn);
    codes.insert(rule.code);
    // A line made of the rule's own text must reach a rule with its code: no earlier rule of
    // another code shadows it.
    std::string text(rule.needle);
    if (text.back() == '$') text.pop_back();
    std::replace(text.begin(), text.end(), '*', 'X');
    const std::string_view driver = rule.driver_prefix.substr(0, rule.driver_prefix.find('|'));
    const std::string line =
        driver.empty() ? text : std::string(driver) + " 0000:3b:00.0 eth9: " + text;
    std::optional<LogMatch> m = MatchNicLog(line);
    ASSERT_TRUE(m.has_value()) << line;
    EXPECT_EQ(m->rule->code, rule.code) << line;
  }
  // The NVSentinel set is all there.
  for (std::string_view code :
       {"cmd_exec_timeout", "health_poll_failed", "unrecoverable_err", "netdev_watchdog",
        "mlx5_tx_timeout_detected", "port_module_high_temp", "pci_power_insufficient",
        "module_unplugged", "access_reg_failed", "link_down_log"}) {
    EXPECT_TRUE(codes.count(code)) << code;
  }
}

TEST(DeviceFromDict, Forms) {
  EXPECT_EQ(DeviceFromDict("+pci:0000:3b:00.0"), "0000:3b:00.0");
  EXPECT_EQ(DeviceFromDict("+net:eth2"), "eth2");
  EXPECT_EQ(DeviceFromDict("+infiniband:mlx5_0"), "mlx5_0");
  EXPECT_EQ(DeviceFromDict("n4"), "n4");
  EXPECT_EQ(DeviceFromDict("c1:11"), "c1:11");
  EXPECT_EQ(DeviceFromDict(""), "");
  EXPECT_EQ(DeviceFromDict("+nocolon"), "");
  EXPECT_EQ(DeviceFromDict(std::string(65, 'a')), "");
}

const absl::Time kT0 = absl::FromUnixSeconds(1700000000);

TEST(LogDedup, WindowAndCount) {
  LogDedup dedup;  // 10 minutes.
  LogDedup::Sighting s = dedup.Observe("cmd_exec_timeout", "0000:3b:00.0", kT0);
  EXPECT_TRUE(s.report);
  EXPECT_EQ(s.count, 1u);
  s = dedup.Observe("cmd_exec_timeout", "0000:3b:00.0", kT0 + absl::Minutes(1));
  EXPECT_FALSE(s.report);
  EXPECT_EQ(s.count, 2u);
  s = dedup.Observe("cmd_exec_timeout", "0000:3b:00.0", kT0 + absl::Minutes(9));
  EXPECT_FALSE(s.report);
  EXPECT_EQ(s.count, 3u);
  // Another device or another code is its own finding.
  EXPECT_TRUE(dedup.Observe("cmd_exec_timeout", "0000:3c:00.0", kT0 + absl::Minutes(9)).report);
  EXPECT_TRUE(dedup.Observe("link_down_log", "0000:3b:00.0", kT0 + absl::Minutes(9)).report);
  // The window runs from the first sighting: at 10 minutes a new one starts, and says how many
  // repeats the old one held back.
  s = dedup.Observe("cmd_exec_timeout", "0000:3b:00.0", kT0 + absl::Minutes(10));
  EXPECT_TRUE(s.report);
  EXPECT_EQ(s.count, 1u);
  EXPECT_EQ(s.suppressed_before, 2u);
  // A clock that steps back stays in the window rather than reporting again.
  s = dedup.Observe("cmd_exec_timeout", "0000:3b:00.0", kT0);
  EXPECT_FALSE(s.report);
  EXPECT_EQ(s.count, 2u);
}

TEST(LogDedup, FloodIsOneFindingWithACount) {
  LogDedup dedup;
  int reports = 0;
  for (int i = 0; i < 100000; ++i) {
    if (dedup.Observe("access_reg_failed", "0000:d2:00.0", kT0 + absl::Microseconds(10 * i))
            .report) {
      ++reports;
    }
  }
  EXPECT_EQ(reports, 1);
  ASSERT_EQ(dedup.size(), 1u);
  EXPECT_EQ(dedup.Entries()[0].count, 100000u);
  EXPECT_EQ(dedup.Entries()[0].last, kT0 + absl::Microseconds(10 * 99999));
}

TEST(LogDedup, BoundedLeastRecentlySeenGoesFirst) {
  LogDedupOptions opt;
  opt.max_entries = 3;
  opt.window = absl::Hours(1);
  LogDedup dedup(opt);
  dedup.Observe("c", "a", kT0);
  dedup.Observe("c", "b", kT0 + absl::Seconds(1));
  dedup.Observe("c", "c", kT0 + absl::Seconds(2));
  EXPECT_FALSE(dedup.Observe("c", "a", kT0 + absl::Seconds(3)).report);  // a: most recent now.
  EXPECT_TRUE(dedup.Observe("c", "d", kT0 + absl::Seconds(4)).report);   // Evicts b.
  EXPECT_EQ(dedup.size(), 3u);
  EXPECT_EQ(dedup.evicted(), 1u);
  std::vector<LogDedup::Entry> entries = dedup.Entries();
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0].device, "d");
  EXPECT_EQ(entries[1].device, "a");
  EXPECT_EQ(entries[1].count, 2u);
  EXPECT_EQ(entries[2].device, "c");
  // b was forgotten: seen again, it is a new finding.
  EXPECT_TRUE(dedup.Observe("c", "b", kT0 + absl::Seconds(5)).report);
  EXPECT_EQ(dedup.size(), 3u);
  EXPECT_EQ(dedup.evicted(), 2u);

  // Many distinct pairs never grow it past the bound.
  LogDedup small(opt);
  for (int i = 0; i < 10000; ++i) small.Observe("c", std::to_string(i), kT0);
  EXPECT_EQ(small.size(), 3u);
  EXPECT_EQ(small.evicted(), 9997u);
}

}  // namespace
}  // namespace fabric
