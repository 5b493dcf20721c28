#include "agent/publish/metrics/exposition.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace fabric::metrics {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST(SampleValue, Format) {
  const struct {
    SampleValue value;
    std::string want;
  } cases[] = {
      {0, "0"},
      {1, "1"},
      {-1, "-1"},
      {uint64_t{123456789012}, "123456789012"},
      {std::numeric_limits<uint64_t>::max(), "18446744073709551615"},
      {std::numeric_limits<int64_t>::min(), "-9223372036854775808"},
      {123456789012.0, "123456789012"},
      {5e10, "50000000000"},
      {-0.0, "0"},
      {0.5, "0.5"},
      {2.5, "2.5"},
      {0.1, "0.1"},
      {1e-7, "1e-07"},
      {1e20, "1e+20"},
      {9007199254740993.0, "9007199254740992"},  // The double nearest 2^53+1, exactly.
      {std::nan(""), "NaN"},
      {std::numeric_limits<double>::infinity(), "+Inf"},
      {-std::numeric_limits<double>::infinity(), "-Inf"},
      {true, "1"},
  };
  for (const auto& c : cases) EXPECT_EQ(c.value.Format(), c.want);
}

TEST(Exposition, Names) {
  const struct {
    const char* name;
    bool metric;
    bool label;
  } cases[] = {
      {"fabric_port_state", true, true},
      {"_x", true, true},
      {"a1", true, true},
      {"job:rate5m", true, false},
      {":x", true, false},
      {"__name__", true, false},  // Reserved for Prometheus as a label.
      {"", false, false},
      {"1a", false, false},
      {"a-b", false, false},
      {"a.b", false, false},
      {"a b", false, false},
      {"é", false, false},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(Exposition::IsValidMetricName(c.name), c.metric) << c.name;
    EXPECT_EQ(Exposition::IsValidLabelName(c.name), c.label) << c.name;
  }
}

TEST(Exposition, RendersFamiliesInFirstSeenOrderWithSamplesGrouped) {
  Exposition e;
  e.Gauge("fabric_b", "B.", {{"device", "mlx5_1"}}, 1);
  e.Counter("fabric_a_total", "A.", {{"device", "mlx5_1"}, {"port", "1"}}, uint64_t{7});
  e.Gauge("fabric_b", "B again (ignored).", {{"device", "mlx5_2"}}, 2);
  e.Gauge("fabric_c", "C.", {}, 0.25);
  e.Counter("fabric_a_total", "", {{"device", "mlx5_2"}, {"port", "1"}}, uint64_t{8});
  EXPECT_EQ(e.Render(),
            "# HELP fabric_b B.\n"
            "# TYPE fabric_b gauge\n"
            "fabric_b{device=\"mlx5_1\"} 1\n"
            "fabric_b{device=\"mlx5_2\"} 2\n"
            "# HELP fabric_a_total A.\n"
            "# TYPE fabric_a_total counter\n"
            "fabric_a_total{device=\"mlx5_1\",port=\"1\"} 7\n"
            "fabric_a_total{device=\"mlx5_2\",port=\"1\"} 8\n"
            "# HELP fabric_c C.\n"
            "# TYPE fabric_c gauge\n"
            "fabric_c 0.25\n");
  EXPECT_EQ(e.samples(), 5u);
  EXPECT_EQ(e.dropped(), 0u);
}

TEST(Exposition, EmptyRendersNothing) { EXPECT_EQ(Exposition().Render(), ""); }

TEST(Exposition, NoHelpLineForEmptyHelp) {
  Exposition e;
  e.Gauge("fabric_x", "", {}, 1);
  EXPECT_EQ(e.Render(), "# TYPE fabric_x gauge\nfabric_x 1\n");
}

TEST(Exposition, Escaping) {
  const struct {
    std::string label_value;
    std::string help;
    std::string want;
  } cases[] = {
      {"plain", "Plain.",
       "# HELP fabric_x Plain.\n# TYPE fabric_x gauge\nfabric_x{l=\"plain\"} 1\n"},
      {"a\\b", "a\\b", "# HELP fabric_x a\\\\b\n# TYPE fabric_x gauge\nfabric_x{l=\"a\\\\b\"} 1\n"},
      // A quote is escaped in label values only.
      {"say \"hi\"", "say \"hi\"",
       "# HELP fabric_x say \"hi\"\n# TYPE fabric_x gauge\nfabric_x{l=\"say \\\"hi\\\"\"} 1\n"},
      {"two\nlines", "two\nlines",
       "# HELP fabric_x two\\nlines\n# TYPE fabric_x gauge\nfabric_x{l=\"two\\nlines\"} 1\n"},
      {"Phy Test", "Tab\tstays.",
       "# HELP fabric_x Tab\tstays.\n# TYPE fabric_x gauge\nfabric_x{l=\"Phy Test\"} 1\n"},
      {"", "Empty value.",
       "# HELP fabric_x Empty value.\n# TYPE fabric_x gauge\nfabric_x{l=\"\"} 1\n"},
      {"ünïcode ✓", "UTF-8 ✓",
       "# HELP fabric_x UTF-8 ✓\n# TYPE fabric_x gauge\nfabric_x{l=\"ünïcode ✓\"} 1\n"},
  };
  for (const auto& c : cases) {
    Exposition e;
    e.Gauge("fabric_x", c.help, {{"l", c.label_value}}, 1);
    EXPECT_EQ(e.Render(), c.want) << c.label_value;
    EXPECT_EQ(e.dropped(), 0u);
  }
}

TEST(Exposition, DropsProgrammingErrorsAndCountsThem) {
  const struct {
    const char* what;
    bool counter;
    std::string name;
    Labels labels;
    std::string help;
    std::string reason;
  } cases[] = {
      {"bad metric name", false, "fabric-x", {}, "", "invalid metric name"},
      {"empty metric name", false, "", {}, "", "invalid metric name"},
      {"counter without _total", true, "fabric_x", {}, "", "must end in _total"},
      {"counter named only _total", true, "_total", {}, "", "must end in _total"},
      {"bad label name", false, "fabric_x", {{"a-b", "1"}}, "", "invalid label name"},
      {"reserved label name", false, "fabric_x", {{"__name__", "y"}}, "", "invalid label name"},
      {"label twice", false, "fabric_x", {{"a", "1"}, {"a", "2"}}, "", "given twice"},
      {"label value not UTF-8", false, "fabric_x", {{"a", "\xff"}}, "", "not UTF-8"},
      {"overlong UTF-8", false, "fabric_x", {{"a", "\xc0\xaf"}}, "", "not UTF-8"},
      {"surrogate", false, "fabric_x", {{"a", "\xed\xa0\x80"}}, "", "not UTF-8"},
      {"truncated UTF-8", false, "fabric_x", {{"a", "\xe2\x9c"}}, "", "not UTF-8"},
      {"help not UTF-8", false, "fabric_x", {}, "\xfe", "HELP text is not UTF-8"},
  };
  for (const auto& c : cases) {
    Exposition e;
    if (c.counter) {
      e.Counter(c.name, c.help, c.labels, 1);
    } else {
      e.Gauge(c.name, c.help, c.labels, 1);
    }
    EXPECT_EQ(e.Render(), "") << c.what;
    EXPECT_EQ(e.samples(), 0u) << c.what;
    EXPECT_EQ(e.dropped(), 1u) << c.what;
    ASSERT_EQ(e.drop_reasons().size(), 1u) << c.what;
    EXPECT_THAT(e.drop_reasons()[0], HasSubstr(c.reason)) << c.what;
  }
}

TEST(Exposition, DropsSecondTypeForOneName) {
  Exposition e;
  e.Counter("fabric_x_total", "X.", {}, 1);
  e.Gauge("fabric_x_total", "X.", {{"a", "b"}}, 2);
  EXPECT_EQ(e.Render(),
            "# HELP fabric_x_total X.\n# TYPE fabric_x_total counter\nfabric_x_total 1\n");
  EXPECT_EQ(e.dropped(), 1u);
  EXPECT_THAT(e.drop_reasons(), ElementsAre(HasSubstr("another type")));
}

TEST(Exposition, RepeatedSeriesKeepsTheFirstInAnyLabelOrder) {
  Exposition e;
  e.Gauge("fabric_x", "X.", {{"a", "1"}, {"b", "2"}}, 1);
  e.Gauge("fabric_x", "X.", {{"a", "1"}, {"b", "2"}}, 2);
  e.Gauge("fabric_x", "X.", {{"b", "2"}, {"a", "1"}}, 3);
  e.Gauge("fabric_x", "X.", {{"a", "1"}, {"b", "3"}}, 4);
  e.Gauge("fabric_x", "X.", {}, 5);
  e.Gauge("fabric_x", "X.", {}, 6);
  EXPECT_EQ(e.Render(),
            "# HELP fabric_x X.\n# TYPE fabric_x gauge\n"
            "fabric_x{a=\"1\",b=\"2\"} 1\n"
            "fabric_x{a=\"1\",b=\"3\"} 4\n"
            "fabric_x 5\n");
  EXPECT_EQ(e.samples(), 3u);
  EXPECT_EQ(e.dropped(), 0u);  // A repeat is no programming error.
}

TEST(Exposition, LabelValuesThatLookLikeSeparatorsStayDistinct) {
  Exposition e;
  e.Gauge("fabric_x", "", {{"a", std::string("x\0b=y", 5)}}, 1);
  e.Gauge("fabric_x", "", {{"a", "x"}, {"b", "y"}}, 2);
  e.Gauge("fabric_x", "", {{"a", "1 1:b"}}, 3);
  e.Gauge("fabric_x", "", {{"a", "1"}, {"b", ""}}, 4);
  EXPECT_EQ(e.samples(), 4u);
}

TEST(Exposition, DropReasonsAreBounded) {
  Exposition e;
  for (int i = 0; i < 100; ++i) e.Gauge("bad name", "", {}, i);
  EXPECT_EQ(e.dropped(), 100u);
  EXPECT_EQ(e.drop_reasons().size(), Exposition::kMaxDropReasons);
  EXPECT_THAT(e.Render(), IsEmpty());
}

}  // namespace
}  // namespace fabric::metrics
