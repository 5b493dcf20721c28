#include "agent/fabric/perftest/output.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace fabric::perftest {
namespace {

// ib_write_bw's names of the verbs (testsStr).
const char* VerbName(int32_t verb) {
  switch (verb) {
    case kVerbSend:
      return "Send";
    case kVerbRead:
      return "RDMA_Read";
    default:
      return "RDMA_Write";
  }
}

std::string Figure(double v) { return absl::StrFormat("%f\n", v); }

std::string TestInfoJson(const TestInfo& i) {
  std::string out = "\"test_info\": {\n";
  absl::StrAppend(&out, "\"test\": \"", VerbName(i.verb), "_",
                  i.bandwidth ? (i.duplex ? "Bidirectional_BW_" : "BW_") : "Latency_", "Test\",\n");
  absl::StrAppendFormat(&out, "\"Dual_port\": \"OFF\",\n\"Device\": \"%s\",\n", i.device);
  absl::StrAppendFormat(&out, "\"Number_of_qps\": %d,\n\"Transport_type\": \"%s\",\n", i.num_of_qps,
                        i.transport);
  absl::StrAppend(&out, "\"Connection_type\": \"RC\",\n\"Using_SRQ\": \"OFF\",\n");
  // Our memory regions ask for no relaxed ordering, and we post with ibv_post_send.
  absl::StrAppend(&out, "\"PCIe_relax_order\": \"OFF\",\n\"ibv_wr_API\": \"OFF\",\n");
  if (i.client || i.duplex) absl::StrAppendFormat(&out, "\"TX_depth\": %d,\n", i.tx_depth);
  if (i.rx_depth) absl::StrAppendFormat(&out, "\"RX_depth\": %d,\n", *i.rx_depth);
  if (i.bandwidth) absl::StrAppendFormat(&out, "\"CQ_Moderation\": %d,\n", i.cq_mod);
  absl::StrAppendFormat(&out, "\"Mtu\": %d,\n\"Link_type\": \"%s\",\n", i.mtu_bytes, i.link_type);
  if (i.gid_index) absl::StrAppendFormat(&out, "\"GID_index\": %d,\n", *i.gid_index);
  if (i.verb == kVerbRead) {
    absl::StrAppendFormat(&out, "\"Outstand_reads\": %d,\n", i.out_reads);
  } else {
    absl::StrAppendFormat(&out, "\"Max_inline_data\": %d,\n", i.inline_size);
  }
  absl::StrAppendFormat(&out, "\"rdma_cm_QPs\": \"%s\",\n", i.rdma_cm ? "ON" : "OFF");
  if (i.cuda_device) absl::StrAppendFormat(&out, "\"cuda_device\": %d,\n", *i.cuda_device);
  absl::StrAppendFormat(&out, "\"Use_ROCm_memory\": \"%s\",\n", i.rocm ? "ON" : "OFF");
  absl::StrAppendFormat(&out, "\"Data_ex_method\": \"%s\"", i.rdma_cm ? "rdma_cm" : "Ethernet");
  if (i.rdma_cm && i.tos) absl::StrAppendFormat(&out, ",\n\"TOS\": %d", *i.tos);
  absl::StrAppend(&out, "\n},\n");
  return out;
}

std::string File(const TestInfo& info, const std::string& results) {
  return absl::StrCat("{\n", TestInfoJson(info), "\"results\": {\n", results, "}\n}\n");
}

}  // namespace

std::string BwHeader(bool gbits) {
  return gbits ? " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   "
                 "MsgRate[Mpps]\n"
               : " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   "
                 "MsgRate[Mpps]\n";
}

std::string BwLine(const BwReport& r, bool gbits, Output output, std::optional<double> digits_of) {
  if (output == Output::kBandwidth) return Figure(r.average);
  if (output == Output::kMessageRate) return Figure(r.msg_rate);
  if (gbits && digits_of.value_or(r.average) < 0.1) {  // perftest's extra digits for tiny rates
    return absl::StrFormat(" %-7u    %u           %-7.6f            %-7.6f            %-7.6f\n",
                           r.size, r.iters, r.peak, r.average, r.msg_rate);
  }
  return absl::StrFormat(" %-7u    %-10u       %-7.2f            %-7.2f\t\t     %-7.6f\n", r.size,
                         r.iters, r.peak, r.average, r.msg_rate);
}

std::string LatHeader(bool duration) {
  return duration ? " #bytes        #iterations       t_avg[usec]    tps average\n"
                  : " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    "
                    "t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% "
                    "percentile[usec] \n";
}

std::string LatLine(const LatFigures& f, Output output) {
  if (output == Output::kLatency) return Figure(f.average);
  return absl::StrFormat(
      " %-7u %u          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f "
      "\t\t%-7.2f\n",
      f.size, f.iters, f.t_min, f.t_max, f.typical, f.average, f.stdev, f.p99, f.p999);
}

std::string LatDurationLine(const LatDurationFigures& f, Output output) {
  if (output == Output::kLatency) return Figure(f.average);
  return absl::StrFormat(" %-7u       %u            %-7.2f        %-7.2f\n", f.size, f.iters,
                         f.average, f.tps);
}

std::string BwJson(const TestInfo& info, const BwReport& r, bool gbits, Output output,
                   std::optional<double> digits_of) {
  // With --output perftest leaves a trailing comma (invalid JSON); ours has none.
  if (output == Output::kBandwidth)
    return File(info, absl::StrFormat("\"bw_avg\": %f\n", r.average));
  if (output == Output::kMessageRate) {
    return File(info, absl::StrFormat("\"msgRate_avg\": %f\n", r.msg_rate));
  }
  const std::string head =
      absl::StrFormat("\"MsgSize\": %u,\n\"n_iterations\": %u,\n", r.size, r.iters);
  if (gbits && digits_of.value_or(r.average) < 0.1) {
    return File(info, head + absl::StrFormat("\"BW_peak\": %.6f,\n\"BW_average\": %.6f,\n"
                                             "\"MsgRate\": %.6f\n",
                                             r.peak, r.average, r.msg_rate));
  }
  return File(info, head + absl::StrFormat("\"BW_peak\": %.2f,\n\"BW_average\": %.2f,\n"
                                           "\"MsgRate\": %.6f\n",
                                           r.peak, r.average, r.msg_rate));
}

std::string LatJson(const TestInfo& info, const LatFigures& f, Output output) {
  if (output == Output::kLatency)
    return File(info, absl::StrFormat("\"avg_lat\": %f\n", f.average));
  return File(info, absl::StrFormat("\"MsgSize\": %u,\n\"n_iterations\": %u,\n\"t_min\": %.2f,\n"
                                    "\"t_max\": %.2f,\n\"t_typical\": %.2f,\n\"t_avg\": %.2f,\n"
                                    "\"t_stdev\": %.2f,\n\"percentile_99\": %.2f,\n"
                                    "\"percentile_99.9\": %.2f\n",
                                    f.size, f.iters, f.t_min, f.t_max, f.typical, f.average,
                                    f.stdev, f.p99, f.p999));
}

std::string LatDurationJson(const TestInfo& info, const LatDurationFigures& f, Output output) {
  if (output == Output::kLatency) return File(info, absl::StrFormat("\"t_avg\": %f\n", f.average));
  return File(info, absl::StrFormat("\"MsgSize\": %u,\n\"n_iterations\": %u,\n\"t_avg\": %.2f,\n"
                                    "\"tps_average\": %.2f\n",
                                    f.size, f.iters, f.average, f.tps));
}

}  // namespace fabric::perftest
