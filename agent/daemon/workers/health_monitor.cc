#include "agent/daemon/workers/health_monitor.h"

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/common/atomic_file.h"
#include "agent/common/log.h"
#include "agent/common/strings.h"
#include "agent/hostfs/pci_acs.h"
#include "agent/hostfs/pci_aer.h"
#include "agent/publish/metrics/port_counters.h"

namespace fabric {
namespace {

constexpr std::string_view kCarrierChanges = "carrier_changes";
constexpr std::string_view kAerPrefix = "aer_dev_";
// Devices that left the inventory and are still watched: bounded apart from the inventory.
constexpr size_t kMaxDeparted = 64;

std::string PortSubject(std::string_view device, uint32_t port) {
  return absl::StrCat(Av(device), ":", port);
}

// The firmware refusing the PMA (mlx5's "ACCESS_REG failed" on restricted ports) and its kin:
// reading again soon only floods the kernel log.
bool IsAccessError(const absl::Status& s) {
  const std::optional<int> err = StatusErrno(s);
  return err && (*err == EIO || *err == EINVAL || *err == EPERM || *err == EOPNOTSUPP);
}

v1::Finding Note(std::string_view code, std::string subject, std::string message,
                 std::string evidence) {
  v1::Finding f;
  f.set_severity(v1::SEVERITY_OK);
  f.set_check(std::string(kCounterAccessSource));
  f.set_code(std::string(code));
  f.set_subject(std::move(subject));
  f.set_message(std::move(message));
  f.set_evidence(std::move(evidence));
  f.set_repair(v1::REPAIR_ACTION_NONE);
  return f;
}

}  // namespace

HealthMonitor::HealthMonitor(const HostFs* sysfs, HealthMonitorOptions options,
                             std::function<MemoryClock()> clock)
    : sysfs_(sysfs),
      options_(std::move(options)),
      clock_(std::move(clock)),
      judge_({}),
      memory_(MemoryOptionsFrom(options_.config)) {
  ApplyConfigLocked();
}

void HealthMonitor::ApplyConfigLocked() {
  const v1::HealthConfig& c = options_.config;
  missing_polls_ = c.missing_polls() ? c.missing_polls() : 3;
  backoff_ = c.access_backoff_s() > 0 ? absl::Seconds(c.access_backoff_s()) : absl::Hours(6);
  judge_ = CounterJudge(EffectiveCounterRules(c));
  watch_carrier_ = watch_aer_ = false;
  port_counters_.clear();
  std::set<std::string> names;
  for (const v1::CounterRule& r : judge_.rules()) {
    if (r.counter() == kCarrierChanges) {
      watch_carrier_ = true;
    } else if (absl::StartsWith(r.counter(), Av(kAerPrefix))) {
      watch_aer_ = true;
    } else if (names.insert(r.counter()).second) {
      port_counters_.push_back(r.counter());
    }
  }
}

void HealthMonitor::SetConfig(const v1::HealthConfig& config) {
  std::lock_guard<std::mutex> lock(mu_);
  options_.config = config;
  // The memory moves over under the new windows and sticky time; the counters start a new
  // baseline (one poll's deltas are not judged).
  const v1::HealthMemoryState kept = memory_.Save(options_.boot_id);
  memory_ = FindingMemory(MemoryOptionsFrom(config));
  if (auto loaded = memory_.Load(kept, options_.boot_id, clock_()); !loaded.ok()) {
    Log(LogLevel::kWarning, "health memory across the reload: ", loaded.status().ToString());
  }
  ApplyConfigLocked();
  dirty_ = true;
}

void HealthMonitor::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  const MemoryClock now = clock_();
  if (options_.state_file.empty()) return;
  std::error_code ec;
  if (!std::filesystem::exists(options_.state_file, ec) && !ec) return;  // first start
  absl::Status problem;
  // Bounded (HostFs::kMaxFileBytes): a state file grown by mistake is an error, not a big read.
  absl::StatusOr<std::string> bytes = HostFsImpl("/").ReadFile(options_.state_file);
  if (!bytes.ok()) {
    problem = bytes.status();
  } else if (auto state = FindingMemory::ParseState(*bytes); !state.ok()) {
    problem = state.status();
  } else if (auto loaded = memory_.Load(*state, options_.boot_id, now); !loaded.ok()) {
    problem = loaded.status();
  } else if (loaded->reset) {
    Log(LogLevel::kInfo, "health memory ", options_.state_file,
        " is of another boot: starting clean");
    dirty_ = true;
  }
  if (!problem.ok()) {
    Log(LogLevel::kWarning, "health memory ", options_.state_file, ": ", problem.ToString(),
        "; starting afresh");
    // The memory is lost, the hardware is not at fault: seen, but not failing the node.
    v1::Finding f;
    f.set_severity(v1::SEVERITY_OK);
    f.set_check(std::string(kHealthStateSource));
    f.set_code("health_state.corrupt");
    f.set_subject(options_.state_file);
    f.set_message("the saved health memory could not be loaded; findings start afresh");
    f.set_evidence(problem.ToString());
    f.set_repair(v1::REPAIR_ACTION_NONE);
    memory_.Event(kHealthStateSource, std::move(f), now);
    dirty_ = true;
  }
  findings_key_ = FindingsKeyLocked(now, &save_key_);
  if (dirty_) SaveLocked(now);
}

void HealthMonitor::Publish(const Publication& p) { Follow(*p.snapshot.host); }

void HealthMonitor::Follow(const v1::Host& host) {
  std::lock_guard<std::mutex> lock(mu_);
  const MemoryClock now = clock_();
  std::set<std::string> seen;
  pci_.clear();
  pci_devices_.clear();
  netdev_ports_.clear();
  for (const v1::RdmaDevice& dev : host.rdma_devices()) {
    // A VF's counters are its pod's traffic. Software devices (rxe, siw) are watched: their
    // ports follow their netdev's link, and they have no PCI function of their own.
    if (dev.pci().sriov().role() == v1::SRIOV_ROLE_VF) continue;
    seen.insert(dev.name());
    Device& d = devices_[dev.name()];
    std::vector<Port> ports;
    for (const v1::Port& p : dev.ports()) {
      Port np;
      for (const Port& old : d.ports) {
        if (old.number == p.number()) np = old;
      }
      const bool had = np.number != 0;
      np.number = p.number();
      np.netdev = p.netdev();
      if (!p.netdev().empty()) netdev_ports_[p.netdev()] = PortSubject(dev.name(), p.number());
      const bool active =
          p.state() == v1::PORT_STATE_ACTIVE || p.state() == v1::PORT_STATE_ACTIVE_DEFER;
      if (had && np.active && !active && !CarrierCounted(np)) {
        memory_.Flap(PortSubject(dev.name(), p.number()),
                     absl::StrCat("state ACTIVE -> ", v1::PortState_Name(p.state())), now);
        ++np.flaps_counted;  // the netdev's carrier_changes will tell this flap again
      }
      np.active = active;
      ports.push_back(std::move(np));
    }
    d.ports = std::move(ports);
    d.in_inventory = true;
    d.software = dev.pci().address().empty();
    d.polls_since_left = 0;
    if (!dev.pci().address().empty()) {
      pci_.insert(dev.pci().address());
      pci_devices_[dev.pci().address()] = dev.name();
    }
    for (const std::string& bdf : dev.pci().path()) {
      if (!absl::StartsWith(bdf, "pci")) pci_.insert(bdf);  // "pci0000:15" is the root complex
    }
  }
  std::set<std::string> endpoints;  // the NICs' and GPUs' own functions
  for (const auto& [bdf, name] : pci_devices_) endpoints.insert(bdf);
  for (const v1::Accelerator& a : host.accelerators()) {
    if (!a.pci().address().empty()) {
      pci_.insert(a.pci().address());
      endpoints.insert(a.pci().address());
    }
    for (const std::string& bdf : a.pci().path()) {
      if (!absl::StartsWith(bdf, "pci")) pci_.insert(bdf);
    }
  }
  std::set<std::string> bridges;
  for (const std::string& bdf : pci_) {
    if (!endpoints.count(bdf)) bridges.insert(bdf);
  }
  // ACS changes only at boot or with setpci: re-read when the bridges change, else at most
  // every kAcsReread (up to 256 config spaces of 4 KB each).
  constexpr absl::Duration kAcsReread = absl::Minutes(10);
  if (bridges != acs_bridges_ || acs_read_at_ == absl::InfiniteDuration() ||
      now.boot - acs_read_at_ >= kAcsReread) {
    acs_bridges_ = std::move(bridges);
    acs_read_at_ = now.boot;
    CheckAcsLocked(now);
  }
  size_t departed = 0;
  for (auto it = devices_.begin(); it != devices_.end();) {
    if (!seen.count(it->first)) {
      if (it->second.in_inventory) {
        it->second.in_inventory = false;
        it->second.polls_since_left = 0;
      }
      if (++departed > kMaxDeparted) {
        it = devices_.erase(it);
        continue;
      }
    }
    ++it;
  }
  std::string save_key;
  findings_key_ = FindingsKeyLocked(now, &save_key);
  if (save_key != save_key_ || dirty_) {
    save_key_ = std::move(save_key);
    SaveLocked(now);
  }
}

bool HealthMonitor::Excluded(const std::string& device, uint32_t port) const {
  const std::string subject = PortSubject(device, port);
  for (const std::string& e : options_.config.counter_exclude()) {
    if (e == device || e == subject) return true;
  }
  return false;
}

void HealthMonitor::Observe(const std::string& subject, const std::string& counter, uint64_t value,
                            MemoryClock now) {
  for (const CounterBreach& b : judge_.Observe(subject, counter, value, now.boot)) {
    memory_.Event(kCounterSource, BreachFinding(b), now);
  }
}

// Reads only the counters the rules name, each from counters/ or hw_counters/ (where it was
// found before, else both), parsed by the metrics' one parser.
void HealthMonitor::PollPort(const std::string& device, Port& port, const std::string& dev_path,
                             MemoryClock now, std::vector<v1::Finding>* access) {
  const std::string subject = PortSubject(device, port.number);
  if (Excluded(device, port.number)) {
    access->push_back(Note(
        "counter_access.excluded", subject,
        absl::StrCat("counters of ", subject, " are not read: health.counter_exclude names them"),
        ""));
    return;
  }
  const std::string back_off_message =
      absl::StrCat("counters of ", subject, " are not read for ", absl::FormatDuration(backoff_),
                   ": the device refused a read (firmware-restricted port?)");
  if (port.backoff_until > now.boot) {
    access->push_back(
        Note("counter_access.backoff", subject, back_off_message, port.backoff_evidence));
    return;
  }
  port.backoff_until = absl::ZeroDuration();
  const std::string port_path = absl::StrCat(dev_path, "/ports/", port.number);
  for (const std::string& name : port_counters_) {
    const auto known = locations_.find(name);
    const std::vector<std::string> dirs = known != locations_.end()
                                              ? std::vector<std::string>{known->second}
                                              : std::vector<std::string>{"counters", "hw_counters"};
    for (const std::string& dir : dirs) {
      const std::string rel = absl::StrCat(dir, "/", name);
      ++stats_.reads;
      absl::StatusOr<std::string> text = sysfs_->ReadFile(JoinPath(port_path, rel));
      if (!text.ok()) {
        const std::optional<int> err = StatusErrno(text.status());
        if (err && (*err == ENOENT || *err == ENOTDIR)) continue;  // not this driver's
        ++stats_.read_errors;
        if (IsAccessError(text.status())) {
          port.backoff_until = now.boot + backoff_;
          port.backoff_evidence = absl::StrCat(rel, ": ", text.status().message());
          access->push_back(
              Note("counter_access.backoff", subject, back_off_message, port.backoff_evidence));
          return;
        }
        break;  // e.g. a directory: skipped, this poll
      }
      absl::StatusOr<uint64_t> value = metrics::ParseCounterValue(*text);
      if (value.ok()) {
        locations_.emplace(name, dir);
        Observe(subject, name, *value, now);
      } else if (!absl::IsUnavailable(value.status())) {
        ++stats_.read_errors;
      }
      break;
    }
  }
}

absl::StatusOr<uint64_t> HealthMonitor::ReadCarrierChanges(const Port& port) const {
  absl::StatusOr<std::string> text =
      sysfs_->ReadFile(absl::StrCat("class/net/", port.netdev, "/carrier_changes"));
  if (!text.ok()) return text.status();
  return metrics::ParseCounterValue(*text);
}

// Whether a poll already counted the down the port state shows now (the poll came first): the
// netdev's carrier changes since the baseline show downs, and no more than were counted.
bool HealthMonitor::CarrierCounted(const Port& port) const {
  if (!port.carrier_changes || port.netdev.empty()) return false;
  absl::StatusOr<uint64_t> value = ReadCarrierChanges(port);
  if (!value.ok() || *value < port.carrier_base) return false;
  const uint64_t downs = (*value - port.carrier_base + 1) / 2;
  return downs >= 1 && downs <= port.flaps_counted;
}

// carrier_changes counts the link going down and up again: two per flap.
void HealthMonitor::PollNetdev(const std::string& device, Port& port, MemoryClock now) {
  if (port.netdev.empty()) return;
  const std::string subject = PortSubject(device, port.number);
  ++stats_.reads;
  absl::StatusOr<uint64_t> value = ReadCarrierChanges(port);
  if (!value.ok()) {
    if (StatusErrno(value.status()) != ENOENT) ++stats_.read_errors;
    return;
  }
  if (!port.carrier_changes || *value < port.carrier_base) {
    port.carrier_base = *value;  // the first read, or a reset (a driver reload): a new baseline
    port.flaps_counted = 0;
  } else if (*value > *port.carrier_changes) {
    // Transitions alternate down, up, ... from the link up at the baseline: the downs are
    // (transitions + 1) / 2, however the polls split them. One home per flap: those the port
    // state already showed (Follow) are among them.
    const uint64_t downs = (*value - port.carrier_base + 1) / 2;
    const uint64_t flaps = std::min<uint64_t>(downs - std::min(downs, port.flaps_counted),
                                              memory_.options().flap_max + 1);
    for (uint64_t i = 0; i < flaps; ++i) {
      memory_.Flap(subject,
                   absl::StrCat(port.netdev, " carrier_changes +", *value - *port.carrier_changes),
                   now);
    }
    port.flaps_counted = std::max(port.flaps_counted, downs);
  }
  port.carrier_changes = *value;
  if (watch_carrier_) Observe(subject, std::string(kCarrierChanges), *value, now);
}

void HealthMonitor::PollAer(const std::string& bdf, MemoryClock now) {
  stats_.reads += 3;
  absl::StatusOr<PciAer> aer = ReadPciAer(*sysfs_, bdf);
  if (!aer.ok()) {
    // No AER capability is normal; an unreadable file is skipped, not a finding each poll.
    if (!absl::IsNotFound(aer.status())) ++stats_.read_errors;
    return;
  }
  Observe(bdf, "aer_dev_correctable", aer->correctable.total, now);
  Observe(bdf, "aer_dev_nonfatal", aer->nonfatal.total, now);
  Observe(bdf, "aer_dev_fatal", aer->fatal.total, now);
}

bool HealthMonitor::Poll() {
  std::lock_guard<std::mutex> lock(mu_);
  const MemoryClock now = clock_();
  ++stats_.polls;
  std::vector<v1::Finding> missing, access;
  uint64_t backoff_ports = 0;
  for (auto it = devices_.begin(); it != devices_.end();) {
    const std::string& name = it->first;
    Device& d = it->second;
    if (!d.in_inventory) ++d.polls_since_left;
    absl::StatusOr<std::string> path = sysfs_->RealPath(absl::StrCat("class/infiniband/", name));
    if (!path.ok()) {
      if (!absl::IsNotFound(path.status())) {
        ++stats_.read_errors;
        ++it;
        continue;
      }
      if (d.software) {  // `rdma link delete` is an operator's act, not a failing adapter
        it = devices_.erase(it);
        continue;
      }
      if (d.missing++ == 0) {
        // A device that comes back starts from a baseline, not a giant "increase".
        for (Port& p : d.ports) {
          judge_.Forget(PortSubject(name, p.number));
          p.carrier_changes.reset();
        }
      }
      if (d.missing >= missing_polls_) {
        v1::Finding f;
        f.set_severity(v1::SEVERITY_CRITICAL);
        f.set_check(std::string(kDeviceMissingSource));
        f.set_code("device_missing.gone");
        f.set_subject(name);
        f.set_message(absl::StrCat("RDMA device ", name, " has been gone from sysfs for ",
                                   d.missing, " polls"));
        f.set_evidence(absl::StrCat("class/infiniband/", name, ": ", path.status().message()));
        // A device that drops off the bus is the adapter, its slot or its power: look first.
        f.set_repair(v1::REPAIR_ACTION_HARDWARE_INSPECTION);
        missing.push_back(std::move(f));
      }
      ++it;
      continue;
    }
    d.missing = 0;
    if (!d.in_inventory && d.polls_since_left >= missing_polls_) {
      it = devices_.erase(it);
      continue;
    }
    for (Port& p : d.ports) {
      PollPort(name, p, *path, now, &access);
      if (p.backoff_until > now.boot) ++backoff_ports;
      PollNetdev(name, p, now);
    }
    ++it;
  }
  if (watch_aer_) {
    for (const std::string& bdf : pci_) PollAer(bdf, now);
  }
  stats_.backoff_ports = backoff_ports;
  memory_.Update(kDeviceMissingSource, std::move(missing), now);
  memory_.Update(kCounterAccessSource, std::move(access), now);

  return ChangedLocked(now);
}

namespace {

uint64_t Lost(const KmsgCounts& c) {
  return c.malformed + c.overruns + c.rate_dropped + c.source_errors + c.ends;
}

std::string LossText(const KmsgCounts& c) {
  std::string out =
      absl::StrCat(c.overruns, " overwritten before they were read (EPIPE), ", c.malformed,
                   " malformed, ", c.rate_dropped, " over the rate bound, ", c.source_errors,
                   " failed reads, ", c.ends, " ends of the source, of ", c.read, " read");
  // The parse error quotes the record already escaped (Excerpt).
  if (!c.last_malformed.empty()) absl::StrAppend(&out, "; last malformed: ", c.last_malformed);
  return out;
}

}  // namespace

void HealthMonitor::NoteKernelLogLossLocked(const KmsgCounts& counts, MemoryClock now) {
  const uint64_t lost = Lost(counts);
  if (lost == kmsg_lost_) return;
  kmsg_lost_ = lost;
  v1::Finding f;
  f.set_severity(v1::SEVERITY_OK);
  f.set_check("kmsg_access");
  f.set_code("kmsg_access.lost");
  f.set_subject("kernel log");
  f.set_message(
      "kernel log records were lost before the NIC and PCIe rules saw them: faults among them "
      "went unseen");
  f.set_evidence(LossText(counts));
  f.set_repair(v1::REPAIR_ACTION_NONE);
  std::vector<v1::Finding> note;
  note.push_back(std::move(f));
  memory_.Update("kmsg_loss", std::move(note), now);
  // Said in the log too, at most once a minute: a flood must not become one.
  if (now.boot - kmsg_loss_logged_ >= absl::Minutes(1)) {
    kmsg_loss_logged_ = now.boot;
    Log(LogLevel::kWarning, "kernel log: records lost: ", LossText(counts));
  }
}

bool HealthMonitor::OnKernelLog(const std::vector<KmsgRecord>& records, const KmsgCounts& counts) {
  std::lock_guard<std::mutex> lock(mu_);
  const MemoryClock now = clock_();
  stats_.kmsg = counts;
  NoteKernelLogLossLocked(counts, now);
  // The dedup window runs on boot time: a wall-clock jump neither floods nor silences it.
  const absl::Time at = absl::UnixEpoch() + now.boot;
  for (const KmsgRecord& r : records) {
    std::optional<LogMatch> m = MatchNicLog(r.message, r.device);
    if (!m) continue;
    std::string device;  // the RDMA device the line names, when it names one
    std::string subject;
    if (auto d = pci_devices_.find(m->device); d != pci_devices_.end()) {
      subject = device = d->second;
    } else if (auto n = netdev_ports_.find(m->device); n != netdev_ports_.end()) {
      subject = n->second;
      device = subject.substr(0, subject.rfind(':'));
    } else if (pci_.count(m->device)) {
      subject = m->device;  // a GPU or a bridge on a watched path
    } else {
      ++stats_.kmsg_other;
      continue;
    }
    ++stats_.kmsg_matched;
    const LogDedup::Sighting seen = log_dedup_.Observe(m->rule->code, subject, at);
    if (!seen.report) continue;
    memory_.Event(kKernelLogSource,
                  KernelLogFinding(*m, subject, r.message, seen.suppressed_before + 1), now);
    if (m->rule->code == "access_reg_failed" && !device.empty()) {
      // The firmware refuses this function's registers: stop asking (NVSentinel's
      // access_reg_failed, gpud#1164), the next poll says so.
      auto d = devices_.find(device);
      if (d == devices_.end()) continue;
      for (Port& p : d->second.ports) {
        p.backoff_until = now.boot + backoff_;
        p.backoff_evidence = absl::StrCat("kernel log: ", r.message.substr(0, 256));
      }
    }
  }
  return ChangedLocked(now);
}

// ACS P2P redirect on the bridges above the GPUs and NICs sends GPUDirect traffic up to the root
// complex. Read when the bridges change (settings change only with a reboot or setpci); config
// space past 64 bytes is root's, so an unprivileged agent finds nothing here (the doctor says so).
void HealthMonitor::CheckAcsLocked(MemoryClock now) {
  constexpr size_t kMaxBridges = 256;
  std::vector<v1::Finding> out;
  size_t read = 0;
  for (const std::string& bdf : acs_bridges_) {
    if (++read > kMaxBridges) break;
    absl::StatusOr<std::string> config =
        sysfs_->ReadFile(absl::StrCat("bus/pci/devices/", bdf, "/config"));
    if (!config.ok()) continue;
    absl::StatusOr<std::optional<uint16_t>> control = ParseAcsControl(*config);
    if (!control.ok() || !control->has_value() || !AcsRedirects(**control)) continue;
    v1::Finding f;
    f.set_severity(v1::SEVERITY_WARNING);
    f.set_check("pcie_acs");
    f.set_code("pcie_acs.redirect");
    f.set_subject(bdf);
    f.set_message(
        "ACS redirects peer-to-peer requests to the root complex on a bridge above GPUs or NICs: "
        "GPUDirect RDMA is slow or hangs; disable it in the BIOS or with setpci "
        "(ECAP_ACS+6.w)");
    f.set_evidence(absl::StrFormat("ACS Control 0x%04x (ReqRedir %d, CmpltRedir %d)", **control,
                                   (**control & kAcsP2pRequestRedirect) ? 1 : 0,
                                   (**control & kAcsP2pCompletionRedirect) ? 1 : 0));
    f.set_repair(v1::REPAIR_ACTION_NONE);
    out.push_back(std::move(f));
  }
  memory_.Update("pcie_acs", std::move(out), now);
}

void HealthMonitor::SetKernelLogStatus(const absl::Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<v1::Finding> note;
  if (!status.ok()) {
    v1::Finding f;
    f.set_severity(v1::SEVERITY_OK);
    f.set_check("kmsg_access");
    f.set_code("kmsg_access.unreadable");
    f.set_subject("kernel log");
    f.set_message(
        "the kernel log is not read: NIC and PCIe faults the drivers log are not seen (the "
        "agent needs CAP_SYSLOG where kernel.dmesg_restrict=1)");
    f.set_evidence(status.ToString());
    f.set_repair(v1::REPAIR_ACTION_NONE);
    note.push_back(std::move(f));
    // Denied is how the shipped unit runs (DevicePolicy=closed, no CAP_SYSLOG): the finding says
    // it, the log only informs. A source that is not the kernel log is an operator's mistake.
    Log(absl::IsPermissionDenied(status) ? LogLevel::kInfo : LogLevel::kWarning,
        "kernel log not read: ", status.message());
  }
  const MemoryClock now = clock_();
  memory_.Update("kmsg_access", std::move(note), now);
  ChangedLocked(now);
}

bool HealthMonitor::ChangedLocked(MemoryClock now) {
  std::string save_key;
  std::string key = FindingsKeyLocked(now, &save_key);
  const bool changed = key != findings_key_;
  findings_key_ = std::move(key);
  if (save_key != save_key_ || dirty_) {
    save_key_ = std::move(save_key);
    SaveLocked(now);
  }
  return changed;
}

std::string HealthMonitor::FindingsKeyLocked(MemoryClock now, std::string* save_key) const {
  std::string key;
  save_key->clear();
  for (const v1::Finding& f : memory_.Findings(now)) {
    const std::string line = absl::StrCat(f.severity(), "\t", f.check(), "\t", f.code(), "\t",
                                          f.subject(), "\t", f.message(), "\n");
    key += line;
    absl::StrAppend(save_key, line, f.cleared(), " ", f.occurrences(), " ", f.dry_run(), "\n");
  }
  return key;
}

void HealthMonitor::SaveLocked(MemoryClock /*now*/) {
  if (options_.state_file.empty()) return;
  const std::filesystem::path file(options_.state_file);
  std::string bytes;
  if (!memory_.Save(options_.boot_id).SerializeToString(&bytes)) {
    Log(LogLevel::kWarning, "health memory: cannot serialize the state");
    return;
  }
  absl::StatusOr<bool> wrote =
      ReplaceFileIfChanged(file.parent_path().string(), file.filename().string(), bytes, 0600);
  if (!wrote.ok()) {
    // Kept dirty: the next poll tries again.
    Log(LogLevel::kWarning, "health memory: ", wrote.status().ToString());
    dirty_ = true;
    return;
  }
  dirty_ = false;
}

void HealthMonitor::Findings(absl::Time /*now*/, std::vector<v1::Finding>* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (v1::Finding& f : memory_.Findings(clock_())) out->push_back(std::move(f));
}

absl::Duration HealthMonitor::interval() const {
  std::lock_guard<std::mutex> lock(mu_);
  const double s = options_.config.poll_interval_s();
  return s > 0 ? absl::Seconds(s) : absl::Seconds(10);
}

HealthMonitor::Stats HealthMonitor::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace fabric
