#include "agent/fabric/probes/schedule.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/common/strings.h"
#include "agent/fabric/probes/probe.h"
#include "agent/fabric/probes/wire.h"
#include "agent/policy/select/config.h"
#include "agent/policy/select/select.h"

namespace fabric::probes {
namespace {

constexpr uint32_t kDefaultIntervalSeconds = 300;
constexpr double kDefaultJitter = 0.1;
constexpr uint32_t kDefaultTimeoutSeconds = 10;
// A background schedule must not hog the fabric: perftest's 5000 x 64 KiB is 20 s at 0.1 Gb/s.
constexpr uint64_t kScheduledBwIterations = 1000;

absl::Status Bad(std::string_view key, std::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("probes.", Av(key), ": ", Av(why)));
}

bool ValidHostChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '-' || c == '_' || c == ':' || c == '%';
}

}  // namespace

absl::StatusOr<Peer> ParsePeer(std::string_view text, uint16_t default_port) {
  Peer p;
  p.name = std::string(text);
  p.port = default_port;
  std::string_view host = text;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("peer \"", Av(text), "\": no closing ]"));
    }
    host = text.substr(1, close - 1);
    std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') {
        return absl::InvalidArgumentError(
            absl::StrCat("peer \"", Av(text), "\": expected :PORT after ]"));
      }
      port = rest.substr(1);
      if (port.empty()) {
        return absl::InvalidArgumentError(absl::StrCat("peer \"", Av(text), "\": empty port"));
      }
    }
  } else if (std::count(text.begin(), text.end(), ':') == 1) {
    const size_t colon = text.find(':');
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (port.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("peer \"", Av(text), "\": empty port"));
    }
  }
  // More than one colon without brackets: a bare IPv6 address.
  if (host.empty() || host.size() > 253) {
    return absl::InvalidArgumentError(absl::StrCat("peer \"", Av(text), "\": no host"));
  }
  if (!std::all_of(host.begin(), host.end(), ValidHostChar)) {
    return absl::InvalidArgumentError(
        absl::StrCat("peer \"", Av(text), "\": not a host name or address"));
  }
  if (!port.empty()) {
    uint32_t n = 0;
    if (!absl::SimpleAtoi(Av(port), &n) || n < 1 || n > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("peer \"", Av(text), "\": port must be 1..65535"));
    }
    p.port = static_cast<uint16_t>(n);
  }
  p.host = std::string(host);
  return p;
}

bool ScheduleEnabled(const v1::ProbeSchedule& s) {
  return s.peers_size() > 0 || !s.peer_dns().empty();
}

uint16_t PeerPort(const v1::ProbeSchedule& s) {
  return s.port() == 0 ? kDefaultPort : static_cast<uint16_t>(s.port());
}

absl::Duration Interval(const v1::ProbeSchedule& s) {
  return absl::Seconds(s.interval_seconds() == 0 ? kDefaultIntervalSeconds : s.interval_seconds());
}

double Jitter(const v1::ProbeSchedule& s) { return s.has_jitter() ? s.jitter() : kDefaultJitter; }

absl::Duration StepTimeout(const v1::ProbeSchedule& s) {
  return absl::Seconds(s.timeout_seconds() == 0 ? kDefaultTimeoutSeconds : s.timeout_seconds());
}

uint32_t HistorySize(const v1::ProbeSchedule& s) {
  return s.history() == 0 ? kDefaultHistory : s.history();
}

std::vector<TestKind> Tests(const v1::ProbeSchedule& s) {
  std::vector<TestKind> out;
  for (const std::string& t : s.tests()) {
    if (std::optional<TestKind> k = ParseTestName(t)) out.push_back(*k);
  }
  if (s.tests().empty()) out = {TestKind::kWriteBw, TestKind::kWriteLat};
  return out;
}

ProbeParams ScheduledParams(const v1::ProbeSchedule& s, TestKind test, Transport transport) {
  ProbeParams p = DefaultParams(test);
  if (!IsLatency(test)) p.iterations = kScheduledBwIterations;
  if (s.size() > 0) p.size = s.size();
  if (s.iterations() > 0) p.iterations = s.iterations();
  if (s.duration_seconds() > 0) {
    p.duration = absl::Seconds(s.duration_seconds());
    p.iterations = 0;
  }
  p.transport = transport;
  p.rdma_cm = s.rdma_cm() && transport == Transport::kRdma;
  // Inline data cannot exceed the message (perftest lowers it the same way).
  if (p.inline_size > p.size) p.inline_size = static_cast<uint32_t>(p.size);
  return p;
}

absl::Status ValidateSchedule(const v1::ProbeSchedule& s) {
  for (int i = 0; i < s.peers_size(); ++i) {
    absl::StatusOr<Peer> p = ParsePeer(s.peers(i), kDefaultPort);
    if (!p.ok()) return Bad(absl::StrCat("peers[", i, "]"), Sv(p.status().message()));
  }
  if (!s.peer_dns().empty()) {
    absl::StatusOr<Peer> p = ParsePeer(s.peer_dns(), kDefaultPort);
    if (!p.ok() || p->host != s.peer_dns()) {
      return Bad("peerDns", absl::StrCat("\"", s.peer_dns(), "\" is not a DNS name"));
    }
  }
  if (s.port() > 65535) return Bad("port", "must be 1..65535");
  for (int i = 0; i < s.tests_size(); ++i) {
    if (!ParseTestName(s.tests(i))) {
      return Bad(absl::StrCat("tests[", i, "]"),
                 absl::StrCat("unknown test \"", s.tests(i),
                              "\" (write_bw, write_lat, send_bw, send_lat, read_bw, read_lat)"));
    }
  }
  if (s.interval_seconds() > 7 * 24 * 3600) return Bad("intervalSeconds", "at most a week");
  if (s.has_jitter() && !(s.jitter() >= 0 && s.jitter() <= 0.9)) {
    return Bad("jitter", "must be within 0..0.9");
  }
  for (int i = 0; i < s.devices_size(); ++i) {
    if (!wire::IsValidDeviceName(s.devices(i))) {
      return Bad(absl::StrCat("devices[", i, "]"), "not an RDMA device name");
    }
  }
  if (s.has_remote_device() && !s.remote_device().empty() && s.remote_device() != "same" &&
      s.remote_device() != "any" && !wire::IsValidDeviceName(s.remote_device())) {
    return Bad("remoteDevice", "\"same\", \"any\" or an RDMA device name");
  }
  if (s.iterations() > 0 && s.duration_seconds() > 0) {
    return Bad("iterations", "iterations and durationSeconds exclude each other");
  }
  if (s.timeout_seconds() > 300) return Bad("timeoutSeconds", "at most 300");
  if (!(s.degraded_fraction() >= 0 && s.degraded_fraction() <= 1)) {
    return Bad("degradedFraction", "must be within 0..1");
  }
  if (s.history() > kMaxHistory) return Bad("history", absl::StrCat("at most ", kMaxHistory));
  for (TestKind t : Tests(s)) {
    for (Transport tr : {Transport::kRdma, Transport::kTcp}) {
      if (absl::Status v = ValidateParams(ScheduledParams(s, t, tr)); !v.ok()) {
        return Bad(TestName(t), Sv(v.message()));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::AgentConfig> LoadAgentConfig(const std::string& path) {
  absl::StatusOr<v1::AgentConfig> config = LoadConfig(path);
  if (!config.ok()) return config.status();
  if (absl::Status s = ValidateSchedule(config->probes()); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", s.message()));
  }
  return config;
}

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

std::string RemoteDevice(const v1::ProbeSchedule& s, const std::string& local_device) {
  if (!s.has_remote_device() || s.remote_device() == "same") return local_device;
  if (s.remote_device() == "any") return "";
  return s.remote_device();
}

namespace {

void SetParams(const ProbeParams& p, v1::ProbeResult* out) {
  out->set_test(std::string(TestName(p.test)));
  out->set_transport(std::string(TransportName(p.transport)));
  out->set_rdma_cm(p.rdma_cm);
  out->set_bytes(p.size);
  out->set_duration_seconds(absl::ToDoubleSeconds(p.duration));
}

}  // namespace

v1::ProbeResult ResultProto(const ProbeResult& r) {
  v1::ProbeResult out;
  SetParams(r.params, &out);
  out.set_ok(true);
  out.set_peer_address(r.peer);
  out.set_device(r.device);
  out.set_port(r.ib_port);
  if (r.gid_index >= 0 && r.params.transport == Transport::kRdma) out.set_gid_index(r.gid_index);
  out.set_iterations(r.iterations);
  out.set_clock(r.clock);
  out.set_teardown_error(r.teardown_error);
  if (r.bw) {
    if (r.bw->peak_gbps) out.set_bw_peak_gbps(*r.bw->peak_gbps);
    out.set_bw_avg_gbps(r.bw->avg_gbps);
    out.set_msg_rate_mpps(r.bw->msg_rate_mpps);
  }
  if (r.lat) {
    out.set_t_min_us(r.lat->min_us);
    out.set_t_max_us(r.lat->max_us);
    out.set_t_typical_us(r.lat->typical_us);
    out.set_t_avg_us(r.lat->avg_us);
    out.set_t_stdev_us(r.lat->stdev_us);
    out.set_p99_us(r.lat->p99_us);
    out.set_p999_us(r.lat->p999_us);
  }
  return out;
}

v1::ProbeResult FailedResultProto(const ProbeParams& p, const absl::Status& error) {
  v1::ProbeResult out;
  SetParams(p, &out);
  out.set_ok(false);
  out.set_error_code(absl::StatusCodeToString(error.code()));
  out.set_error(std::string(error.message()));
  return out;
}

ProbeResult ResultFromProto(const v1::ProbeResult& r) {
  ProbeResult out;
  out.params = DefaultParams(ParseTestName(r.test()).value_or(TestKind::kWriteBw));
  out.params.transport = r.transport() == "tcp" ? Transport::kTcp : Transport::kRdma;
  out.params.rdma_cm = r.rdma_cm();
  out.params.size = r.bytes();
  if (r.duration_seconds() > 0) {
    out.params.duration = absl::Seconds(r.duration_seconds());
    out.params.iterations = 0;
  } else {
    out.params.iterations = r.iterations();
  }
  out.device = r.device();
  out.ib_port = static_cast<uint8_t>(r.port());
  out.gid_index = r.has_gid_index() ? static_cast<int>(r.gid_index()) : -1;
  out.peer = r.peer_address();
  out.iterations = r.iterations();
  out.clock = r.clock();
  out.teardown_error = r.teardown_error();
  if (r.has_bw_avg_gbps()) {
    BandwidthResult bw;
    if (r.has_bw_peak_gbps()) bw.peak_gbps = r.bw_peak_gbps();
    bw.avg_gbps = r.bw_avg_gbps();
    bw.msg_rate_mpps = r.msg_rate_mpps();
    out.bw = bw;
  }
  if (r.has_t_typical_us()) {
    LatencyResult lat;
    lat.samples = r.iterations();
    lat.min_us = r.t_min_us();
    lat.max_us = r.t_max_us();
    lat.typical_us = r.t_typical_us();
    lat.avg_us = r.t_avg_us();
    lat.stdev_us = r.t_stdev_us();
    lat.p99_us = r.p99_us();
    lat.p999_us = r.p999_us();
    out.lat = lat;
  }
  return out;
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
                                                 std::string_view test, uint32_t limit) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<v1::ProbeResult> out;
  for (const v1::ProbeResult& r : results_) {
    if (!peer.empty() && r.peer() != peer) continue;
    if (!device.empty() && r.device() != device) continue;
    if (!test.empty() && r.test() != test) continue;
    out.push_back(r);
    if (limit > 0 && out.size() >= limit) break;
  }
  return out;
}

}  // namespace fabric::probes
