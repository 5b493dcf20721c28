// What a kernel log line says about a NIC or its PCIe link: a table of the messages mlx5, bnxt
// (bnxt_en, bnxt_re), irdma (on ice, i40e, idpf), ionic and the PCIe core print when something is
// wrong, each with its severity and repair, and the device the line names. Plain substring
// matching (no regex: the reader may hand over thousands of lines a second). `LogDedup` turns a
// flood of one line into one finding with a count. Pure: agent/hostfs/kmsg.h reads the log.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/time/time.h"
#include "fabric/v1/health.pb.h"

namespace fabric {

struct LogRule {
  std::string_view code;  // stable name for alerting: "cmd_exec_timeout", "pcie_aer_fatal", ...
  v1::Severity severity;  // CRITICAL: the device cannot be trusted; WARNING: degraded or noisy
  // The driver that prints the line, as the kernel's dev_printk prefix names it ("mlx5_core
  // 0000:3b:00.0: ..."): the line starts with it followed by ' ' or ':'. Alternatives are
  // separated by '|' ("ice|i40e|idpf": irdma prints under its PCI parent's driver). Empty: any
  // line (kernel-core messages such as AER and the netdev watchdog).
  std::string_view driver_prefix;
  // The kernel's own text. '*' stands for any text in between (the fragments must appear in
  // order); a final '$' anchors the last fragment at the end of the line. Case-sensitive.
  std::string_view needle;
  v1::RepairAction repair;
  std::string_view why;
};

// The table, most specific first: the first rule that matches a line wins.
const std::vector<LogRule>& NicLogRules();

struct LogMatch {
  const LogRule* rule = nullptr;
  // The device the line names: a PCI address ("0000:3b:00.0") from the dev_printk prefix, or the
  // sender in AER's "error message received from" line; a netdev name from the old netdev
  // watchdog line ("NETDEV WATCHDOG: eth2 (mlx5_core): ..."); else the record's DEVICE=
  // ("+pci:0000:3b:00.0" gives the address, "+net:eth2" the name, others as they are); else "".
  std::string device;
};

// The first rule matching `message` (one kernel record's text, already unescaped). The PCIe core
// rules match any device; the caller keeps those naming a device it cares about. The caller
// passes kernel records only (KmsgReaderOptions::kernel_only): the text alone cannot tell a
// driver's line from a user's echo into /dev/kmsg.
std::optional<LogMatch> MatchNicLog(std::string_view message, std::string_view dict_device = "");

// The device name in a /dev/kmsg DEVICE= value, as LogMatch::device describes; "" when longer than
// a device name can be.
std::string DeviceFromDict(std::string_view dict_device);

// The health finding of a matched line about `subject` (an RDMA device, "mlx5_0:1", or a PCI
// address): check "kmsg", code "kmsg.<rule code>", the rule's severity and repair, its `why` as
// the message, and the line (cut to 512 bytes) as evidence, with the repeats `count` stands for.
v1::Finding KernelLogFinding(const LogMatch& m, std::string_view subject, std::string_view line,
                             uint64_t count);

struct LogDedupOptions {
  // A (code, device) seen again within this time of its first sighting is counted, not reported.
  absl::Duration window = absl::Minutes(10);
  // At most this many (code, device) pairs are remembered; the least recently seen goes first.
  size_t max_entries = 4096;
};

// Suppresses repeats of one (code, device) within a window while counting them, so a line printed
// 100,000 times is one finding with a count. Bounded in memory. Not thread-safe.
class LogDedup {
 public:
  struct Sighting {
    bool report = false;  // the first in its window: make a finding
    uint64_t count = 0;   // sightings in the current window, this one included
    // When a new window starts: the repeats suppressed in the window that ended.
    uint64_t suppressed_before = 0;
  };
  struct Entry {
    std::string code;
    std::string device;
    absl::Time first;  // the window's start
    absl::Time last;
    uint64_t count = 0;
  };

  explicit LogDedup(LogDedupOptions options = {});
  Sighting Observe(std::string_view code, std::string_view device, absl::Time now);
  // Remembered pairs, most recently seen first.
  std::vector<Entry> Entries() const;
  size_t size() const { return lru_.size(); }
  uint64_t evicted() const { return evicted_; }

 private:
  LogDedupOptions options_;
  std::list<Entry> lru_;  // front: most recently seen
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  uint64_t evicted_ = 0;
};

}  // namespace fabric
