// The health monitor's memory of findings: when each was first and last seen, how long it stays
// after its cause clears (sticky), how often an event or a link flap happened within a window, and
// a WARNING that repeats becoming CRITICAL. An SRE trusts a verdict that remembers: a port that
// went down and came back a minute ago is still worth a look. Times are CLOCK_BOOTTIME, so a
// wall-clock jump changes nothing but the displayed timestamps; the memory is saved under the
// state directory so that an agent restart forgets nothing, while a reboot (another boot ID)
// starts clean. Pure and bounded: the caller passes the clock and does the file I/O. Not
// thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "fabric/v1/health.pb.h"

namespace fabric {

inline constexpr uint32_t kHealthMemoryVersion = 1;
// The source of Flap's findings, and their codes: CRITICAL above flap_max flaps in the window,
// WARNING at or below it.
inline constexpr std::string_view kFlapSource = "flap";
inline constexpr std::string_view kFlappingCode = "port_state.flapping";
inline constexpr std::string_view kFlapCode = "port_state.flap";

struct MemoryOptions {
  absl::Duration sticky = absl::Minutes(10);  // gpud keeps a cleared finding 10 minutes
  // Azure: more than 5 link flaps in 24 hours is a fault.
  uint32_t flap_max = 5;
  absl::Duration flap_window = absl::Hours(24);
  // NVSentinel: a WARNING seen 3 times within an hour is CRITICAL.
  uint32_t escalate_after = 3;
  absl::Duration escalate_window = absl::Hours(1);
  std::vector<std::string> dry_run_codes;  // Reported, but never raise the verdict.
  size_t max_findings = 4096;
  size_t max_series = 4096;
  // Raised to at least flap_max + 1 and escalate_after, so that both rules can fire (those two
  // are capped at 65535).
  size_t max_events_per_series = 256;
};

// The options of the `health` config section; a zero (or negative, or not finite) value takes
// the default above.
MemoryOptions MemoryOptionsFrom(const v1::HealthConfig& config);

struct MemoryClock {
  absl::Duration boot;  // CLOCK_BOOTTIME: since boot, never jumps
  absl::Time wall;      // the wall clock at the same instant, for display only
};

class FindingMemory {
 public:
  explicit FindingMemory(MemoryOptions options);

  // The complete set of state findings of one source ("inventory", "pcie") true now. A finding is
  // keyed by (source, code, subject); one without a code by its check and message instead. New:
  // first seen now. Still there: last seen now, content as reported now. Gone: cleared now and
  // kept for `sticky`. Back before that ends: the same finding continues (first seen kept).
  void Update(std::string_view source, std::vector<v1::Finding> now_true, MemoryClock now);

  // One occurrence (a counter breach, a kernel log line): seen now and cleared at once (an event
  // has no lasting cause), so it stays `sticky` after its last occurrence. Its occurrences are
  // the Event calls of its key within escalate_window; a WARNING seen escalate_after times within
  // the window is reported CRITICAL, its message ending "(escalated: N times in 1h)".
  void Event(std::string_view source, v1::Finding f, MemoryClock now);

  // A link flap of `subject` (a port leaving ACTIVE, a carrier change), counted over
  // flap_window. More than flap_max makes a CRITICAL kFlappingCode finding (repair
  // CHECK_SWITCH_PORT, evidence "6 flaps in 24h, the last at <UTC time>: <evidence>") that stays
  // while the window still holds more than flap_max flaps and at least `sticky` after the last;
  // fewer make a WARNING kFlapCode. A subject has one of the two at a time. Returns the flaps
  // within the window (at most max_events_per_series are kept: then there were at least as many).
  uint32_t Flap(std::string_view subject, std::string_view evidence, MemoryClock now);

  // What to report now, expired findings dropped first: each with first_seen, last_seen, and
  // once cleared, cleared and sticky_until (wall times: now.wall - (now.boot - t)); dry_run when
  // it was reported so or its code is in dry_run_codes. Ordered by (source, code, subject).
  std::vector<v1::Finding> Findings(MemoryClock now);

  // The memory as the state file keeps it (findings without their timestamps, which follow from
  // the boot times beside them; series sorted by key).
  v1::HealthMemoryState Save(std::string_view boot_id) const;

  struct Loaded {
    bool reset = false;  // the state was of another boot: the memory starts empty
  };
  // Replaces the memory with a saved state. A state of another boot loads empty with reset. A
  // malformed one (unknown version, times in the future of `now` or out of order, a finding
  // without its key, duplicate keys, more entries than the caps) is an InvalidArgument naming
  // what is wrong, and the memory is left empty: the caller reports it and starts afresh.
  absl::StatusOr<Loaded> Load(const v1::HealthMemoryState& state, std::string_view boot_id,
                              MemoryClock now);

  // The bytes of a state file (binary proto); InvalidArgument when they are not one.
  static absl::StatusOr<v1::HealthMemoryState> ParseState(std::string_view bytes);

  size_t size() const { return entries_.size(); }  // findings remembered, expired ones included
  size_t series() const { return series_index_.size(); }
  uint64_t evicted() const { return evicted_; }                // findings dropped for max_findings
  uint64_t series_evicted() const { return series_evicted_; }  // series dropped for max_series
  const MemoryOptions& options() const { return options_; }

 private:
  // (source, code, subject, check and message when the code is empty)
  using Key = std::tuple<std::string, std::string, std::string, std::string>;
  struct Entry;
  using Map = std::map<Key, Entry>;
  struct Entry {
    v1::Finding finding;  // as last reported, timestamps left out
    int64_t first_ns = 0;
    int64_t last_ns = 0;
    int64_t cleared_ns = -1;  // -1: the cause is still there
    bool event = false;
    std::pair<int, int64_t> order;  // its place in evict_order_ while indexed
  };
  struct EvictLess {
    bool operator()(const Map::iterator& a, const Map::iterator& b) const;
  };
  struct Series {
    std::string key;
    std::deque<int64_t> at_ns;  // oldest first
  };
  using SeriesList = std::list<Series>;  // front: most recently appended

  static Key KeyOf(std::string_view source, const v1::Finding& f);
  static std::string SeriesKey(const Key& key);
  int64_t StickyUntil(const Key& key, const Entry& e) const;
  bool Expired(const Key& key, const Entry& e, int64_t now_ns) const;
  Map::iterator Record(Key key, v1::Finding f, int64_t now_ns, bool event);
  void Index(Map::iterator it);
  void Erase(Map::iterator it);
  // Appends `at` to the series `key` and returns the times within `window` before it.
  uint32_t Append(const std::string& key, int64_t at, absl::Duration window, bool* at_least);
  absl::Duration WindowOf(std::string_view series_key) const;
  void Clear();

  MemoryOptions options_;
  std::set<std::string, std::less<>> dry_run_codes_;
  Map entries_;
  // Eviction order: cleared ones first, oldest cleared first; then the least recently seen.
  std::set<Map::iterator, EvictLess> evict_order_;
  SeriesList series_;
  std::unordered_map<std::string, SeriesList::iterator> series_index_;
  uint64_t evicted_ = 0;
  uint64_t series_evicted_ = 0;
};

}  // namespace fabric
