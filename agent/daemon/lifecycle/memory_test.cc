#include "agent/daemon/lifecycle/memory.h"

#include <gtest/gtest.h>

namespace fabric {
namespace {

TEST(ParseStatmResidentKb, Table) {
  struct Case {
    std::string_view in;
    int64_t page_kb;
    int64_t want;  // -1: an error
  } cases[] = {
      {"6094 5813 2120 1 0 1230 0\n", 4, 5813 * 4},
      {"6094 5813", 4, 5813 * 4},
      {"  1   2  3\n", 64, 128},
      {"", 4, -1},
      {"6094", 4, -1},
      {"6094 x 1", 4, -1},
      {"6094 -3 1", 4, -1},
      {"6094 99999999999999999999999 1", 4, -1},
      {"1 2 3", 0, -1},
  };
  for (const Case& c : cases) {
    auto got = ParseStatmResidentKb(c.in, c.page_kb);
    if (c.want < 0) {
      EXPECT_FALSE(got.ok()) << c.in;
    } else {
      ASSERT_TRUE(got.ok()) << c.in << ": " << got.status();
      EXPECT_EQ(*got, c.want) << c.in;
    }
  }
}

TEST(HeapTrimmer, TickSchedulesTheNextCheck) {
  HeapTrimmer t(absl::Seconds(7), 1 << 30);
  const absl::Time now = absl::Now();
  t.Tick(now);
  EXPECT_EQ(t.next(), now + absl::Seconds(7));
}

}  // namespace
}  // namespace fabric

namespace fabric {
namespace {

TEST(ShouldTrim, Table) {
  constexpr int64_t kSlack = 16 * 1024;
  struct Case {
    const char* what;
    HeapSample now;
    HeapSample last;
    int64_t floor;
    bool want;
  } cases[] = {
      {"near the floor", {40'000, 900'000}, {30'000, 0}, 30'000, false},
      {"above the floor, much freed", {700'000, 600'000}, {30'000, 0}, 30'000, true},
      // A trim during a burst gave nothing back (the memory was in use): the floor stays, and
      // once the burst's memory is freed the next look trims.
      {"after a futile trim, nothing new", {700'000, 1'000}, {700'000, 1'000}, 30'000, false},
      {"after a futile trim, the burst freed", {700'000, 600'000}, {700'000, 1'000}, 30'000, true},
      {"grown since the last trim", {720'000, 1'000}, {700'000, 1'000}, 30'000, true},
      {"unreadable RSS", {-1, 600'000}, {30'000, 0}, 30'000, false},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ShouldTrim(c.now, c.last, c.floor, kSlack), c.want) << c.what;
  }
}

}  // namespace
}  // namespace fabric
