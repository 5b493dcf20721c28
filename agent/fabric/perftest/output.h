// perftest's report, byte for byte (6.29's formats: perftest_parameters.h RESULT_FMT*,
// REPORT_FMT*, and the --out_json file of write_test_info_to_file and the report writers), so
// that scripts that parse ib_write_bw's table or JSON read ours unchanged.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "agent/fabric/perftest/figures.h"
#include "agent/fabric/perftest/wire.h"

namespace fabric::perftest {

// --output: only the one figure, "%lf\n".
enum class Output { kFull, kBandwidth, kMessageRate, kLatency };

inline constexpr char kResultLine[] =
    "---------------------------------------------------------------------------------------\n";

std::string BwHeader(bool gbits);
// `digits_of`: the average that decides perftest's extra digits for tiny rates in Gb/s (with -b,
// this end's own before the sum, as perftest); unset: r.average.
std::string BwLine(const BwReport& r, bool gbits, Output output,
                   std::optional<double> digits_of = std::nullopt);
std::string LatHeader(bool duration);
std::string LatLine(const LatFigures& f, Output output);
std::string LatDurationLine(const LatDurationFigures& f, Output output);

// What --out_json's "test_info" says of the run.
struct TestInfo {
  int32_t verb = kVerbWrite;
  bool bandwidth = true;
  bool duplex = false;
  std::string device;
  int num_of_qps = 1;
  std::string transport = "IB";  // transport_str: IB for RDMA devices, iWARP ...
  bool client = true;            // TX_depth is shown on the sending side
  int tx_depth = 128;
  std::optional<int> rx_depth;  // receive side of send tests
  int cq_mod = 1;
  int mtu_bytes = 1024;
  std::string link_type = "Ethernet";  // link_layer_str: IB, Ethernet
  std::optional<int> gid_index;
  int inline_size = 0;
  int out_reads = 0;
  bool rdma_cm = false;
  std::optional<int> cuda_device;
  bool rocm = false;
  std::optional<int> tos;
};

// The whole file (6.20+ form: valid JSON).
std::string BwJson(const TestInfo& info, const BwReport& r, bool gbits, Output output,
                   std::optional<double> digits_of = std::nullopt);
std::string LatJson(const TestInfo& info, const LatFigures& f, Output output);
std::string LatDurationJson(const TestInfo& info, const LatDurationFigures& f, Output output);

}  // namespace fabric::perftest
