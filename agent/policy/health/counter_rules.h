// Port-counter rules: when a port counter (a file in /sys/class/infiniband/<dev>/ports/<p>/
// counters/ or hw_counters/), a netdev's carrier_changes or a PCI function's AER totals rose too
// much. The defaults are NVIDIA NVSentinel's NIC monitor thresholds plus the PCIe AER ones; the
// `health` config section replaces or disables them by (counter, window). `CounterJudge` turns
// polled values into breaches: 32-bit wraps and resets told apart, bounded history per series,
// monotonic time only. Pure: the reader that polls sysfs lives elsewhere.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "fabric/v1/health.pb.h"

namespace fabric {

// The default rules, each with its `why` and repair (severity always set). Between-polls rules
// (window_s 0) for the counters whose every increase breaks a job; rate and hourly rules for the
// error counters that are normal in small numbers on PAM4 links.
const std::vector<v1::CounterRule>& DefaultCounterRules();

// The rules in force: the defaults (unless cfg.no_default_rules) in their order, a config rule of
// the same (counter, window_s) replacing the default in place, then the config's new rules in
// config order. A `disabled` config rule removes the rule of its (counter, window_s) and is not
// kept itself. Unset severity becomes WARNING. Call ValidateCounterRules first.
std::vector<v1::CounterRule> EffectiveCounterRules(const v1::HealthConfig& cfg);

// counter: 1-64 characters of [a-z0-9_]; window_s: finite, 0 to 7 days; severity: unset, WARNING
// or CRITICAL; repair: a known value. The message names the field and its value.
absl::Status ValidateCounterRule(const v1::CounterRule& r);
// Each of cfg.counter_rules ("counter_rules[3]: ..."), at most 256 of them, no two of the same
// (counter, window_s).
absl::Status ValidateCounterRules(const v1::HealthConfig& cfg);

// The stable finding code: "counter.<counter>" for a between-polls rule, else
// "counter.<counter>.<window>" with the window in the largest unit that divides it exactly
// ("1s", "90s", "1m", "1h", "1d", "500ms"; rounded to microseconds).
std::string CounterRuleCode(const v1::CounterRule& r);

struct CounterDelta {
  uint64_t increase = 0;
  bool wrapped = false;  // a 32-bit counter went past 2^32 - 1
  bool reset = false;    // the counter restarted from 0 (driver reload, `perfquery -R`)
};

// The increase from `before` to `after` of a counter that only goes up. A drop is a 32-bit wrap
// when `before` fits in 32 bits and the wrap distance is under 2^31 (some drivers' hw_counters are
// 32-bit firmware counters); otherwise a reset, and the increase is `after` (counted since it).
CounterDelta DeltaOf(uint64_t before, uint64_t after);

struct CounterBreach {
  const v1::CounterRule* rule = nullptr;  // into CounterJudge::rules()
  std::string subject;
  std::string counter;
  // The increases behind the breach and the time they span: since the previous poll for a
  // between-polls rule or a window shorter than the poll; else the stored increases that overlap
  // the window, from the start of the oldest one's poll to now.
  uint64_t increase = 0;
  absl::Duration over = absl::ZeroDuration();
  double per_second = 0;  // increase / over; 0 when over is 0
  bool wrapped = false;   // one of those increases came from a 32-bit wrap
  bool reset = false;     // ... or from a counter reset
};

struct CounterJudgeOptions {
  // Series ((subject, counter) pairs) remembered; past it the least recently observed goes.
  size_t max_series = 65536;
};

// Judges polled counter values against rules, per (subject, counter) series; the subject is a
// port ("mlx5_0:1"), a netdev ("eth2") or a PCI function ("0000:3b:00.0"). Times are monotonic
// (CLOCK_BOOTTIME since any origin), never wall time. Not thread-safe. Movable, not copyable
// (breaches point into rules()).
//
// A rule with window_s 0 breaches when the increase since the previous sample exceeds
// max_increase. A rule with a window W breaches when the increases within the trailing window
// (now - W, now] exceed max_increase, where each poll's increase is taken as spread evenly over
// its poll: a poll wholly inside the window counts in full, one straddling its start counts in
// proportion to the overlap. So with polls no longer than W this is the sum of the window's
// increases, and with polls longer than W (a 1 s rate rule, 10 s polls) it is the poll's rate
// scaled to the window, increase * W / elapsed. Evenly spread, a poll ending just after the
// window's start adds only its share, so jittery polls near W do not count a poll twice.
class CounterJudge {
 public:
  // Rules that ValidateCounterRule rejects, and disabled ones, are left out of rules().
  explicit CounterJudge(std::vector<v1::CounterRule> rules, CounterJudgeOptions options = {});
  CounterJudge(CounterJudge&&) = default;
  CounterJudge& operator=(CounterJudge&&) = default;
  CounterJudge(const CounterJudge&) = delete;
  CounterJudge& operator=(const CounterJudge&) = delete;

  // One polled value. The first sample of a series is its baseline and breaches nothing. Windowed
  // rules are judged only on a sample that rose: a breach is an occurrence, reported at each poll
  // that rose while its window holds too much, not again while the counter stands still. A
  // counter no rule names is not remembered; nor is a subject over 256 bytes or holding a NUL. When
  // `now` is not after the previous sample only between-polls rules are judged: at the same time
  // the increase is kept for the windows; earlier (the clock origin moved) the series' window
  // history starts over from this sample.
  std::vector<CounterBreach> Observe(std::string_view subject, std::string_view counter,
                                     uint64_t value, absl::Duration now);
  // Drops every series of a subject (the device is gone; a new one starts from a baseline).
  void Forget(std::string_view subject);

  const std::vector<v1::CounterRule>& rules() const { return rules_; }
  size_t series() const { return lru_.size(); }
  uint64_t evicted() const { return evicted_; }
  // Stored increases of one series (0 when unknown): at most kMaxBuckets.
  size_t buckets(std::string_view subject, std::string_view counter) const;

  // At most this many stored increases per series; older ones merge into buckets of up to
  // 1/16 of the counter's longest window.
  static constexpr size_t kMaxBuckets = 32;

 private:
  struct Bucket {
    absl::Duration start;  // the increases happened in (start, end]; a point when start == end
    absl::Duration end;
    uint64_t sum = 0;
    bool wrapped = false;
    bool reset = false;
  };
  struct Series {
    std::string key;  // subject '\0' counter
    uint64_t value = 0;
    absl::Duration time;
    std::vector<Bucket> buckets;  // oldest first; only polls that rose
  };
  struct CounterRules {
    std::vector<const v1::CounterRule*> rules;
    absl::Duration longest = absl::ZeroDuration();  // 0: between-polls rules only
  };

  static void Merge(Bucket& into, const Bucket& b);
  void Trim(Series& s, absl::Duration now, const CounterRules& cr) const;
  bool JudgeWindow(const Series& s, const v1::CounterRule& rule, absl::Duration now,
                   CounterBreach& b) const;

  std::vector<v1::CounterRule> rules_;
  std::map<std::string, CounterRules, std::less<>> by_counter_;
  CounterJudgeOptions options_;
  std::list<Series> lru_;  // front: most recently observed
  std::map<std::string, std::list<Series>::iterator, std::less<>> index_;
  uint64_t evicted_ = 0;
};

// The finding of a breach: check "counter", code CounterRuleCode(rule), the rule's severity
// (unset: WARNING), repair and dry_run, a message such as "symbol_error rose by 1,234 in 1h (more
// than 120): <why>" and evidence such as "symbol_error +1234 over 3600 s (0.34/s); rule > 120 per
// 1h".
v1::Finding BreachFinding(const CounterBreach& b);

}  // namespace fabric
