#include "agent/policy/health/counter_rules.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <string>

namespace fabric {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t k2p32 = uint64_t{1} << 32;
constexpr uint64_t kMax64 = std::numeric_limits<uint64_t>::max();

absl::Duration S(double s) { return absl::Seconds(s); }

v1::CounterRule MakeRule(std::string counter, uint64_t max, double window_s,
                         v1::Severity sev = v1::SEVERITY_UNSPECIFIED) {
  v1::CounterRule r;
  r.set_counter(std::move(counter));
  r.set_max_increase(max);
  r.set_window_s(window_s);
  r.set_severity(sev);
  return r;
}

// The codes of the breaches, for "which rules fired" checks.
std::set<std::string> Codes(const std::vector<CounterBreach>& bs) {
  std::set<std::string> out;
  for (const CounterBreach& b : bs) out.insert(CounterRuleCode(*b.rule));
  return out;
}

bool Has(const std::vector<CounterBreach>& bs, const std::string& code) {
  return Codes(bs).count(code) > 0;
}

// --- DeltaOf ---

struct DeltaCase {
  uint64_t before, after, increase;
  bool wrapped, reset;
};

TEST(DeltaOf, Table) {
  const DeltaCase cases[] = {
      {0, 0, 0, false, false},
      {5, 5, 0, false, false},
      {kMax64, kMax64, 0, false, false},
      {0, 1, 1, false, false},
      {0, kMax64, kMax64, false, false},
      {100, 1234, 1134, false, false},
      {k2p32 - 1, k2p32, 1, false, false},  // a 64-bit counter past 32 bits: plain
      {k2p32 - 1, 0, 1, true, false},
      {k2p32 - 1, 5, 6, true, false},
      {k2p32 - 10, k2p32 - 20 + 0, k2p32 - 20, false, true},  // small drop: far from a wrap
      {(uint64_t{1} << 31) + 10, 5, (uint64_t{1} << 31) - 5, true, false},
      {(uint64_t{1} << 31), 0, 0, false, true},  // distance exactly 2^31: not a wrap
      {(uint64_t{1} << 31) + 1, 0, (uint64_t{1} << 31) - 1, true, false},
      {100, 50, 50, false, true},
      {1, 0, 0, false, true},
      {uint64_t{1} << 40, 3, 3, false, true},
      {k2p32, 0, 0, false, true},  // before over 32 bits: a reset
      {kMax64, 0, 0, false, true},
      {kMax64, 7, 7, false, true},
  };
  for (const DeltaCase& c : cases) {
    const CounterDelta d = DeltaOf(c.before, c.after);
    EXPECT_EQ(d.increase, c.increase) << c.before << " -> " << c.after;
    EXPECT_EQ(d.wrapped, c.wrapped) << c.before << " -> " << c.after;
    EXPECT_EQ(d.reset, c.reset) << c.before << " -> " << c.after;
  }
}

// --- CounterRuleCode ---

TEST(CounterRuleCode, Table) {
  const std::pair<double, std::string> cases[] = {
      {0, "counter.x"},
      {1, "counter.x.1s"},
      {60, "counter.x.1m"},
      {90, "counter.x.90s"},
      {3600, "counter.x.1h"},
      {5400, "counter.x.90m"},
      {7200, "counter.x.2h"},
      {86400, "counter.x.1d"},
      {90000, "counter.x.25h"},
      {604800, "counter.x.7d"},
      {0.5, "counter.x.500ms"},
      {1.5, "counter.x.1500ms"},
      {0.0000015, "counter.x.2us"},
      {1e-9, "counter.x.1us"},
      {-1, "counter.x"},
      {std::nan(""), "counter.x"},
  };
  for (const auto& [window, code] : cases) {
    EXPECT_EQ(CounterRuleCode(MakeRule("x", 0, window)), code) << window;
  }
}

// --- Validation ---

TEST(ValidateCounterRule, Table) {
  struct Case {
    v1::CounterRule rule;
    std::string error;  // "" when valid; else fragments of the message
    std::string value = "";
  };
  auto with = [](v1::CounterRule r, auto f) {
    f(r);
    return r;
  };
  const Case cases[] = {
      {MakeRule("symbol_error", 10, 1), ""},
      {MakeRule("a", 0, 0), ""},
      {MakeRule(std::string(64, 'a'), 0, 604800, v1::SEVERITY_CRITICAL), ""},
      {MakeRule("x9_", 0, 0.001, v1::SEVERITY_WARNING), ""},
      {MakeRule("", 0, 0), "counter", "\"\""},
      {MakeRule(std::string(65, 'a'), 0, 0), "counter", "aaaa"},
      {MakeRule("Symbol_error", 0, 0), "counter", "Symbol_error"},
      {MakeRule("port-rcv", 0, 0), "counter", "port-rcv"},
      {MakeRule("a b", 0, 0), "counter", "a b"},
      {MakeRule("x", 0, -1), "window_s", "-1"},
      {MakeRule("x", 0, 604801), "window_s", "604801"},
      {MakeRule("x", 0, std::nan("")), "window_s", "nan"},
      {MakeRule("x", 0, INFINITY), "window_s", "inf"},
      {MakeRule("x", 0, 0, v1::SEVERITY_OK), "severity", "SEVERITY_OK"},
      {MakeRule("x", 0, 0, v1::SEVERITY_UNKNOWN), "severity", "SEVERITY_UNKNOWN"},
      {MakeRule("x", 0, 0, static_cast<v1::Severity>(42)), "severity", "42"},
      {with(MakeRule("x", 0, 0), [](v1::CounterRule& r) { r.set_repair(v1::RepairAction(77)); }),
       "repair", "77"},
  };
  for (const Case& c : cases) {
    const absl::Status s = ValidateCounterRule(c.rule);
    if (c.error.empty()) {
      EXPECT_TRUE(s.ok()) << c.rule.ShortDebugString() << ": " << s;
    } else {
      EXPECT_FALSE(s.ok()) << c.rule.ShortDebugString();
      EXPECT_THAT(s.message(), HasSubstr(c.error)) << c.rule.ShortDebugString();
      EXPECT_THAT(s.message(), HasSubstr(c.value)) << c.rule.ShortDebugString();
    }
  }
}

TEST(ValidateCounterRules, Table) {
  v1::HealthConfig ok;
  *ok.add_counter_rules() = MakeRule("symbol_error", 10, 1);
  *ok.add_counter_rules() = MakeRule("symbol_error", 120, 3600);  // same counter, other window
  EXPECT_TRUE(ValidateCounterRules(ok).ok());
  EXPECT_TRUE(ValidateCounterRules(v1::HealthConfig()).ok());

  v1::HealthConfig dup = ok;
  *dup.add_counter_rules() = MakeRule("symbol_error", 5, 3600);
  dup.mutable_counter_rules(2)->set_disabled(true);  // disabled still counts: contradictory
  absl::Status s = ValidateCounterRules(dup);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("counter_rules[2]"));
  EXPECT_THAT(s.message(), HasSubstr("counter_rules[1]"));
  EXPECT_THAT(s.message(), HasSubstr("symbol_error"));

  v1::HealthConfig bad = ok;
  *bad.add_counter_rules() = MakeRule("x", 0, -5);
  s = ValidateCounterRules(bad);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("counter_rules[2]: window_s -5"));

  v1::HealthConfig many;
  for (int i = 0; i < 256; ++i) *many.add_counter_rules() = MakeRule("c" + std::to_string(i), 0, 0);
  EXPECT_TRUE(ValidateCounterRules(many).ok());
  *many.add_counter_rules() = MakeRule("c256", 0, 0);
  s = ValidateCounterRules(many);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("257"));
}

// --- Defaults and the effective set ---

TEST(DefaultCounterRules, AreValidAndComplete) {
  struct Want {
    std::string code;
    uint64_t max;
    v1::Severity sev;
    v1::RepairAction repair;
  };
  const Want wants[] = {
      {"counter.link_downed", 0, v1::SEVERITY_CRITICAL, v1::REPAIR_ACTION_CHECK_SWITCH_PORT},
      {"counter.excessive_buffer_overrun_errors", 0, v1::SEVERITY_CRITICAL,
       v1::REPAIR_ACTION_CHECK_SWITCH_PORT},
      {"counter.local_link_integrity_errors", 0, v1::SEVERITY_CRITICAL,
       v1::REPAIR_ACTION_RESEAT_CABLE},
      {"counter.rnr_nak_retry_err", 0, v1::SEVERITY_CRITICAL, v1::REPAIR_ACTION_NONE},
      {"counter.symbol_error.1s", 10, v1::SEVERITY_WARNING, v1::REPAIR_ACTION_RESEAT_CABLE},
      {"counter.symbol_error.1h", 120, v1::SEVERITY_CRITICAL, v1::REPAIR_ACTION_RESEAT_CABLE},
      {"counter.link_error_recovery.1m", 5, v1::SEVERITY_WARNING, v1::REPAIR_ACTION_RESEAT_CABLE},
      {"counter.port_rcv_errors.1s", 10, v1::SEVERITY_WARNING, v1::REPAIR_ACTION_RESEAT_CABLE},
      {"counter.local_ack_timeout_err.1s", 1, v1::SEVERITY_WARNING,
       v1::REPAIR_ACTION_CHECK_SWITCH_PORT},
      {"counter.port_xmit_discards.1s", 100, v1::SEVERITY_WARNING,
       v1::REPAIR_ACTION_CHECK_SWITCH_PORT},
      {"counter.roce_slow_restart.1s", 10, v1::SEVERITY_WARNING,
       v1::REPAIR_ACTION_CHECK_SWITCH_PORT},
      {"counter.carrier_changes", 2, v1::SEVERITY_WARNING, v1::REPAIR_ACTION_CHECK_SWITCH_PORT},
      {"counter.aer_dev_fatal", 0, v1::SEVERITY_CRITICAL, v1::REPAIR_ACTION_HARDWARE_INSPECTION},
      {"counter.aer_dev_nonfatal", 0, v1::SEVERITY_WARNING, v1::REPAIR_ACTION_HARDWARE_INSPECTION},
      {"counter.aer_dev_correctable.1h", 100, v1::SEVERITY_WARNING,
       v1::REPAIR_ACTION_HARDWARE_INSPECTION},
  };
  const auto& rules = DefaultCounterRules();
  ASSERT_EQ(rules.size(), std::size(wants));
  v1::HealthConfig as_config;
  for (size_t i = 0; i < rules.size(); ++i) {
    const v1::CounterRule& r = rules[i];
    EXPECT_TRUE(ValidateCounterRule(r).ok()) << r.ShortDebugString();
    EXPECT_FALSE(r.why().empty()) << r.counter();
    EXPECT_FALSE(r.disabled());
    EXPECT_EQ(CounterRuleCode(r), wants[i].code);
    EXPECT_EQ(r.max_increase(), wants[i].max) << wants[i].code;
    EXPECT_EQ(r.severity(), wants[i].sev) << wants[i].code;
    EXPECT_EQ(r.repair(), wants[i].repair) << wants[i].code;
    *as_config.add_counter_rules() = r;
  }
  EXPECT_TRUE(ValidateCounterRules(as_config).ok());  // no two of one (counter, window)
}

TEST(EffectiveCounterRules, Merge) {
  const auto& defaults = DefaultCounterRules();
  EXPECT_EQ(EffectiveCounterRules(v1::HealthConfig()).size(), defaults.size());

  v1::HealthConfig cfg;
  // Replaces symbol_error per hour in place; severity unset becomes WARNING.
  *cfg.add_counter_rules() = MakeRule("symbol_error", 240, 3600);
  // Removes link_downed; a disabled rule of no default is simply dropped.
  *cfg.add_counter_rules() = MakeRule("link_downed", 0, 0);
  cfg.mutable_counter_rules(1)->set_disabled(true);
  *cfg.add_counter_rules() = MakeRule("nothing_here", 0, 0);
  cfg.mutable_counter_rules(2)->set_disabled(true);
  // symbol_error with another window is a new rule, appended.
  *cfg.add_counter_rules() = MakeRule("symbol_error", 1000, 86400, v1::SEVERITY_CRITICAL);
  *cfg.add_counter_rules() = MakeRule("port_rcv_remote_physical_errors", 5, 60);

  const std::vector<v1::CounterRule> eff = EffectiveCounterRules(cfg);
  ASSERT_EQ(eff.size(), defaults.size() - 1 + 2);
  std::vector<std::string> codes;
  for (const auto& r : eff) {
    codes.push_back(CounterRuleCode(r));
    EXPECT_NE(r.severity(), v1::SEVERITY_UNSPECIFIED) << codes.back();
    EXPECT_FALSE(r.disabled());
  }
  EXPECT_EQ(std::count(codes.begin(), codes.end(), "counter.link_downed"), 0);
  EXPECT_EQ(std::count(codes.begin(), codes.end(), "counter.nothing_here"), 0);
  EXPECT_EQ(codes[codes.size() - 2], "counter.symbol_error.1d");
  EXPECT_EQ(codes.back(), "counter.port_rcv_remote_physical_errors.1m");
  EXPECT_EQ(eff.back().severity(), v1::SEVERITY_WARNING);
  // In place: the hourly rule still follows the 1 s one.
  auto hourly = std::find(codes.begin(), codes.end(), "counter.symbol_error.1h");
  ASSERT_NE(hourly, codes.end());
  EXPECT_EQ(*(hourly - 1), "counter.symbol_error.1s");
  const v1::CounterRule& h = eff[hourly - codes.begin()];
  EXPECT_EQ(h.max_increase(), 240u);
  EXPECT_EQ(h.severity(), v1::SEVERITY_WARNING);

  cfg.set_no_default_rules(true);
  const std::vector<v1::CounterRule> only = EffectiveCounterRules(cfg);
  ASSERT_EQ(only.size(), 3u);
  EXPECT_EQ(CounterRuleCode(only[0]), "counter.symbol_error.1h");
  EXPECT_EQ(CounterRuleCode(only[1]), "counter.symbol_error.1d");
  EXPECT_EQ(CounterRuleCode(only[2]), "counter.port_rcv_remote_physical_errors.1m");
}

// --- CounterJudge ---

// Each default rule from a baseline: one poll (as long as the window, or 10 s for a
// between-polls rule) rising by exactly the bound is fine, one more is a breach.
TEST(CounterJudge, EachDefaultRuleAtItsBound) {
  for (const v1::CounterRule& r : DefaultCounterRules()) {
    const std::string code = CounterRuleCode(r);
    const absl::Duration poll = r.window_s() > 0 ? S(r.window_s()) : S(10);
    for (const uint64_t extra : {uint64_t{0}, uint64_t{1}}) {
      CounterJudge judge(DefaultCounterRules());
      EXPECT_TRUE(judge.Observe("mlx5_0:1", r.counter(), 1000, S(100)).empty()) << code;
      const auto bs =
          judge.Observe("mlx5_0:1", r.counter(), 1000 + r.max_increase() + extra, S(100) + poll);
      EXPECT_EQ(Has(bs, code), extra == 1) << code << " +" << r.max_increase() + extra;
      for (const CounterBreach& b : bs) {
        if (CounterRuleCode(*b.rule) != code) continue;
        EXPECT_EQ(b.increase, r.max_increase() + 1) << code;
        EXPECT_EQ(b.over, poll) << code;
        EXPECT_EQ(b.subject, "mlx5_0:1");
        EXPECT_EQ(b.counter, r.counter());
        EXPECT_FALSE(b.wrapped || b.reset);
        EXPECT_EQ(BreachFinding(b).severity(), r.severity()) << code;
        EXPECT_EQ(BreachFinding(b).code(), code);
      }
    }
  }
}

TEST(CounterJudge, SymbolErrorsPerSecond) {
  CounterJudge judge(DefaultCounterRules());
  judge.Observe("mlx5_0:1", "symbol_error", 0, S(0));
  EXPECT_FALSE(Has(judge.Observe("mlx5_0:1", "symbol_error", 10, S(1)), "counter.symbol_error.1s"));
  EXPECT_FALSE(Has(judge.Observe("mlx5_0:1", "symbol_error", 20, S(2)), "counter.symbol_error.1s"));
  const auto bs = judge.Observe("mlx5_0:1", "symbol_error", 31, S(3));
  ASSERT_TRUE(Has(bs, "counter.symbol_error.1s"));
  EXPECT_EQ(bs[0].increase, 11u);
  EXPECT_DOUBLE_EQ(bs[0].per_second, 11);
}

// A 1 s rule with 10 s polls: the poll's rate scaled to a second.
TEST(CounterJudge, RateRuleWithLongerPolls) {
  CounterJudge judge(DefaultCounterRules());
  judge.Observe("mlx5_0:1", "port_rcv_errors", 0, S(0));
  EXPECT_TRUE(judge.Observe("mlx5_0:1", "port_rcv_errors", 100, S(10)).empty());
  const auto bs = judge.Observe("mlx5_0:1", "port_rcv_errors", 201, S(20));
  ASSERT_EQ(Codes(bs), std::set<std::string>{"counter.port_rcv_errors.1s"});
  EXPECT_EQ(bs[0].increase, 101u);
  EXPECT_EQ(bs[0].over, S(10));
  EXPECT_DOUBLE_EQ(bs[0].per_second, 10.1);
  EXPECT_THAT(BreachFinding(bs[0]).message(),
              HasSubstr("port_rcv_errors rose by 101 in 10 s (10.1 per 1s, more than 10): "));
}

// Polls slightly shorter than the window: the previous poll adds only its overlapping share,
// so a steady 9/s is not read as 18 in a second.
TEST(CounterJudge, JitteryPollsNearTheWindow) {
  CounterJudge judge(DefaultCounterRules());
  uint64_t v = 0;
  judge.Observe("mlx5_0:1", "symbol_error", v, S(0));
  for (int i = 1; i <= 50; ++i) {
    v += 9;
    EXPECT_FALSE(
        Has(judge.Observe("mlx5_0:1", "symbol_error", v, S(0.998 * i)), "counter.symbol_error.1s"))
        << i;
  }
  v += 12;  // 12 in 0.998 s is over the bound
  EXPECT_TRUE(
      Has(judge.Observe("mlx5_0:1", "symbol_error", v, S(0.998 * 51)), "counter.symbol_error.1s"));
}

// 10 s polls rising by 1 on every third poll for an hour: 120 is within the IBTA bound, one more
// is not.
TEST(CounterJudge, SymbolErrorsPerHourOverManyPolls) {
  for (const bool one_more : {false, true}) {
    CounterJudge judge(DefaultCounterRules());
    uint64_t v = 5000;
    judge.Observe("mlx5_0:1", "symbol_error", v, S(0));
    bool breached = false;
    for (int i = 1; i <= 360; ++i) {
      if (i % 3 == 0) ++v;
      if (i == 360 && one_more) ++v;
      const auto bs = judge.Observe("mlx5_0:1", "symbol_error", v, S(10.0 * i));
      EXPECT_FALSE(Has(bs, "counter.symbol_error.1s"));
      if (Has(bs, "counter.symbol_error.1h")) {
        breached = true;
        EXPECT_EQ(i, 360);
        EXPECT_EQ(bs[0].increase, 121u);
        EXPECT_EQ(bs[0].over, S(3600 - 20));  // from the start of the first rising poll
      }
      EXPECT_LE(judge.buckets("mlx5_0:1", "symbol_error"), CounterJudge::kMaxBuckets);
    }
    EXPECT_EQ(breached, one_more);
  }
}

// A burst of 120 in the first poll, then one more: a breach while the burst is within the hour,
// none once its poll has left the window.
TEST(CounterJudge, HourlyWindowForgetsOldIncreases) {
  for (const double last : {3600.0, 3610.0}) {
    CounterJudge judge(DefaultCounterRules());
    judge.Observe("mlx5_0:1", "symbol_error", 0, S(0));
    EXPECT_FALSE(
        Has(judge.Observe("mlx5_0:1", "symbol_error", 120, S(10)), "counter.symbol_error.1h"));
    for (double t = 20; t < last; t += 10) {
      EXPECT_TRUE(judge.Observe("mlx5_0:1", "symbol_error", 120, S(t)).empty()) << t;
    }
    const auto bs = judge.Observe("mlx5_0:1", "symbol_error", 121, S(last));
    EXPECT_EQ(Has(bs, "counter.symbol_error.1h"), last == 3600.0) << last;
  }
}

// Rising every poll for hours: the history stays at 32 buckets, older increases merged, and the
// hourly sum stays accurate (a steady 360 an hour).
TEST(CounterJudge, BoundedHistoryStaysAccurate) {
  std::vector<v1::CounterRule> rules = {MakeRule("x", 358, 3600), MakeRule("y", 361, 3600)};
  CounterJudge judge(rules);
  uint64_t v = 0;
  judge.Observe("p", "x", v, S(0));
  judge.Observe("p", "y", v, S(0));
  for (int i = 1; i <= 3 * 360; ++i) {
    ++v;
    const auto bx = judge.Observe("p", "x", v, S(10.0 * i));
    const auto by = judge.Observe("p", "y", v, S(10.0 * i));
    EXPECT_EQ(bx.size(), i > 358 ? 1u : 0u) << i;
    EXPECT_TRUE(by.empty()) << i;
    ASSERT_LE(judge.buckets("p", "x"), CounterJudge::kMaxBuckets);
  }
  EXPECT_GE(judge.buckets("p", "x"), CounterJudge::kMaxBuckets - 1);
  // Quiet for just over an hour: every stored increase has left the window.
  judge.Observe("p", "x", v, S(10.0 * 3 * 360 + 3601));
  EXPECT_TRUE(judge.Observe("p", "x", v + 1, S(10.0 * 3 * 360 + 3611)).empty());
  EXPECT_EQ(judge.buckets("p", "x"), 1u);
}

TEST(CounterJudge, WrapAndResetInASeries) {
  CounterJudge judge(DefaultCounterRules());
  // A 32-bit hw counter: 3 before the wrap, 2 after it, in one second: 5/s.
  judge.Observe("mlx5_0:1", "local_ack_timeout_err", k2p32 - 3, S(0));
  auto bs = judge.Observe("mlx5_0:1", "local_ack_timeout_err", 2, S(1));
  ASSERT_EQ(bs.size(), 1u);
  EXPECT_EQ(bs[0].increase, 5u);
  EXPECT_TRUE(bs[0].wrapped);
  EXPECT_FALSE(bs[0].reset);
  EXPECT_THAT(BreachFinding(bs[0]).evidence(), HasSubstr("(the counter wrapped at 32 bits)"));
  // Going on from the wrapped value.
  EXPECT_TRUE(judge.Observe("mlx5_0:1", "local_ack_timeout_err", 3, S(2)).empty());

  // A reset to 0 is no increase; counted from the reset on.
  judge.Observe("mlx5_0:1", "link_downed", uint64_t{1} << 40, S(0));
  EXPECT_TRUE(judge.Observe("mlx5_0:1", "link_downed", 0, S(10)).empty());
  bs = judge.Observe("mlx5_0:1", "link_downed", 1, S(20));
  ASSERT_EQ(bs.size(), 1u);
  EXPECT_FALSE(bs[0].reset);
  // A reset between polls after which the counter rose.
  bs = judge.Observe("mlx5_0:1", "link_downed", 0, S(30));
  EXPECT_TRUE(bs.empty());
  judge.Observe("mlx5_0:2", "link_downed", 900, S(0));
  bs = judge.Observe("mlx5_0:2", "link_downed", 3, S(10));
  ASSERT_EQ(bs.size(), 1u);
  EXPECT_EQ(bs[0].increase, 3u);
  EXPECT_TRUE(bs[0].reset);
  EXPECT_THAT(BreachFinding(bs[0]).evidence(), HasSubstr("(the counter was reset)"));
}

TEST(CounterJudge, TimeNotMovingForward) {
  CounterJudge judge(DefaultCounterRules());
  // Same time: no rate, but the value is kept and its increase stays in the hour.
  judge.Observe("mlx5_0:1", "symbol_error", 0, S(0));
  EXPECT_TRUE(judge.Observe("mlx5_0:1", "symbol_error", 100, S(10)).empty());
  EXPECT_TRUE(judge.Observe("mlx5_0:1", "symbol_error", 121, S(10)).empty());
  auto bs = judge.Observe("mlx5_0:1", "symbol_error", 122, S(20));
  EXPECT_EQ(Codes(bs), std::set<std::string>{"counter.symbol_error.1h"});
  ASSERT_EQ(bs.size(), 1u);
  EXPECT_EQ(bs[0].increase, 122u);

  // Earlier: between-polls rules still judge the increase; the hour starts over.
  judge.Observe("mlx5_0:2", "symbol_error", 0, S(1000));
  EXPECT_TRUE(judge.Observe("mlx5_0:2", "symbol_error", 100, S(1010)).empty());
  EXPECT_TRUE(judge.Observe("mlx5_0:2", "symbol_error", 1000, S(5)).empty());  // 900 at once
  EXPECT_EQ(judge.buckets("mlx5_0:2", "symbol_error"), 0u);
  EXPECT_TRUE(judge.Observe("mlx5_0:2", "symbol_error", 1021, S(15)).empty());

  judge.Observe("mlx5_0:1", "link_downed", 4, S(100));
  bs = judge.Observe("mlx5_0:1", "link_downed", 5, S(50));
  ASSERT_EQ(bs.size(), 1u);
  EXPECT_EQ(bs[0].over, absl::ZeroDuration());
  EXPECT_EQ(bs[0].per_second, 0);
  EXPECT_EQ(BreachFinding(bs[0]).evidence(), "link_downed +1 over 0 s; rule > 0 between polls");
}

TEST(CounterJudge, EvictsLeastRecentlyObserved) {
  CounterJudge judge(DefaultCounterRules(), CounterJudgeOptions{.max_series = 2});
  judge.Observe("a", "link_downed", 0, S(0));
  judge.Observe("b", "link_downed", 0, S(0));
  judge.Observe("a", "link_downed", 0, S(10));  // a is now the most recent
  judge.Observe("c", "link_downed", 0, S(10));  // evicts b
  EXPECT_EQ(judge.series(), 2u);
  EXPECT_EQ(judge.evicted(), 1u);
  EXPECT_EQ(judge.Observe("a", "link_downed", 1, S(20)).size(), 1u);
  EXPECT_TRUE(judge.Observe("b", "link_downed", 1, S(20)).empty());  // a baseline again
  EXPECT_EQ(judge.evicted(), 2u);                                    // c went
  EXPECT_EQ(judge.series(), 2u);
}

TEST(CounterJudge, ForgetAndWhatIsNotRemembered) {
  CounterJudge judge(DefaultCounterRules());
  judge.Observe("mlx5_0:1", "link_downed", 0, S(0));
  judge.Observe("mlx5_0:1", "symbol_error", 0, S(0));
  judge.Observe("mlx5_0:10", "link_downed", 0, S(0));
  judge.Observe(std::string("mlx5_0:1\0x", 10), "link_downed", 0, S(0));
  judge.Observe("mlx5_0:1", "no_rule_names_this", 0, S(0));
  judge.Observe(std::string(257, 'm'), "link_downed", 0, S(0));
  EXPECT_EQ(judge.series(), 3u);
  judge.Forget("mlx5_0:1");
  EXPECT_EQ(judge.series(), 1u);
  EXPECT_TRUE(judge.Observe("mlx5_0:1", "link_downed", 5, S(10)).empty());  // a new baseline
  EXPECT_EQ(judge.Observe("mlx5_0:10", "link_downed", 5, S(10)).size(), 1u);
  judge.Forget("absent");
  judge.Forget("");
  EXPECT_EQ(judge.series(), 2u);
}

TEST(CounterJudge, LeavesOutInvalidAndDisabledRules) {
  std::vector<v1::CounterRule> rules = {MakeRule("ok", 0, 0), MakeRule("Bad", 0, 0),
                                        MakeRule("nan", 0, std::nan("")), MakeRule("off", 0, 0)};
  rules[3].set_disabled(true);
  CounterJudge judge(rules);
  ASSERT_EQ(judge.rules().size(), 1u);
  EXPECT_EQ(judge.rules()[0].counter(), "ok");
  judge.Observe("s", "off", 0, S(0));
  EXPECT_TRUE(judge.Observe("s", "off", 9, S(1)).empty());
  EXPECT_EQ(judge.series(), 0u);
  // Breaches point into the judge's own list, which survives a move.
  judge.Observe("s", "ok", 0, S(0));
  CounterJudge moved = std::move(judge);
  const auto bs = moved.Observe("s", "ok", 1, S(1));
  ASSERT_EQ(bs.size(), 1u);
  EXPECT_EQ(bs[0].rule, &moved.rules()[0]);
}

// --- BreachFinding ---

TEST(BreachFinding, Text) {
  const v1::CounterRule& hourly = DefaultCounterRules()[5];
  ASSERT_EQ(CounterRuleCode(hourly), "counter.symbol_error.1h");
  CounterBreach b{&hourly, "mlx5_3:1", "symbol_error", 1234, S(3600), 1234.0 / 3600};
  v1::Finding f = BreachFinding(b);
  EXPECT_EQ(f.check(), "counter");
  EXPECT_EQ(f.code(), "counter.symbol_error.1h");
  EXPECT_EQ(f.subject(), "mlx5_3:1");
  EXPECT_EQ(f.severity(), v1::SEVERITY_CRITICAL);
  EXPECT_EQ(f.repair(), v1::REPAIR_ACTION_RESEAT_CABLE);
  EXPECT_FALSE(f.dry_run());
  EXPECT_EQ(f.message(), "symbol_error rose by 1,234 in 1h (more than 120): " + hourly.why());
  EXPECT_EQ(f.evidence(), "symbol_error +1234 over 3600 s (0.34/s); rule > 120 per 1h");

  v1::CounterRule flaps = MakeRule("carrier_changes", 2, 0);  // severity unset
  flaps.set_dry_run(true);
  flaps.set_repair(v1::REPAIR_ACTION_CHECK_SWITCH_PORT);
  CounterBreach c{&flaps, "eth2", "carrier_changes", 1234567, S(10), 123456.7, false, true};
  f = BreachFinding(c);
  EXPECT_EQ(f.code(), "counter.carrier_changes");
  EXPECT_EQ(f.severity(), v1::SEVERITY_WARNING);
  EXPECT_TRUE(f.dry_run());
  EXPECT_EQ(f.message(), "carrier_changes rose by 1,234,567 since the last poll (more than 2)");
  EXPECT_EQ(f.evidence(),
            "carrier_changes +1234567 over 10 s (123457/s); rule > 2 between polls (the counter "
            "was reset)");

  const v1::CounterRule& downed = DefaultCounterRules()[0];
  CounterBreach d{&downed, "mlx5_0:1", "link_downed", 1, S(10), 0.1};
  f = BreachFinding(d);
  EXPECT_EQ(f.message(), "link_downed rose by 1 since the last poll: " + downed.why());
  d.increase = 1000005;
  EXPECT_THAT(BreachFinding(d).message(), HasSubstr("rose by 1,000,005 since"));
  EXPECT_EQ(f.evidence(), "link_downed +1 over 10 s (0.1/s); rule > 0 between polls");

  v1::CounterRule slow = MakeRule("aer_dev_correctable", 100, 604800);
  CounterBreach e{&slow, "0000:3b:00.0", "aer_dev_correctable", 101, S(0.5 * 86400), 101 / 43200.0};
  EXPECT_EQ(BreachFinding(e).evidence(),
            "aer_dev_correctable +101 over 43200 s (0.0023/s); rule > 100 per 7d");

  CounterBreach none{nullptr, "x", "y", 1, S(1), 1};  // never crashes
  EXPECT_EQ(BreachFinding(none).code(), "counter.");
}

}  // namespace
}  // namespace fabric
