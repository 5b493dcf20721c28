// The health monitor: polls the port counters, carrier changes and PCIe AER totals of the
// published host's RDMA devices (and of its GPUs and the bridges above both), judges
// them against the `health` section's counter rules, notices devices that vanish, and keeps what
// it found in a FindingMemory that survives an agent restart (not a reboot). A Publisher: each
// published host tells it what to watch; the loop calls Poll every interval().
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/daemon/cycle/publisher.h"
#include "agent/hostfs/host_fs.h"
#include "agent/hostfs/kmsg.h"
#include "agent/policy/health/counter_rules.h"
#include "agent/policy/health/log_rules.h"
#include "agent/policy/health/memory.h"
#include "fabric/v1/health.pb.h"
#include "fabric/v1/host.pb.h"

namespace fabric {

struct HealthMonitorOptions {
  v1::HealthConfig config;
  std::string state_file;  // Where the memory is saved (binary HealthMemoryState); empty: not.
  std::string boot_id;     // /proc/sys/kernel/random/boot_id as read at start.
};

// Finding sources in the memory, beside the judge's "counter" and the memory's "flap".
inline constexpr std::string_view kCounterSource = "counter";
inline constexpr std::string_view kDeviceMissingSource = "device_missing";
inline constexpr std::string_view kCounterAccessSource = "counter_access";
inline constexpr std::string_view kHealthStateSource = "health_state";
inline constexpr std::string_view kKernelLogSource = "kmsg";

// Thread-safe (one mutex): the loop thread publishes and polls, the metrics thread reads stats().
class HealthMonitor : public Publisher {
 public:
  // `sysfs` outlives it. `clock` gives CLOCK_BOOTTIME and wall time (tests pass their own).
  HealthMonitor(const HostFs* sysfs, HealthMonitorOptions options,
                std::function<MemoryClock()> clock);

  // Loads the saved memory. A state of another boot is dropped (logged). An unreadable, corrupt
  // or foreign file becomes an OK-severity "health_state.corrupt" event (the memory is lost, the
  // hardware is not at fault) and is rewritten at the next save. Never fails.
  void Start();

  // Publisher: follows p.snapshot's host.
  void Publish(const Publication& p) override;
  // The memory's findings (at the clock's now; `now` is the cycle's wall time, unused).
  void Findings(absl::Time now, std::vector<v1::Finding>* out) const override;

  // What to watch from `host`: each port of an RDMA device (software devices too; not SR-IOV
  // VFs: a VF's counters are its pod's traffic), each such port's netdev, and the PCI functions
  // of those NICs and of the GPUs with the bridges on their path, whose ACS Control it reads now
  // (root only): P2P request or completion redirect is a WARNING "pcie_acs.redirect". A port that
  // was ACTIVE at the previous Follow and is not now is a flap (and not again in the carrier
  // changes of the poll after). Devices that leave the inventory are still checked for
  // missing_polls polls (and while they are missing).
  void Follow(const v1::Host& host);

  // One poll at the clock's now. Per watched port: only the counter files the rules name
  // (counters/<name>, else hw_counters/<name>) through the judge into "counter" events; an
  // EIO/EINVAL/EPERM/EOPNOTSUPP read puts the port in back-off (access_backoff_s, 6 h) with an OK
  // "counter_access.backoff" finding; ports in counter_exclude are not read (OK
  // "counter_access.excluded"). The netdev's carrier_changes (subject the port) through the
  // judge, each down-and-up a Flap. AER totals of the watched PCI functions as counters
  // aer_dev_{correctable,nonfatal,fatal} (unreadable files skipped). A device whose
  // class/infiniband/<dev> is gone missing_polls polls in a row: CRITICAL "device_missing.gone"
  // (HARDWARE_INSPECTION) until it is back. Saves the memory when its findings changed; returns
  // true when the findings' severity, check, code, subject or message changed.
  bool Poll();

  // Kernel log records (the reader keeps kernel records only, under its rate bound): a line a NIC
  // rule matches (MatchNicLog) about a watched RDMA device (by PCI address), a watched port's
  // netdev or a watched PCI function (a GPU, a bridge) becomes a "kmsg" event in the memory
  // (KernelLogFinding), one per (code, subject) in 10 minutes with the repeats counted; an
  // access_reg_failed line puts the device's ports in counter back-off (the firmware refuses:
  // reading on floods the log). Lines about other devices, or none, are counted and dropped.
  // Saves the memory when its findings changed; returns true when they changed.
  // `counts`: the reader's totals. Records lost before any rule saw them (overwritten before they
  // were read, malformed, over the rate bound, failed reads, the source ending) are an OK
  // "kmsg_access.lost" finding with the totals as evidence, and a log line at most once a minute.
  bool OnKernelLog(const std::vector<KmsgRecord>& records, const KmsgCounts& counts = {});
  // Whether the kernel log could be opened: an error is an OK "kmsg_access.unreadable" finding
  // (the host is not at fault, but its kernel-log faults go unseen).
  void SetKernelLogStatus(const absl::Status& status);

  // A reloaded config: new rules, windows and poll interval; the memory is kept, each counter's
  // next read is a new baseline.
  void SetConfig(const v1::HealthConfig& config);

  absl::Duration interval() const;  // poll_interval_s, or 10 s

  struct Stats {
    uint64_t polls = 0, reads = 0, read_errors = 0, backoff_ports = 0;
    uint64_t kmsg_matched = 0;  // kernel log lines a rule matched about a watched device
    uint64_t kmsg_other = 0;    // matched lines about devices not watched (or none)
    KmsgCounts kmsg;            // the kernel log reader's totals
  };
  Stats stats() const;

 private:
  struct Port {
    uint32_t number = 0;
    std::string netdev;
    bool active = false;
    absl::Duration backoff_until = absl::ZeroDuration();  // boot time; 0: none
    std::string backoff_evidence;
    std::optional<uint64_t> carrier_changes;  // at the last poll
    uint64_t carrier_base = 0;   // carrier_changes at the baseline (the link taken as up)
    uint64_t flaps_counted = 0;  // flaps since the baseline, by either source
  };
  struct Device {
    std::vector<Port> ports;
    bool in_inventory = true;
    bool software = false;          // rxe, siw: no PCI function, never "missing"
    uint32_t polls_since_left = 0;  // polls since it left the inventory
    uint32_t missing = 0;           // polls in a row its directory was gone
  };

  void ApplyConfigLocked();  // options_.config into the judge, the watch lists and limits
  absl::StatusOr<uint64_t> ReadCarrierChanges(const Port& port) const;
  bool CarrierCounted(const Port& port) const;
  void CheckAcsLocked(MemoryClock now);  // the bridges in acs_bridges_
  void NoteKernelLogLossLocked(const KmsgCounts& counts, MemoryClock now);
  bool Excluded(const std::string& device, uint32_t port) const;
  void PollPort(const std::string& device, Port& port, const std::string& dev_path, MemoryClock now,
                std::vector<v1::Finding>* access);
  void PollNetdev(const std::string& device, Port& port, MemoryClock now);
  void PollAer(const std::string& bdf, MemoryClock now);
  void Observe(const std::string& subject, const std::string& counter, uint64_t value,
               MemoryClock now);
  std::string FindingsKeyLocked(MemoryClock now, std::string* save_key) const;
  bool ChangedLocked(MemoryClock now);  // the findings key moved on; saves when it must
  void SaveLocked(MemoryClock now);

  const HostFs* sysfs_;
  HealthMonitorOptions options_;
  std::function<MemoryClock()> clock_;
  uint32_t missing_polls_;
  absl::Duration backoff_;

  mutable std::mutex mu_;
  CounterJudge judge_;
  mutable FindingMemory memory_;
  std::vector<std::string> port_counters_;  // rule counters read from a port's files
  bool watch_carrier_ = false;
  bool watch_aer_ = false;
  std::map<std::string, Device> devices_;
  std::set<std::string> pci_;          // AER watch list
  std::set<std::string> acs_bridges_;  // pci_ but the endpoints: ACS last read on
  absl::Duration acs_read_at_ = absl::InfiniteDuration();  // boot time; never
  std::map<std::string, std::string> locations_;           // counter -> "counters" or "hw_counters"
  std::map<std::string, std::string> pci_devices_;         // PCI address -> watched RDMA device
  std::map<std::string, std::string> netdev_ports_;        // netdev -> "mlx5_0:1"
  LogDedup log_dedup_;
  uint64_t kmsg_lost_ = 0;                                       // at the last loss finding
  absl::Duration kmsg_loss_logged_ = -absl::InfiniteDuration();  // boot time
  std::string findings_key_;
  std::string save_key_;
  bool dirty_ = false;  // the state file must be rewritten
  Stats stats_;
};

}  // namespace fabric
