#include "agent/daemon/lifecycle/event_loop.h"

#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include "agent/common/fd.h"

namespace fabric {
namespace {

// An eventfd that is readable once written.
struct Wakeable {
  UniqueFd fd{eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)};
  void Wake() const {
    const uint64_t one = 1;
    ASSERT_EQ(write(fd.get(), &one, sizeof(one)), static_cast<ssize_t>(sizeof(one)));
  }
  void Drain() const {
    uint64_t n = 0;
    (void)read(fd.get(), &n, sizeof(n));
  }
  std::function<void(std::vector<pollfd>*)> Fds() const {
    const int f = fd.get();
    return [f](std::vector<pollfd>* fds) { fds->push_back({f, POLLIN, 0}); };
  }
};

TEST(EventLoop, DispatchesEachReadySourceByItsOwnDescriptorsInOrder) {
  Wakeable a, b, c;
  std::vector<std::string> ran;
  EventLoop loop;
  int turns = 0;
  loop.Add({"a", a.Fds(), nullptr, [&](bool ready, bool due, absl::Time) {
              ran.push_back(std::string("a") + (ready ? "+" : "-") + (due ? "d" : ""));
              a.Drain();
            }});
  // Two descriptors for one source: either wakes it.
  loop.Add({"bc",
            [&](std::vector<pollfd>* fds) {
              b.Fds()(fds);
              c.Fds()(fds);
            },
            nullptr,
            [&](bool ready, bool, absl::Time) {
              ran.push_back(std::string("bc") + (ready ? "+" : "-"));
              b.Drain();
              c.Drain();
            }});
  loop.AfterEachTurn([&] {
    if (++turns == 1) c.Wake();  // The second turn: only the second descriptor of "bc".
    if (turns == 2) loop.Stop();
  });
  a.Wake();
  b.Wake();
  ASSERT_TRUE(loop.Run().ok());
  EXPECT_EQ(ran, (std::vector<std::string>{"a+", "bc+", "bc+"}));
}

TEST(EventLoop, RunsASourceAtItsDeadlineWithoutAnEvent) {
  Wakeable quiet;
  EventLoop loop;
  const absl::Time start = absl::Now();
  const absl::Time at = start + absl::Milliseconds(30);
  bool fired = false, woke = false;
  loop.Add({"quiet", quiet.Fds(), nullptr, [&](bool, bool, absl::Time) { woke = true; }});
  loop.Add({"timer", nullptr, [&](absl::Time) { return fired ? absl::InfiniteFuture() : at; },
            [&](bool ready, bool due, absl::Time now) {
              EXPECT_FALSE(ready);
              EXPECT_TRUE(due);
              EXPECT_GE(now, at);
              fired = true;
              loop.Stop();
            }});
  ASSERT_TRUE(loop.Run().ok());
  EXPECT_TRUE(fired);
  EXPECT_FALSE(woke);
}

TEST(EventLoop, ASourceRemovedWhileRunningRunsNoMore) {
  Wakeable a, b;
  EventLoop loop;
  int a_runs = 0, b_runs = 0, turns = 0;
  int id = -1;
  id = loop.Add({"a", a.Fds(), nullptr, [&](bool, bool, absl::Time) {
                   ++a_runs;  // Not drained: a kept source would run every turn.
                   loop.Remove(id);
                 }});
  loop.Add({"b", b.Fds(), nullptr, [&](bool, bool, absl::Time) {
              ++b_runs;
              b.Drain();
            }});
  EXPECT_EQ(loop.size(), 2u);
  loop.AfterEachTurn([&] {
    if (++turns < 3) {
      b.Wake();
    } else {
      loop.Stop();
    }
  });
  a.Wake();
  b.Wake();
  ASSERT_TRUE(loop.Run().ok());
  EXPECT_EQ(a_runs, 1);
  EXPECT_EQ(b_runs, 3);
  EXPECT_EQ(loop.size(), 1u);
}

TEST(EventLoop, StopEndsTheTurnBeforeLaterSources) {
  Wakeable a, b;
  EventLoop loop;
  bool b_ran = false;
  loop.Add({"a", a.Fds(), nullptr, [&](bool, bool, absl::Time) { loop.Stop(); }});
  loop.Add({"b", b.Fds(), nullptr, [&](bool, bool, absl::Time) { b_ran = true; }});
  a.Wake();
  b.Wake();
  ASSERT_TRUE(loop.Run().ok());
  EXPECT_FALSE(b_ran);
}

TEST(PollMillis, RoundsUpAndKeepsForever) {
  const absl::Time now = absl::FromUnixSeconds(1000);
  EXPECT_EQ(PollMillis(now, absl::InfiniteFuture()), -1);
  EXPECT_EQ(PollMillis(now, now - absl::Seconds(1)), 0);
  EXPECT_EQ(PollMillis(now, now + absl::Microseconds(1)), 1);
  EXPECT_EQ(PollMillis(now, now + absl::Milliseconds(1500)), 1500);
  EXPECT_EQ(PollMillis(now, now + absl::Hours(24 * 365)), INT_MAX);
}

}  // namespace
}  // namespace fabric
