#include "agent/policy/health/memory.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/common/excerpt.h"

namespace fabric {
namespace {

using v1::Finding;

constexpr int64_t kMaxNs = std::numeric_limits<int64_t>::max();
// A state file is a few MB at the caps; anything far larger is not ours.
constexpr size_t kMaxStateBytes = 64 << 20;
// Rule thresholds beyond this would make the per-series cap (which must hold them) unbounded.
constexpr uint32_t kMaxThreshold = 65535;
// The range google.protobuf.Timestamp allows: 0001-01-01 to 9999-12-31.
constexpr int64_t kMinTimestampS = -62135596800;
constexpr int64_t kMaxTimestampS = 253402300799;

// Debian's abseil has its own string_view.
absl::string_view AV(std::string_view s) { return absl::string_view(s.data(), s.size()); }

int64_t Ns(absl::Duration d) { return absl::ToInt64Nanoseconds(d); }  // saturates
// The boot clock never reads below zero; a caller's bad clock must not make a state that no
// Load accepts.
int64_t NowNs(const MemoryClock& now) { return std::max<int64_t>(Ns(now.boot), 0); }

// Saturating: options may carry durations of centuries.
int64_t AddNs(int64_t a, int64_t b) {
  if (b > 0 && a > kMaxNs - b) return kMaxNs;
  if (b < 0 && a < std::numeric_limits<int64_t>::min() - b)
    return std::numeric_limits<int64_t>::min();
  return a + b;
}

absl::Duration PositiveOr(absl::Duration d, absl::Duration fallback) {
  return d > absl::ZeroDuration() ? d : fallback;
}

absl::Duration SecondsOr(double s, absl::Duration fallback) {
  return std::isfinite(s) && s > 0 ? absl::Seconds(s) : fallback;
}

// The wall time of boot time `t_ns`, as now's wall clock sees it.
void SetWall(int64_t t_ns, const MemoryClock& now, google::protobuf::Timestamp* ts) {
  const absl::Time t = now.wall - (now.boot - absl::Nanoseconds(t_ns));
  int64_t s = absl::ToUnixSeconds(t);  // rounds towards the past: the rest is in [0, 1s)
  int64_t nanos = absl::ToInt64Nanoseconds(t - absl::FromUnixSeconds(s));
  if (s < kMinTimestampS || s > kMaxTimestampS || nanos < 0 || nanos > 999999999) {
    s = std::clamp(s, kMinTimestampS, kMaxTimestampS);
    nanos = 0;
  }
  ts->set_seconds(s);
  ts->set_nanos(static_cast<int32_t>(nanos));
}

// How a count of occurrences reads: "6 flaps in 24h", "at least 256 times in 1h".
std::string CountText(uint32_t n, bool at_least, std::string_view one, std::string_view many,
                      absl::Duration window) {
  return absl::StrFormat("%s%d %s in %s", at_least ? "at least " : "", n, n == 1 ? one : many,
                         absl::FormatDuration(window));
}

void LeaveOutTimes(Finding* f) {
  f->clear_first_seen();
  f->clear_last_seen();
  f->clear_sticky_until();
  f->clear_cleared();
}

}  // namespace

MemoryOptions MemoryOptionsFrom(const v1::HealthConfig& config) {
  MemoryOptions o;
  o.sticky = SecondsOr(config.sticky_s(), o.sticky);
  if (config.flap_max() > 0) o.flap_max = config.flap_max();
  o.flap_window = SecondsOr(config.flap_window_s(), o.flap_window);
  if (config.escalate_after() > 0) o.escalate_after = config.escalate_after();
  o.escalate_window = SecondsOr(config.escalate_window_s(), o.escalate_window);
  o.dry_run_codes.assign(config.dry_run_codes().begin(), config.dry_run_codes().end());
  return o;
}

FindingMemory::FindingMemory(MemoryOptions options) : options_(std::move(options)) {
  MemoryOptions& o = options_;
  o.sticky = std::max(o.sticky, absl::ZeroDuration());
  // A zero window would count nothing, not even the occurrence at hand.
  o.flap_window = PositiveOr(o.flap_window, absl::Nanoseconds(1));
  o.escalate_window = PositiveOr(o.escalate_window, absl::Nanoseconds(1));
  o.flap_max = std::min(o.flap_max, kMaxThreshold);
  o.escalate_after = std::clamp<uint32_t>(o.escalate_after, 1, kMaxThreshold);
  o.max_findings = std::max<size_t>(o.max_findings, 1);
  o.max_series = std::max<size_t>(o.max_series, 1);
  o.max_events_per_series =
      std::max<size_t>({o.max_events_per_series, size_t{o.flap_max} + 1, size_t{o.escalate_after}});
  dry_run_codes_.insert(o.dry_run_codes.begin(), o.dry_run_codes.end());
}

bool FindingMemory::EvictLess::operator()(const Map::iterator& a, const Map::iterator& b) const {
  if (a->second.order != b->second.order) return a->second.order < b->second.order;
  return a->first < b->first;
}

FindingMemory::Key FindingMemory::KeyOf(std::string_view source, const Finding& f) {
  return Key(std::string(source), f.code(), f.subject(),
             f.code().empty() ? absl::StrCat(f.check(), "\n", f.message()) : std::string());
}

std::string FindingMemory::SeriesKey(const Key& key) {
  const auto& [source, code, subject, extra] = key;
  std::string out = absl::StrCat("repeat ", source, " ", code, " ", subject);
  if (!extra.empty()) absl::StrAppend(&out, " ", extra);
  return out;
}

absl::Duration FindingMemory::WindowOf(std::string_view series_key) const {
  return series_key.substr(0, 5) == "flap " ? options_.flap_window : options_.escalate_window;
}

int64_t FindingMemory::StickyUntil(const Key& key, const Entry& e) const {
  int64_t until = AddNs(e.cleared_ns, Ns(options_.sticky));
  // Flapping stays while the window holds more than flap_max flaps: until the (flap_max+1)-th
  // newest leaves it.
  if (std::get<0>(key) == kFlapSource && std::get<1>(key) == kFlappingCode) {
    auto s = series_index_.find(absl::StrCat("flap ", std::get<2>(key)));
    if (s != series_index_.end() && s->second->at_ns.size() > options_.flap_max) {
      const auto& at = s->second->at_ns;
      until =
          std::max(until, AddNs(at[at.size() - 1 - options_.flap_max], Ns(options_.flap_window)));
    }
  }
  return until;
}

bool FindingMemory::Expired(const Key& key, const Entry& e, int64_t now_ns) const {
  return e.cleared_ns >= 0 && now_ns >= StickyUntil(key, e);
}

void FindingMemory::Index(Map::iterator it) {
  Entry& e = it->second;
  e.order = e.cleared_ns >= 0 ? std::make_pair(0, e.cleared_ns) : std::make_pair(1, e.last_ns);
  evict_order_.insert(it);
}

void FindingMemory::Erase(Map::iterator it) {
  evict_order_.erase(it);
  entries_.erase(it);
}

FindingMemory::Map::iterator FindingMemory::Record(Key key, Finding f, int64_t now_ns, bool event) {
  auto it = entries_.find(key);
  if (it != entries_.end() && Expired(it->first, it->second, now_ns)) {
    Erase(it);  // Its sticky time is over: this is a new finding.
    it = entries_.end();
  }
  if (it == entries_.end()) {
    if (entries_.size() >= options_.max_findings) {
      Erase(*evict_order_.begin());
      ++evicted_;
    }
    it = entries_.emplace(std::move(key), Entry{}).first;
    it->second.first_ns = it->second.last_ns = now_ns;
  } else {
    evict_order_.erase(it);  // Its order changes below.
  }
  Entry& e = it->second;
  LeaveOutTimes(&f);
  e.finding = std::move(f);
  e.last_ns = std::max(e.last_ns, now_ns);
  e.cleared_ns = event ? e.last_ns : -1;
  e.event = event;
  Index(it);
  return it;
}

uint32_t FindingMemory::Append(const std::string& key, int64_t at, absl::Duration window,
                               bool* at_least) {
  auto found = series_index_.find(key);
  SeriesList::iterator s;
  if (found == series_index_.end()) {
    if (series_.size() >= options_.max_series) {
      series_index_.erase(series_.back().key);
      series_.pop_back();
      ++series_evicted_;
    }
    series_.push_front(Series{key, {}});
    s = series_.begin();
    series_index_.emplace(key, s);
  } else {
    s = found->second;
    series_.splice(series_.begin(), series_, s);  // Most recently appended first.
  }
  std::deque<int64_t>& q = s->at_ns;
  if (!q.empty()) at = std::max(at, q.back());  // Keep the series sorted.
  q.push_back(at);
  // Within the window: at - window < t <= at. Older ones never count again.
  const int64_t from = AddNs(at, -Ns(window));
  while (!q.empty() && q.front() <= from) q.pop_front();
  while (q.size() > options_.max_events_per_series) q.pop_front();
  // A full series may have dropped some within the window.
  *at_least = q.size() >= options_.max_events_per_series;
  return static_cast<uint32_t>(q.size());
}

void FindingMemory::Update(std::string_view source, std::vector<Finding> now_true,
                           MemoryClock now) {
  const int64_t now_ns = NowNs(now);
  std::set<Key> seen;
  for (Finding& f : now_true) {
    Key key = KeyOf(source, f);
    seen.insert(Record(std::move(key), std::move(f), now_ns, false)->first);
  }
  for (auto it = entries_.lower_bound(Key(std::string(source), "", "", ""));
       it != entries_.end() && std::get<0>(it->first) == source; ++it) {
    Entry& e = it->second;
    if (e.event || e.cleared_ns >= 0 || seen.count(it->first) > 0) continue;
    evict_order_.erase(it);
    e.cleared_ns = std::max(now_ns, e.last_ns);
    Index(it);
  }
}

void FindingMemory::Event(std::string_view source, Finding f, MemoryClock now) {
  const int64_t now_ns = NowNs(now);
  Key key = KeyOf(source, f);
  bool at_least = false;
  const uint32_t n = Append(SeriesKey(key), now_ns, options_.escalate_window, &at_least);
  f.set_occurrences(n);
  if (f.severity() == v1::SEVERITY_WARNING && n >= options_.escalate_after) {
    f.set_severity(v1::SEVERITY_CRITICAL);
    const std::string note = absl::StrCat(
        "escalated: ", CountText(n, at_least, "time", "times", options_.escalate_window));
    f.set_message(f.message().empty() ? note : absl::StrCat(f.message(), " (", note, ")"));
  }
  Record(std::move(key), std::move(f), now_ns, true);
}

uint32_t FindingMemory::Flap(std::string_view subject, std::string_view evidence, MemoryClock now) {
  const int64_t now_ns = NowNs(now);
  bool at_least = false;
  const uint32_t n =
      Append(absl::StrCat("flap ", AV(subject)), now_ns, options_.flap_window, &at_least);
  const bool flapping = n > options_.flap_max;
  const std::string count = CountText(n, at_least, "flap", "flaps", options_.flap_window);
  Finding f;
  f.set_severity(flapping ? v1::SEVERITY_CRITICAL : v1::SEVERITY_WARNING);
  f.set_check("port_state");
  f.set_subject(std::string(subject));
  f.set_code(std::string(flapping ? kFlappingCode : kFlapCode));
  f.set_message(flapping
                    ? absl::StrFormat("link flapping: %s (more than %d)", count, options_.flap_max)
                    : absl::StrCat("link flapped: ", count));
  f.set_evidence(absl::StrCat(count, ", the last at ",
                              absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", now.wall, absl::UTCTimeZone()),
                              evidence.empty() ? "" : ": ", AV(evidence)));
  f.set_repair(v1::REPAIR_ACTION_CHECK_SWITCH_PORT);
  f.set_occurrences(n);
  // One of the two codes per subject; the other's history carries over.
  int64_t first_ns = now_ns;
  const Key other(std::string(kFlapSource), std::string(flapping ? kFlapCode : kFlappingCode),
                  std::string(subject), "");
  if (auto o = entries_.find(other); o != entries_.end()) {
    if (!Expired(o->first, o->second, now_ns)) first_ns = o->second.first_ns;
    Erase(o);
  }
  Key key = KeyOf(kFlapSource, f);
  auto it = Record(std::move(key), std::move(f), now_ns, true);
  it->second.first_ns = std::min(it->second.first_ns, first_ns);  // not part of the order
  return n;
}

std::vector<Finding> FindingMemory::Findings(MemoryClock now) {
  const int64_t now_ns = NowNs(now);
  for (auto it = entries_.begin(); it != entries_.end();) {
    auto next = std::next(it);
    if (Expired(it->first, it->second, now_ns)) Erase(it);
    it = next;
  }
  // Series with nothing left in their window count nothing and hold nothing.
  for (auto s = series_.begin(); s != series_.end();) {
    auto next = std::next(s);
    if (s->at_ns.empty() || s->at_ns.back() <= AddNs(now_ns, -Ns(WindowOf(s->key)))) {
      series_index_.erase(s->key);
      series_.erase(s);
    }
    s = next;
  }
  std::vector<Finding> out;
  out.reserve(entries_.size());
  for (const auto& [key, e] : entries_) {
    Finding& f = out.emplace_back(e.finding);
    SetWall(e.first_ns, now, f.mutable_first_seen());
    SetWall(e.last_ns, now, f.mutable_last_seen());
    if (e.cleared_ns >= 0) {
      f.set_cleared(true);
      SetWall(StickyUntil(key, e), now, f.mutable_sticky_until());
    }
    if (dry_run_codes_.count(f.code()) > 0) f.set_dry_run(true);
  }
  return out;
}

v1::HealthMemoryState FindingMemory::Save(std::string_view boot_id) const {
  v1::HealthMemoryState state;
  state.set_version(kHealthMemoryVersion);
  state.set_boot_id(std::string(boot_id));
  for (const auto& [key, e] : entries_) {
    v1::RememberedFinding* r = state.add_findings();
    r->set_source(std::get<0>(key));
    *r->mutable_finding() = e.finding;
    r->set_first_seen_ns(e.first_ns);
    r->set_last_seen_ns(e.last_ns);
    // 0 means "not cleared" in the file; a boot clock at exactly 0 is one nanosecond later.
    if (e.cleared_ns >= 0) r->set_cleared_ns(std::max<int64_t>(e.cleared_ns, 1));
    r->set_event(e.event);
  }
  std::vector<const Series*> sorted;
  sorted.reserve(series_.size());
  for (const Series& s : series_) sorted.push_back(&s);
  std::sort(sorted.begin(), sorted.end(),
            [](const Series* a, const Series* b) { return a->key < b->key; });
  for (const Series* s : sorted) {
    v1::EventSeries* out = state.add_events();
    out->set_key(s->key);
    out->mutable_at_ns()->Add(s->at_ns.begin(), s->at_ns.end());
  }
  return state;
}

void FindingMemory::Clear() {
  evict_order_.clear();
  entries_.clear();
  series_index_.clear();
  series_.clear();
}

absl::StatusOr<FindingMemory::Loaded> FindingMemory::Load(const v1::HealthMemoryState& state,
                                                          std::string_view boot_id,
                                                          MemoryClock now) {
  Clear();
  auto fail = [this](std::string what) {
    Clear();
    return absl::InvalidArgumentError(absl::StrCat("health memory state: ", what));
  };
  if (state.version() != kHealthMemoryVersion) {
    return fail(absl::StrFormat("unknown version %d (this agent reads %d)", state.version(),
                                kHealthMemoryVersion));
  }
  if (state.boot_id() != boot_id) return Loaded{true};  // A reboot starts clean.
  if (static_cast<size_t>(state.findings_size()) > options_.max_findings) {
    return fail(absl::StrFormat("%d findings, more than the %d kept", state.findings_size(),
                                options_.max_findings));
  }
  if (static_cast<size_t>(state.events_size()) > options_.max_series) {
    return fail(absl::StrFormat("%d event series, more than the %d kept", state.events_size(),
                                options_.max_series));
  }
  const int64_t now_ns = NowNs(now);
  for (int i = 0; i < state.findings_size(); ++i) {
    const v1::RememberedFinding& r = state.findings(i);
    const std::string where = absl::StrFormat("finding %d", i);
    if (r.source().empty()) return fail(where + " has no source");
    if (!r.has_finding()) return fail(where + " has no finding");
    const Finding& f = r.finding();
    if (f.code().empty() && f.check().empty()) return fail(where + " has neither code nor check");
    const std::string name = absl::StrCat(where, " (", Excerpt(r.source()), " ",
                                          Excerpt(f.code().empty() ? f.check() : f.code()), " ",
                                          Excerpt(f.subject()), ")");
    const int64_t first = r.first_seen_ns(), last = r.last_seen_ns(), cleared = r.cleared_ns();
    if (first < 0 || first > last) {
      return fail(absl::StrFormat("%s: first seen %d ns, last seen %d ns", name, first, last));
    }
    if (last > now_ns || cleared > now_ns) {
      return fail(
          absl::StrFormat("%s: seen or cleared after now (%d ns since boot)", name, now_ns));
    }
    if (cleared != 0 && cleared < last) {
      return fail(
          absl::StrFormat("%s: cleared at %d ns, before last seen at %d ns", name, cleared, last));
    }
    if (r.event() && cleared == 0) return fail(name + ": an event that never cleared");
    Key key = KeyOf(r.source(), f);
    if (entries_.count(key) > 0) return fail(name + " is a duplicate");
    auto it = entries_.emplace(std::move(key), Entry{}).first;
    Entry& e = it->second;
    e.finding = f;
    LeaveOutTimes(&e.finding);
    e.first_ns = first;
    e.last_ns = last;
    e.cleared_ns = cleared != 0 ? cleared : -1;
    e.event = r.event();
    Index(it);
  }
  std::vector<const v1::EventSeries*> series;
  for (int i = 0; i < state.events_size(); ++i) {
    const v1::EventSeries& s = state.events(i);
    const std::string name = absl::StrFormat("event series %d (%s)", i, Excerpt(s.key()));
    if (s.key().empty()) return fail(name + " has no key");
    if (static_cast<size_t>(s.at_ns_size()) > options_.max_events_per_series) {
      return fail(absl::StrFormat("%s: %d times, more than the %d kept", name, s.at_ns_size(),
                                  options_.max_events_per_series));
    }
    for (int j = 0; j < s.at_ns_size(); ++j) {
      const int64_t t = s.at_ns(j);
      if (t < 0 || t > now_ns || (j > 0 && t < s.at_ns(j - 1))) {
        return fail(absl::StrFormat("%s: time %d (%d ns) out of order or after now (%d ns)", name,
                                    j, t, now_ns));
      }
    }
    if (series_index_.count(s.key()) > 0) return fail(name + " is a duplicate");
    series_index_.emplace(s.key(), series_.end());
    series.push_back(&s);
  }
  // The most recently appended first, as Append keeps them.
  auto newest = [](const v1::EventSeries* s) {
    return s->at_ns_size() > 0 ? s->at_ns(s->at_ns_size() - 1) : int64_t{-1};
  };
  std::stable_sort(series.begin(), series.end(),
                   [&](const auto* a, const auto* b) { return newest(a) > newest(b); });
  for (const v1::EventSeries* s : series) {
    series_.push_back(Series{s->key(), std::deque<int64_t>(s->at_ns().begin(), s->at_ns().end())});
    series_index_[s->key()] = std::prev(series_.end());
  }
  return Loaded{false};
}

absl::StatusOr<v1::HealthMemoryState> FindingMemory::ParseState(std::string_view bytes) {
  if (bytes.size() > kMaxStateBytes) {
    return absl::InvalidArgumentError(absl::StrFormat("health memory state: %d bytes, more than %d",
                                                      bytes.size(), kMaxStateBytes));
  }
  v1::HealthMemoryState state;
  if (!state.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "health memory state: %d bytes that are not a HealthMemoryState", bytes.size()));
  }
  return state;
}

}  // namespace fabric
