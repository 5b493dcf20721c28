#include "agent/fabric/perftest/output.h"

#include <gtest/gtest.h>

#include <cinttypes>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

namespace fabric::perftest {
namespace {

// perftest 6.29's format strings (perftest_parameters.h), printed with the C library as perftest
// prints them.
#define REPORT_FMT " %-7lu    %-10" PRIu64 "       %-7.2lf            %-7.2lf\t\t     %-7.6lf"
#define REPORT_FMT_EXT \
  " %-7lu    %" PRIu64 "           %-7.6lf            %-7.6lf            %-7.6lf"
#define REPORT_FMT_LAT                                                           \
  " %-7lu %" PRIu64                                                              \
  "          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t" \
  "%-7.2f \t\t%-7.2f"
#define REPORT_FMT_LAT_DUR " %-7lu       %" PRIu64 "            %-7.2f        %-7.2f"

// A literal format, so the compiler checks the arguments.
#define C(...) Printed([&](char* buf, size_t n) { std::snprintf(buf, n, __VA_ARGS__); })

template <typename F>
std::string Printed(F print) {
  char buf[512];
  print(buf, sizeof buf);
  return buf;
}

TEST(PerftestOutput, BwLineAsPerftestPrintsIt) {
  for (const BwReport& r : {BwReport{65536, 5000, 11000.12, 10990.55, 0.175849},
                            BwReport{2, 1000, 0.5, 0.25, 1.5}, BwReport{8388608, 20, 0, 0, 0}}) {
    EXPECT_EQ(BwLine(r, false, Output::kFull),
              C(REPORT_FMT "\n", static_cast<unsigned long>(r.size), r.iters, r.peak, r.average,
                r.msg_rate));
  }
  const BwReport tiny{2, 1000, 0.05, 0.01, 0.625};  // Gb/s below 0.1: six digits
  EXPECT_EQ(BwLine(tiny, true, Output::kFull),
            C(REPORT_FMT_EXT "\n", static_cast<unsigned long>(tiny.size), tiny.iters, tiny.peak,
              tiny.average, tiny.msg_rate));
  // -b: the sum is printed, this end's own average picks the digits (perftest decides before it
  // adds the peer's report).
  const BwReport sum{2, 1000, 0.3, 0.15, 1.25};
  EXPECT_EQ(BwLine(sum, true, Output::kFull, 0.07),
            C(REPORT_FMT_EXT "\n", 2ul, sum.iters, sum.peak, sum.average, sum.msg_rate));
  EXPECT_EQ(BwLine(sum, true, Output::kFull, 0.11),
            C(REPORT_FMT "\n", 2ul, sum.iters, sum.peak, sum.average, sum.msg_rate));
  EXPECT_EQ(BwLine(tiny, false, Output::kBandwidth), "0.010000\n");
  EXPECT_EQ(BwLine(tiny, false, Output::kMessageRate), "0.625000\n");
  EXPECT_EQ(BwHeader(true),
            " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n");
}

TEST(PerftestOutput, LatLinesAsPerftestPrintsThem) {
  const LatFigures f{2, 1000, 1.23, 9.87, 2.5, 2.61, 0.5, 4.44, 9.12};
  EXPECT_EQ(LatLine(f, Output::kFull),
            C(REPORT_FMT_LAT "\n", 2ul, uint64_t{1000}, 1.23, 9.87, 2.5, 2.61, 0.5, 4.44, 9.12));
  EXPECT_EQ(LatLine(f, Output::kLatency), "2.610000\n");  // the mean, as perftest's --output
  const LatDurationFigures d{2, 300000, 1.75, 285714.29};
  EXPECT_EQ(LatDurationLine(d, Output::kFull),
            C(REPORT_FMT_LAT_DUR "\n", 2ul, uint64_t{300000}, 1.75, 285714.29));
}

TEST(PerftestOutput, JsonCarriesTheKeysNgcScriptsRead) {
  TestInfo info;
  info.device = "rxe0";
  info.gid_index = 1;
  const nlohmann::json j = nlohmann::json::parse(
      BwJson(info, {65536, 5000, 11000.12, 10990.55, 0.175849}, true, Output::kFull));
  EXPECT_EQ(j["test_info"]["test"], "RDMA_Write_BW_Test");
  EXPECT_EQ(j["test_info"]["Device"], "rxe0");
  EXPECT_EQ(j["test_info"]["GID_index"], 1);
  EXPECT_EQ(j["test_info"]["TX_depth"], 128);
  EXPECT_EQ(j["test_info"]["Data_ex_method"], "Ethernet");
  EXPECT_EQ(j["results"]["MsgSize"], 65536);
  EXPECT_EQ(j["results"]["n_iterations"], 5000);
  EXPECT_DOUBLE_EQ(j["results"]["BW_average"].get<double>(), 10990.55);
  EXPECT_DOUBLE_EQ(j["results"]["BW_peak"].get<double>(), 11000.12);
  EXPECT_DOUBLE_EQ(j["results"]["MsgRate"].get<double>(), 0.175849);
  // --output with --out_json: perftest leaves a trailing comma; ours parses.
  const nlohmann::json only =
      nlohmann::json::parse(BwJson(info, {65536, 5000, 1, 2, 3}, false, Output::kBandwidth));
  EXPECT_DOUBLE_EQ(only["results"]["bw_avg"].get<double>(), 2);
  // -b: a bidirectional test by name; this end's own tiny average asks for six digits.
  info.duplex = true;
  const std::string bidir = BwJson(info, {2, 1000, 0.3, 0.15, 1.25}, true, Output::kFull, 0.07);
  EXPECT_EQ(nlohmann::json::parse(bidir)["test_info"]["test"], "RDMA_Write_Bidirectional_BW_Test");
  EXPECT_NE(bidir.find("\"BW_average\": 0.150000"), std::string::npos) << bidir;
  info.duplex = false;

  info.verb = kVerbRead;
  info.bandwidth = false;
  info.client = false;
  info.rdma_cm = true;
  info.tos = 105;
  const nlohmann::json lat = nlohmann::json::parse(
      LatJson(info, {2, 1000, 1.23, 9.87, 2.5, 2.61, 0.5, 4.44, 9.12}, Output::kFull));
  EXPECT_EQ(lat["test_info"]["test"], "RDMA_Read_Latency_Test");
  EXPECT_FALSE(lat["test_info"].contains("TX_depth"));
  EXPECT_FALSE(lat["test_info"].contains("CQ_Moderation"));
  EXPECT_EQ(lat["test_info"]["Data_ex_method"], "rdma_cm");
  EXPECT_EQ(lat["test_info"]["TOS"], 105);
  EXPECT_TRUE(lat["test_info"].contains("Outstand_reads"));
  for (const char* key : {"MsgSize", "n_iterations", "t_min", "t_max", "t_typical", "t_avg",
                          "t_stdev", "percentile_99", "percentile_99.9"}) {
    EXPECT_TRUE(lat["results"].contains(key)) << key;
  }
  const nlohmann::json dur =
      nlohmann::json::parse(LatDurationJson(info, {2, 300000, 1.75, 285714.29}, Output::kFull));
  EXPECT_DOUBLE_EQ(dur["results"]["tps_average"].get<double>(), 285714.29);
}

}  // namespace
}  // namespace fabric::perftest
