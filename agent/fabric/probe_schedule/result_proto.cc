#include "agent/fabric/probe_schedule/result_proto.h"

#include "absl/strings/str_cat.h"

namespace fabric::probes {
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
  out.set_memory(r.memory);
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
  out.memory = r.memory();
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

}  // namespace fabric::probes
