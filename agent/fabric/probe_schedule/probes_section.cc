#include "agent/fabric/probe_schedule/probes_section.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "agent/common/strings.h"
#include "agent/fabric/probes/probe.h"
#include "agent/fabric/probes/wire.h"

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
  if (text.starts_with(kPerftestPeerPrefix)) {
    p.perftest = true;
    text.remove_prefix(kPerftestPeerPrefix.size());
  }
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
  for (int i = 0; i < s.peers_size(); ++i) {
    // A stock perftest server measures latency by iterations only (as fabric-probe --perftest).
    if (s.peers(i).starts_with(kPerftestPeerPrefix) && s.duration_seconds() > 0) {
      for (int t = 0; t < s.tests_size(); ++t) {
        if (s.tests(t).ends_with("_lat")) {
          return Bad(absl::StrCat("peers[", i, "]"),
                     "a perftest peer's latency tests run by iterations, not durationSeconds");
        }
      }
    }
  }
  if (!s.peer_dns().empty()) {
    absl::StatusOr<Peer> p = ParsePeer(s.peer_dns(), kDefaultPort);
    if (!p.ok() || p->host != s.peer_dns() || p->perftest) {
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
  if (!s.memory().empty() && s.memory() != "host" && s.memory() != kMemoryGpuDmabuf &&
      s.memory() != kMemoryGpuPeermem) {
    return Bad("memory", absl::StrCat("\"", s.memory(), "\": host, ", Av(kMemoryGpuDmabuf), " or ",
                                      Av(kMemoryGpuPeermem)));
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

}  // namespace fabric::probes
