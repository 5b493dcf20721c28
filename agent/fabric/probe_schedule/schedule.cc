#include "agent/fabric/probe_schedule/schedule.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "agent/common/strings.h"
#include "agent/fabric/probe_schedule/probes_section.h"
#include "agent/fabric/probes/probe.h"
#include "agent/fabric/probes/wire.h"
#include "agent/inventory/query/host_query.h"
#include "agent/policy/select/pairing.h"

namespace fabric::probes {

absl::Duration NextRoundDelay(const v1::ProbeSchedule& s, double u) {
  const double factor = 1 + (2 * std::clamp(u, 0.0, 1.0) - 1) * Jitter(s);
  return std::max(absl::Milliseconds(100), Interval(s) * factor);
}

std::vector<ProbeSource> ProbeSources(const v1::Host& host, const v1::SelectionPolicy& policy,
                                      const v1::ProbeSchedule& s) {
  std::vector<ProbeSource> out;
  if (host.rdma_devices().empty()) return {ProbeSource{}};
  if (!s.devices().empty()) {
    for (const std::string& name : s.devices()) {
      ProbeSource src{name, 1};
      for (const v1::RdmaDevice& d : host.rdma_devices()) {
        if (d.name() != name) continue;
        for (const v1::Port& p : d.ports()) {
          if (p.state() == v1::PORT_STATE_ACTIVE) {
            src.port = p.number();
            break;
          }
        }
      }
      out.push_back(src);
    }
    return out;
  }
  std::set<std::string> seen;
  for (const BackendPort& bp : BackendPorts(host, policy)) {
    if (seen.insert(bp.device->name()).second)
      out.push_back({bp.device->name(), bp.port->number()});
  }
  return out;
}

std::optional<gpumem::GpuRequest> ScheduledGpu(const v1::Host& host,
                                               const v1::SelectionPolicy& policy,
                                               const v1::ProbeSchedule& s,
                                               const std::string& device, TestKind test,
                                               Transport transport, std::string* why) {
  why->clear();
  const bool dmabuf = s.memory() == kMemoryGpuDmabuf;
  if (!dmabuf && s.memory() != kMemoryGpuPeermem) return std::nullopt;
  if (IsLatency(test)) return std::nullopt;
  if (transport != Transport::kRdma || device.empty()) {
    *why = "no RDMA device: the test runs over TCP";
    return std::nullopt;
  }
  const v1::GpuPairing pairing = PairingOf(host, policy);
  for (const v1::GpuPair& pair : pairing.pairs()) {
    if (pair.rdma_device() != device) continue;
    const v1::Accelerator* gpu = nullptr;
    for (const v1::Accelerator& a : host.accelerators()) {
      if (a.pci_address() == pair.gpu()) gpu = &a;
    }
    if (gpu == nullptr) break;
    gpumem::GpuRequest r;
    if (gpu->vendor() == v1::ACCELERATOR_VENDOR_NVIDIA) {
      r.vendor = gpumem::GpuVendor::kCuda;
    } else if (gpu->vendor() == v1::ACCELERATOR_VENDOR_AMD) {
      r.vendor = gpumem::GpuVendor::kRocm;
    } else {
      *why = absl::StrCat(device, "'s GPU ", pair.gpu(), " (", gpu->vendor_name(),
                          ") has no GPU memory path here (CUDA and ROCm only)");
      return std::nullopt;
    }
    // The PCI address, not an index: CUDA_VISIBLE_DEVICES or a container's view cannot make it
    // name another GPU.
    r.device = pair.gpu();
    r.dmabuf = dmabuf;
    // A failure is explained from the host's /proc and /sys: the DaemonSet's /host/sys gives
    // /host.
    const std::string root(absl::StripSuffix(host.sysfs_root(), "/sys"));
    r.host_root = root.empty() ? "/" : root;
    return r;
  }
  *why = absl::StrCat("no GPU is paired with ", device);
  return std::nullopt;
}

std::string RemoteDevice(const v1::ProbeSchedule& s, const std::string& local_device) {
  if (!s.has_remote_device() || s.remote_device() == "same") return local_device;
  if (s.remote_device() == "any") return "";
  return s.remote_device();
}

void RateShare(const v1::Host& host, double degraded_fraction, v1::ProbeResult* r) {
  if (!r->ok() || r->transport() != "rdma" || !r->has_bw_avg_gbps()) return;
  for (const v1::RdmaDevice& d : host.rdma_devices()) {
    if (d.name() != r->device()) continue;
    for (const v1::Port& p : d.ports()) {
      if (p.number() != r->port() || !p.has_rate_gbps() || !(p.rate_gbps() > 0)) continue;
      r->set_port_rate_gbps(p.rate_gbps());
      r->set_fraction_of_rate(r->bw_avg_gbps() / p.rate_gbps());
      r->set_degraded(degraded_fraction > 0 && r->fraction_of_rate() < degraded_fraction);
    }
  }
}

std::vector<v1::Finding> DegradedFindings(const std::vector<v1::ProbeResult>& newest_first) {
  std::set<std::tuple<std::string, uint32_t, std::string, std::string>> seen;
  std::map<std::string, std::vector<const v1::ProbeResult*>> degraded;  // By "dev:port".
  for (const v1::ProbeResult& r : newest_first) {
    if (!r.ok() || !r.has_fraction_of_rate()) continue;
    if (!seen.insert({r.device(), r.port(), r.peer(), r.test()}).second) continue;
    if (r.degraded()) degraded[absl::StrCat(r.device(), ":", r.port())].push_back(&r);
  }
  std::vector<v1::Finding> out;
  for (const auto& [port, results] : degraded) {
    const v1::ProbeResult& r = *results.front();
    v1::Finding f;
    f.set_severity(v1::SEVERITY_WARNING);
    f.set_check("probe");
    f.set_subject(port);
    f.set_message(absl::StrCat(
        r.test(), " to ", r.peer(), ": ", absl::StrFormat("%.3g", r.bw_avg_gbps()), " Gb/s, ",
        absl::StrFormat("%.0f", 100 * r.fraction_of_rate()), "% of the port's ",
        absl::StrFormat("%g", r.port_rate_gbps()), " Gb/s",
        results.size() > 1 ? absl::StrCat(" (", results.size(), " peers or tests below)") : ""));
    out.push_back(std::move(f));
  }
  return out;
}

v1::ProbeResult ResultHistory::Add(v1::ProbeResult r) {
  std::lock_guard<std::mutex> lock(mu_);
  r.set_id(next_id_++);
  results_.push_front(r);
  while (results_.size() > capacity_) results_.pop_back();
  return r;
}

void ResultHistory::SetCapacity(uint32_t capacity) {
  std::lock_guard<std::mutex> lock(mu_);
  capacity_ = std::max<uint32_t>(capacity, 1);
  while (results_.size() > capacity_) results_.pop_back();
}

std::vector<v1::ProbeResult> ResultHistory::List(std::string_view peer, std::string_view device,
                                                 std::string_view test, uint32_t limit,
                                                 uint32_t port) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<v1::ProbeResult> out;
  for (const v1::ProbeResult& r : results_) {
    if (!peer.empty() && r.peer() != peer) continue;
    if (!device.empty() && r.device() != device) continue;
    if (port != 0 && r.port() != port) continue;
    if (!test.empty() && r.test() != test) continue;
    out.push_back(r);
    if (limit > 0 && out.size() >= limit) break;
  }
  return out;
}

}  // namespace fabric::probes
