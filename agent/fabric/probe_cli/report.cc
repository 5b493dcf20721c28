#include "agent/fabric/probe_cli/report.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace fabric::probes {
namespace {

constexpr std::string_view kLine =
    "---------------------------------------------------------------------------------------\n";

std::string Title(TestKind t) {
  switch (t) {
    case TestKind::kWriteBw:
      return "RDMA_Write BW Test";
    case TestKind::kWriteLat:
      return "RDMA_Write Latency Test";
    case TestKind::kSendBw:
      return "Send BW Test";
    case TestKind::kSendLat:
      return "Send Latency Test";
    case TestKind::kReadBw:
      return "RDMA_Read BW Test";
    case TestKind::kReadLat:
      return "RDMA_Read Latency Test";
  }
  return "?";
}

}  // namespace

std::string FormatTable(const ProbeResult& r) {
  const ProbeParams& p = r.params;
  const bool tcp = p.transport == Transport::kTcp;
  std::string out(kLine);
  absl::StrAppend(&out, "                    ", Title(p.test),
                  tcp ? "  (over TCP: not an RDMA figure)" : "", "\n");
  auto row = [&](std::string_view k1, const std::string& v1, std::string_view k2,
                 const std::string& v2) {
    absl::StrAppend(&out, absl::StrFormat(" %-15s: %-16s %-15s: %s\n", k1, v1, k2, v2));
  };
  row("Transport", tcp ? "tcp" : "rdma (RC)", "Connection",
      tcp ? "tcp" : (p.rdma_cm ? "rdma_cm" : "TCP exchange"));
  if (!tcp) {
    row("Device", r.device, "ib port", absl::StrCat(r.ib_port));
    row("GID index", r.gid_index < 0 ? "rdma_cm" : absl::StrCat(r.gid_index), "Number of qps",
        absl::StrCat(p.num_qps));
    row("TX depth", absl::StrCat(p.tx_depth), "CQ moderation", absl::StrCat(p.cq_mod));
    row("Inline", absl::StrCat(p.inline_size), "Post list", absl::StrCat(p.post_list));
  }
  row("Peer", r.peer, "Clock", r.clock);
  if (!r.memory.empty()) absl::StrAppend(&out, absl::StrFormat(" %-15s: %s\n", "Memory", r.memory));
  if (p.duration_mode()) {
    row("Duration", absl::StrCat(absl::FormatDuration(p.duration)), "Warm-up margin",
        absl::FormatDuration(p.margin));
  }
  out += kLine;
  if (r.bw) {
    absl::StrAppend(&out,
                    " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   "
                    "MsgRate[Mpps]\n");
    absl::StrAppend(
        &out, absl::StrFormat(
                  " %-10d %-14d %-18s %-20.2f %.6f\n", p.size, r.iterations,
                  r.bw->peak_gbps ? absl::StrFormat("%.2f", *r.bw->peak_gbps) : std::string("-"),
                  r.bw->avg_gbps, r.bw->msg_rate_mpps));
  }
  if (r.lat) {
    absl::StrAppend(
        &out,
        " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    "
        "t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]\n");
    absl::StrAppend(
        &out, absl::StrFormat(" %-6d %-14d %-14.2f %-12.2f %-18.2f %-14.2f %-15.2f "
                              "%-22.2f %.2f\n",
                              p.size, r.iterations, r.lat->min_us, r.lat->max_us, r.lat->typical_us,
                              r.lat->avg_us, r.lat->stdev_us, r.lat->p99_us, r.lat->p999_us));
  }
  out += kLine;
  if (!r.teardown_error.empty()) {
    absl::StrAppend(&out, " warning: releasing RDMA resources: ", r.teardown_error, "\n");
  }
  return out;
}

std::string FormatJson(const ProbeResult& r) {
  nlohmann::ordered_json j;
  j["test"] = std::string(TestName(r.params.test));
  if (r.params.transport == Transport::kRdma) j["device"] = r.device;
  j["bytes"] = r.params.size;
  j["iterations"] = r.iterations;
  j["transport"] = std::string(TransportName(r.params.transport));
  if (r.bw) {
    if (r.bw->peak_gbps) j["bw_peak_gbps"] = *r.bw->peak_gbps;
    j["bw_avg_gbps"] = r.bw->avg_gbps;
    j["msg_rate_mpps"] = r.bw->msg_rate_mpps;
  }
  if (r.lat) {
    j["t_min_us"] = r.lat->min_us;
    j["t_max_us"] = r.lat->max_us;
    j["t_typical_us"] = r.lat->typical_us;
    j["t_avg_us"] = r.lat->avg_us;
    j["t_stdev_us"] = r.lat->stdev_us;
    j["p99_us"] = r.lat->p99_us;
    j["p999_us"] = r.lat->p999_us;
  }
  j["clock"] = r.clock;
  if (!r.memory.empty()) j["memory"] = r.memory;
  if (!r.teardown_error.empty()) j["teardown_error"] = r.teardown_error;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace fabric::probes
