#include "agent/fabricctl/counters_view.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_split.h"

namespace fabric::ctl {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

struct Value {
  std::string name;
  uint64_t value;
};

v1::PortCountersResponse Reading(int64_t unix_ms, const std::vector<Value>& counters,
                                 const std::vector<Value>& hw = {}) {
  v1::PortCountersResponse r;
  r.mutable_read_at()->set_seconds(unix_ms / 1000);
  r.mutable_read_at()->set_nanos(static_cast<int32_t>(unix_ms % 1000) * 1000000);
  v1::PortCounterSet* p = r.add_ports();
  p->set_device("mlx5_0");
  p->set_port(1);
  p->set_netdev("ens1f0np0");
  for (const Value& v : counters) {
    v1::CounterValue* c = p->add_counters();
    c->set_name(v.name);
    c->set_value(v.value);
  }
  for (const Value& v : hw) {
    v1::CounterValue* c = p->add_hw_counters();
    c->set_name(v.name);
    c->set_value(v.value);
  }
  return r;
}

const v1::CounterValue* Find(const v1::PortCountersResponse& r, const std::string& name) {
  for (const auto& c : r.ports(0).counters()) {
    if (c.name() == name) return &c;
  }
  for (const auto& c : r.ports(0).hw_counters()) {
    if (c.name() == name) return &c;
  }
  return nullptr;
}

TEST(WithRates, PerSecondFromTheReadingsOwnTimes) {
  const struct {
    std::string what;
    uint64_t before, after;
    int64_t ms_apart;  // Between the read_at times; 0: both the same (the requested 1 s is used).
    bool has_rate;
    double rate;
  } cases[] = {
      {"steady", 1000, 3000, 2000, true, 1000},
      {"unchanged", 7, 7, 1000, true, 0},
      {"sub-second interval", 0, 5, 500, true, 10},
      {"read_at not increasing: the requested interval", 10, 20, 0, true, 10},
      {"went backwards: no rate", 5000, 10, 1000, false, 0},
      {"near 2^64", 18446744073709551000u, 18446744073709551615u, 1000, true, 615},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    const auto first = Reading(1'700'000'000'000, {{"port_rcv_packets", c.before}});
    const auto second = Reading(1'700'000'000'000 + c.ms_apart, {{"port_rcv_packets", c.after}});
    const auto r = WithRates(first, second, absl::Seconds(1));
    const v1::CounterValue* v = Find(r, "port_rcv_packets");
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(v->value(), c.after);
    EXPECT_EQ(v->has_per_second(), c.has_rate);
    if (c.has_rate) {
      EXPECT_DOUBLE_EQ(v->per_second(), c.rate);
    }
    EXPECT_DOUBLE_EQ(r.interval_seconds(), c.ms_apart > 0 ? c.ms_apart / 1000.0 : 1.0);
    // A reset is said, with both values.
    EXPECT_EQ(r.notes_size(), c.has_rate ? 0 : 1);
    if (!c.has_rate) {
      EXPECT_THAT(r.notes(0), HasSubstr("mlx5_0:1 counters/port_rcv_packets went backwards "
                                        "(5000 -> 10)"));
    }
  }
}

TEST(WithRates, LevelsSettingsAndNewCountersGetNoRate) {
  const auto first = Reading(1000, {{"port_xmit_data", 0}},
                             {{"active_qps", 5}, {"lifespan", 10}, {"np_cnp_sent", 1}});
  const auto second = Reading(2000, {{"port_xmit_data", 250'000'000}, {"symbol_error", 3}},
                              {{"active_qps", 9}, {"lifespan", 10}, {"np_cnp_sent", 4}});
  const auto r = WithRates(first, second, absl::Seconds(1));
  EXPECT_FALSE(Find(r, "active_qps")->has_per_second());
  EXPECT_FALSE(Find(r, "lifespan")->has_per_second());
  EXPECT_FALSE(Find(r, "symbol_error")->has_per_second());  // Not in the first reading.
  EXPECT_DOUBLE_EQ(Find(r, "np_cnp_sent")->per_second(), 3);
  EXPECT_DOUBLE_EQ(Find(r, "port_xmit_data")->per_second(), 250'000'000);
  // A port only in the second reading: values, no rates.
  auto other = second;
  other.mutable_ports(0)->set_port(2);
  const auto moved = WithRates(first, other, absl::Seconds(1));
  EXPECT_FALSE(moved.ports(0).counters(0).has_per_second());
}

TEST(DataWordsToGbps, FourOctetWords) {
  EXPECT_DOUBLE_EQ(DataWordsToGbps(0), 0);
  // 100 Gb/s is 12.5 GB/s, 3.125e9 words of 4 octets.
  EXPECT_DOUBLE_EQ(DataWordsToGbps(3.125e9), 100);
}

std::vector<std::string> Lines(const std::string& s) {
  return absl::StrSplit(s, '\n', absl::SkipEmpty());
}

TEST(RenderCounters, HeaderTableAndHiddenZeros) {
  const auto first =
      Reading(1000, {{"port_rcv_data", 0}, {"port_xmit_data", 0}, {"symbol_error", 0}},
              {{"np_cnp_sent", 0}, {"out_of_sequence", 2}, {"lifespan", 10}});
  const auto second = Reading(
      2000, {{"port_rcv_data", 3'125'000'000}, {"port_xmit_data", 31'250'000}, {"symbol_error", 0}},
      {{"np_cnp_sent", 0}, {"out_of_sequence", 1}, {"lifespan", 10}});
  const auto r = WithRates(first, second, absl::Seconds(1));
  const std::string text = RenderCounters(r, /*all=*/false);
  const auto lines = Lines(text);
  ASSERT_GE(lines.size(), 5u) << text;
  EXPECT_EQ(lines[0],
            "1 port; rates over 1.000 s; hidden: zero and unchanged, settings (--all shows them)");
  EXPECT_EQ(lines[1], "mlx5_0:1  netdev ens1f0np0  rx 100.00 Gb/s  tx 1.00 Gb/s  (3 hidden)");
  EXPECT_EQ(lines[2], "  COUNTER                           VALUE  PER-SECOND");
  EXPECT_EQ(lines[3], "  counters/port_rcv_data       3125000000  3125000000");
  EXPECT_EQ(lines[4], "  counters/port_xmit_data        31250000    31250000");
  // Numbers are right-aligned under their headers. The reset counter is shown without a rate, and
  // said below.
  EXPECT_EQ(lines[5], "  hw_counters/out_of_sequence           1           -");
  EXPECT_THAT(text, HasSubstr("note: mlx5_0:1 hw_counters/out_of_sequence went backwards"));
  EXPECT_THAT(text, Not(HasSubstr("symbol_error")));
  EXPECT_THAT(text, Not(HasSubstr("lifespan")));
  // Rates: unchanged is 0, small ones with decimals.
  auto slow = WithRates(Reading(0, {{"symbol_error", 1}, {"link_downed", 4}}),
                        Reading(4000, {{"symbol_error", 3}, {"link_downed", 4}}), {});
  EXPECT_THAT(RenderCounters(slow, false),
              HasSubstr("  counters/symbol_error      3        0.50\n"
                        "  counters/link_downed       4           0\n"));
  // --all: every counter, nothing said hidden.
  const std::string all = RenderCounters(r, /*all=*/true);
  EXPECT_THAT(all, HasSubstr("  counters/symbol_error"));
  EXPECT_THAT(all, HasSubstr("  hw_counters/lifespan"));
  EXPECT_THAT(all, Not(HasSubstr("hidden")));
}

TEST(RenderCounters, OneReadingHasNoRateColumn) {
  const auto one = Reading(1000, {{"port_rcv_packets", 12}, {"link_downed", 0}});
  const std::string text = RenderCounters(one, /*all=*/false);
  EXPECT_THAT(text, HasSubstr("1 port; one reading, no rates"));
  EXPECT_THAT(
      text, HasSubstr("  COUNTER                    VALUE\n  counters/port_rcv_packets     12\n"));
  EXPECT_THAT(text, Not(HasSubstr("PER-SECOND")));
  EXPECT_THAT(text, Not(HasSubstr("Gb/s")));
  EXPECT_THAT(text, Not(HasSubstr("link_downed")));
}

TEST(RenderCounters, ProblemsEmptyPortsAndWidth) {
  v1::PortCountersResponse r = Reading(1000, {});
  v1::FieldProblem* p = r.mutable_ports(0)->add_problems();
  p->set_field("hw_counters/rx_write_requests");
  p->set_path("class/infiniband/mlx5_0/ports/1/hw_counters/rx_write_requests");
  p->set_reason("not a decimal counter value: \"x\"");
  r.add_notes("mlx5_3: gone since the inventory was taken");
  const std::string text = RenderCounters(r, false);
  EXPECT_THAT(text, HasSubstr("  no counters"));
  EXPECT_THAT(text, HasSubstr("  problem hw_counters/rx_write_requests: not a decimal"));
  EXPECT_THAT(text, HasSubstr("note: mlx5_3: gone"));
  // The widest realistic row (the longest mlx5 name, a 20-digit value and rate) fits 100 columns.
  auto wide = Reading(1000, {}, {{"req_transport_retries_exceeded", 0}});
  auto wide2 = Reading(2000, {}, {{"req_transport_retries_exceeded", 18446744073709551615u}});
  wide2.mutable_ports(0)->set_device("mlx5_bond_10");
  wide.mutable_ports(0)->set_device("mlx5_bond_10");
  for (const std::string& line : Lines(RenderCounters(WithRates(wide, wide2, {}), false))) {
    EXPECT_LE(line.size(), 100u) << line;
  }
}

}  // namespace
}  // namespace fabric::ctl
