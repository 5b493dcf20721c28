#include "agent/policy/health/counter_rules.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/numeric/int128.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace fabric {
namespace {

constexpr double kMaxWindowS = 7 * 86400.0;
constexpr size_t kMaxRules = 256;
constexpr size_t kMaxSubject = 256;

v1::CounterRule Rule(const char* counter, uint64_t max_increase, double window_s,
                     v1::Severity severity, v1::RepairAction repair, const char* why) {
  v1::CounterRule r;
  r.set_counter(counter);
  r.set_max_increase(max_increase);
  r.set_window_s(window_s);
  r.set_severity(severity);
  r.set_repair(repair);
  r.set_why(why);
  return r;
}

const std::vector<v1::CounterRule>* BuildDefaults() {
  constexpr v1::Severity kCrit = v1::SEVERITY_CRITICAL;
  constexpr v1::Severity kWarn = v1::SEVERITY_WARNING;
  constexpr v1::RepairAction kCable = v1::REPAIR_ACTION_RESEAT_CABLE;
  constexpr v1::RepairAction kSwitch = v1::REPAIR_ACTION_CHECK_SWITCH_PORT;
  constexpr v1::RepairAction kInspect = v1::REPAIR_ACTION_HARDWARE_INSPECTION;
  return new std::vector<v1::CounterRule>{
      // Fatal on any increase (NVSentinel): the lossless fabric's contract broke, a job failed.
      Rule("link_downed", 0, 0, kCrit, kSwitch,
           "the port's link went down: the queue pairs over it broke and a job using them failed"),
      Rule("excessive_buffer_overrun_errors", 0, 0, kCrit, kSwitch,
           "the receive buffer overflowed (the far end ignored flow control): a lossless drop"),
      Rule("local_link_integrity_errors", 0, 0, kCrit, kCable,
           "raw physical errors passed the LocalPhyErrors limit: the link is out of specification"),
      // CRITICAL because the connection is severed and the job fails, but nothing on this host
      // is broken: the peer posted no receive in time or died. The peer's own findings (or the
      // application) say why, so the repair is NONE.
      Rule("rnr_nak_retry_err", 0, 0, kCrit, v1::REPAIR_ACTION_NONE,
           "a queue pair ran out of receiver-not-ready retries and was severed: the peer posted "
           "no receive buffer in time or died; look at the peer and the application"),
      // Rates: normal in small numbers (PAM4 links always see raw bit errors).
      Rule("symbol_error", 10, 1, kWarn, kCable,
           "pre-FEC bit errors over 10 a second: the signal is degrading (cable, transceiver)"),
      Rule("symbol_error", 120, 3600, kCrit, kCable,
           "more than 120 symbol errors an hour breaks the IBTA bound of a 1e-12 bit error "
           "rate: the link is out of specification and FEC's margin is going"),
      Rule("link_error_recovery", 5, 60, kWarn, kCable,
           "the link retrained itself more than 5 times a minute; each retrain stalls traffic"),
      Rule("port_rcv_errors", 10, 1, kWarn, kCable,
           "more than 10 corrupt or malformed packets received a second, each one retransmitted"),
      Rule("local_ack_timeout_err", 1, 1, kWarn, kSwitch,
           "ACK timeouts over once a second: packets lost on the path (congestion, a bad link)"),
      Rule("port_xmit_discards", 100, 1, kWarn, kSwitch,
           "over 100 outgoing packets a second discarded: the link was down or got no credits"),
      Rule("roce_slow_restart", 10, 1, kWarn, kSwitch,
           "RoCE congestion control fell back to slow restart more than 10 times a second: "
           "flows oscillate after losses (a lossy path, PFC or ECN set wrong)"),
      Rule("carrier_changes", 2, 0, kWarn, kSwitch,
           "the netdev's carrier changed more than twice between polls: the link is flapping"),
      // PCIe AER totals of the function (aer_dev_{fatal,nonfatal,correctable}).
      Rule("aer_dev_fatal", 0, 0, kCrit, kInspect,
           "an uncorrectable fatal PCIe error: the link or device was reset, DMA in flight lost"),
      Rule("aer_dev_nonfatal", 0, 0, kWarn, kInspect,
           "an uncorrectable non-fatal PCIe error: a transaction lost while the link stayed up"),
      Rule("aer_dev_correctable", 100, 3600, kWarn, kInspect,
           "more than 100 corrected PCIe errors an hour: a marginal link (slot, riser, cable) "
           "that retrains silently and may drop to a lower width or speed"),
  };
}

bool SameKey(const v1::CounterRule& a, const v1::CounterRule& b) {
  return a.counter() == b.counter() && a.window_s() == b.window_s();
}

uint64_t SatAdd(uint64_t a, uint64_t b) {
  return a + b < a ? std::numeric_limits<uint64_t>::max() : a + b;
}

// subject '\0' counter: neither holds a NUL (Observe keeps no such subject).
std::string SeriesKey(std::string_view subject, std::string_view counter) {
  return std::string(subject).append(1, '\0').append(counter);
}

uint64_t Nanos(absl::Duration d) {
  return static_cast<uint64_t>(std::max<int64_t>(0, absl::ToInt64Nanoseconds(d)));
}

// "%.*f" without trailing zeros: "3600", "0.5", "10.1".
std::string Fixed(int decimals, double v) {
  std::string s = absl::StrFormat("%.*f", decimals, v);
  if (s.find('.') == std::string::npos) return s;
  s.erase(s.find_last_not_of('0') + 1);
  if (s.back() == '.') s.pop_back();
  return s;
}

std::string Seconds(absl::Duration d) { return Fixed(3, std::max(0.0, absl::ToDoubleSeconds(d))); }

// Two significant digits, at least one decimal, below 100 ("0.34", "0.0017", "10.1"); whole above.
std::string Rate(double r) {
  if (!(r > 0)) return "0";
  if (r >= 100) return Fixed(0, r);
  return Fixed(std::clamp(1 - static_cast<int>(std::floor(std::log10(r))), 1, 12), r);
}

std::string WithCommas(uint64_t v) {
  if (v < 1000) return absl::StrCat(v);
  return absl::StrFormat("%s,%03d", WithCommas(v / 1000), v % 1000);
}

// The rule's window as the code writes it ("1h", "90s"); "" for a between-polls rule.
std::string CompactWindow(double window_s) {
  if (!(window_s > 0)) return "";
  const int64_t us = std::max<int64_t>(1, std::llround(std::min(window_s * 1e6, 9e18)));
  static constexpr std::pair<int64_t, const char*> kUnits[] = {
      {86400000000, "d"}, {3600000000, "h"}, {60000000, "m"}, {1000000, "s"}, {1000, "ms"}};
  for (const auto& [size, unit] : kUnits) {
    if (us % size == 0) return absl::StrCat(us / size, unit);
  }
  return absl::StrCat(us, "us");
}

}  // namespace

const std::vector<v1::CounterRule>& DefaultCounterRules() {
  static const std::vector<v1::CounterRule>* const kRules = BuildDefaults();
  return *kRules;
}

std::vector<v1::CounterRule> EffectiveCounterRules(const v1::HealthConfig& cfg) {
  std::vector<v1::CounterRule> out;
  if (!cfg.no_default_rules()) out = DefaultCounterRules();
  for (const v1::CounterRule& r : cfg.counter_rules()) {
    auto it = std::find_if(out.begin(), out.end(),
                           [&](const v1::CounterRule& o) { return SameKey(o, r); });
    if (it != out.end()) it = out.erase(it);  // replaced in place, or disabled
    if (!r.disabled()) out.insert(it, r);
  }
  for (v1::CounterRule& r : out) {
    if (r.severity() == v1::SEVERITY_UNSPECIFIED) r.set_severity(v1::SEVERITY_WARNING);
  }
  return out;
}

absl::Status ValidateCounterRule(const v1::CounterRule& r) {
  const std::string& c = r.counter();
  const bool name_ok = !c.empty() && c.size() <= 64 && std::all_of(c.begin(), c.end(), [](char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_';
  });
  if (!name_ok) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "counter \"%s\": must be 1-64 characters of [a-z0-9_]", absl::CHexEscape(c.substr(0, 80))));
  }
  if (!std::isfinite(r.window_s()) || r.window_s() < 0 || r.window_s() > kMaxWindowS) {
    return absl::InvalidArgumentError(
        absl::StrFormat("window_s %g of counter %s: must be 0 (between polls) to 604800 (7 days)",
                        r.window_s(), c));
  }
  if (r.severity() != v1::SEVERITY_UNSPECIFIED && r.severity() != v1::SEVERITY_WARNING &&
      r.severity() != v1::SEVERITY_CRITICAL) {
    return absl::InvalidArgumentError(
        absl::StrFormat("severity %s (%d) of counter %s: must be WARNING or CRITICAL",
                        v1::Severity_Name(r.severity()), static_cast<int>(r.severity()), c));
  }
  if (!v1::RepairAction_IsValid(r.repair())) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "repair %d of counter %s: not a known repair action", static_cast<int>(r.repair()), c));
  }
  return absl::OkStatus();
}

absl::Status ValidateCounterRules(const v1::HealthConfig& cfg) {
  const auto& rules = cfg.counter_rules();
  if (static_cast<size_t>(rules.size()) > kMaxRules) {
    return absl::InvalidArgumentError(
        absl::StrFormat("counter_rules: %d rules, at most %d", rules.size(), kMaxRules));
  }
  for (int i = 0; i < rules.size(); ++i) {
    if (absl::Status s = ValidateCounterRule(rules[i]); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrFormat("counter_rules[%d]: %s", i, s.message()));
    }
    for (int j = 0; j < i; ++j) {
      if (SameKey(rules[j], rules[i])) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "counter_rules[%d]: counter %s with window_s %g repeats counter_rules[%d]", i,
            rules[i].counter(), rules[i].window_s(), j));
      }
    }
  }
  return absl::OkStatus();
}

std::string CounterRuleCode(const v1::CounterRule& r) {
  const std::string window = CompactWindow(r.window_s());
  return absl::StrCat("counter.", r.counter(), window.empty() ? "" : ".", window);
}

CounterDelta DeltaOf(uint64_t before, uint64_t after) {
  if (after >= before) return {after - before, false, false};
  constexpr uint64_t k32 = uint64_t{1} << 32;
  if (before < k32) {
    const uint64_t distance = k32 - before + after;  // after < before < 2^32: no overflow
    if (distance < (uint64_t{1} << 31)) return {distance, true, false};
  }
  return {after, false, true};
}

CounterJudge::CounterJudge(std::vector<v1::CounterRule> rules, CounterJudgeOptions options)
    : options_(options) {
  options_.max_series = std::max<size_t>(options_.max_series, 1);
  for (v1::CounterRule& r : rules) {
    if (!r.disabled() && ValidateCounterRule(r).ok()) rules_.push_back(std::move(r));
  }
  for (const v1::CounterRule& r : rules_) {
    CounterRules& cr = by_counter_[r.counter()];
    cr.rules.push_back(&r);
    cr.longest = std::max(cr.longest, absl::Seconds(r.window_s()));
  }
}

void CounterJudge::Merge(Bucket& into, const Bucket& b) {
  into.end = std::max(into.end, b.end);
  into.sum = SatAdd(into.sum, b.sum);
  into.wrapped |= b.wrapped;
  into.reset |= b.reset;
}

void CounterJudge::Trim(Series& s, absl::Duration now, const CounterRules& cr) const {
  // Gone: wholly before the longest window.
  const absl::Duration cutoff = now - cr.longest;
  auto keep = std::find_if(s.buckets.begin(), s.buckets.end(),
                           [&](const Bucket& b) { return b.end > cutoff; });
  s.buckets.erase(s.buckets.begin(), keep);
  // Over the cap: merge the oldest neighbours that together span at most 1/16 of the longest
  // window (old increases end up coarse, recent ones stay fine); failing that, the oldest pair,
  // the next to leave the window.
  const absl::Duration coarse = cr.longest / 16;
  while (s.buckets.size() > kMaxBuckets) {
    size_t pick = 0;
    for (size_t i = 0; i + 1 < s.buckets.size(); ++i) {
      if (s.buckets[i + 1].end - s.buckets[i].start <= coarse) {
        pick = i;
        break;
      }
    }
    Merge(s.buckets[pick], s.buckets[pick + 1]);
    s.buckets.erase(s.buckets.begin() + pick + 1);
  }
}

bool CounterJudge::JudgeWindow(const Series& s, const v1::CounterRule& rule, absl::Duration now,
                               CounterBreach& b) const {
  const absl::Duration cutoff = now - absl::Seconds(rule.window_s());
  uint64_t whole = 0;  // increases wholly inside the window
  // The one bucket straddling the window's start (buckets never overlap) counts
  // sum * overlap / length: kept as a fraction so that the bound is compared exactly.
  absl::uint128 part = 0;
  uint64_t part_len = 1;
  absl::Duration earliest = now;
  for (auto it = s.buckets.rbegin(); it != s.buckets.rend() && it->end > cutoff; ++it) {
    if (it->start >= cutoff) {
      whole = SatAdd(whole, it->sum);
    } else {
      part = absl::uint128(it->sum) * static_cast<uint64_t>(Nanos(it->end - cutoff));
      part_len = std::max<uint64_t>(1, Nanos(it->end - it->start));
    }
    b.increase = SatAdd(b.increase, it->sum);
    b.wrapped |= it->wrapped;
    b.reset |= it->reset;
    earliest = std::min(earliest, it->start);
  }
  b.over = now - earliest;
  return whole > rule.max_increase() ||
         part > absl::uint128(rule.max_increase() - whole) * part_len;
}

std::vector<CounterBreach> CounterJudge::Observe(std::string_view subject, std::string_view counter,
                                                 uint64_t value, absl::Duration now) {
  auto cr_it = by_counter_.find(counter);
  if (cr_it == by_counter_.end() || subject.size() > kMaxSubject ||
      subject.find('\0') != std::string_view::npos) {
    return {};
  }
  const CounterRules& cr = cr_it->second;
  std::string key = SeriesKey(subject, counter);
  auto idx = index_.find(key);
  if (idx == index_.end()) {
    if (lru_.size() >= options_.max_series) {
      index_.erase(lru_.back().key);
      lru_.pop_back();
      ++evicted_;
    }
    lru_.push_front(Series{key, value, now, {}});
    index_.emplace(std::move(key), lru_.begin());
    return {};  // the baseline
  }
  lru_.splice(lru_.begin(), lru_, idx->second);
  Series& s = *idx->second;
  const CounterDelta d = DeltaOf(s.value, value);
  const absl::Duration elapsed = now - s.time;
  s.value = value;
  s.time = now;

  std::vector<CounterBreach> out;
  for (const v1::CounterRule* r : cr.rules) {
    if (r->window_s() != 0 || d.increase <= r->max_increase()) continue;
    out.push_back(CounterBreach{r, std::string(subject), std::string(counter), d.increase,
                                std::max(elapsed, absl::ZeroDuration()), 0, d.wrapped, d.reset});
  }
  if (cr.longest > absl::ZeroDuration()) {
    const Bucket rise{now - elapsed, now, d.increase, d.wrapped, d.reset};
    if (elapsed < absl::ZeroDuration()) {
      s.buckets.clear();  // another timeline: its history cannot be placed in this one
    } else if (d.increase > 0) {
      if (elapsed == absl::ZeroDuration() && !s.buckets.empty() && s.buckets.back().end == now) {
        Merge(s.buckets.back(), rise);  // the same poll time: the same poll
      } else {
        s.buckets.push_back(rise);
      }
      Trim(s, now, cr);
    }
    // Judged when the counter rose: a breach is an occurrence, not repeated while it stands still.
    if (elapsed > absl::ZeroDuration() && d.increase > 0) {
      for (const v1::CounterRule* r : cr.rules) {
        if (r->window_s() == 0) continue;
        CounterBreach candidate{r, std::string(subject), std::string(counter)};
        if (JudgeWindow(s, *r, now, candidate)) out.push_back(std::move(candidate));
      }
    }
  }
  for (CounterBreach& b : out) {
    const double secs = absl::ToDoubleSeconds(b.over);
    b.per_second = secs > 0 ? static_cast<double>(b.increase) / secs : 0;
  }
  return out;
}

void CounterJudge::Forget(std::string_view subject) {
  const std::string prefix = SeriesKey(subject, "");
  auto it = index_.lower_bound(prefix);
  while (it != index_.end() && absl::StartsWith(it->first, prefix)) {
    lru_.erase(it->second);
    it = index_.erase(it);
  }
}

size_t CounterJudge::buckets(std::string_view subject, std::string_view counter) const {
  auto it = index_.find(SeriesKey(subject, counter));
  return it == index_.end() ? 0 : it->second->buckets.size();
}

v1::Finding BreachFinding(const CounterBreach& b) {
  static const v1::CounterRule kEmpty;
  const v1::CounterRule& r = b.rule != nullptr ? *b.rule : kEmpty;
  v1::Finding f;
  f.set_check("counter");
  f.set_code(CounterRuleCode(r));
  f.set_subject(b.subject);
  f.set_severity(r.severity() == v1::SEVERITY_UNSPECIFIED ? v1::SEVERITY_WARNING : r.severity());
  f.set_repair(r.repair());
  f.set_dry_run(r.dry_run());
  const std::string window = CompactWindow(r.window_s());
  std::string message = absl::StrCat(b.counter, " rose by ", WithCommas(b.increase));
  if (window.empty()) {
    absl::StrAppend(&message, " since the last poll");
    if (r.max_increase() > 0) absl::StrAppend(&message, " (more than ", r.max_increase(), ")");
  } else if (b.over > absl::Seconds(r.window_s())) {  // a rate over a longer poll
    absl::StrAppend(&message, " in ", Seconds(b.over), " s (", Rate(b.per_second * r.window_s()),
                    " per ", window, ", more than ", r.max_increase(), ")");
  } else {
    absl::StrAppend(&message, " in ", window, " (more than ", r.max_increase(), ")");
  }
  if (!r.why().empty()) absl::StrAppend(&message, ": ", r.why());
  f.set_message(std::move(message));
  std::string evidence = absl::StrCat(b.counter, " +", b.increase, " over ", Seconds(b.over), " s");
  if (b.over > absl::ZeroDuration()) absl::StrAppend(&evidence, " (", Rate(b.per_second), "/s)");
  absl::StrAppend(&evidence, "; rule > ", r.max_increase(),
                  window.empty() ? " between polls" : absl::StrCat(" per ", window));
  if (b.wrapped) absl::StrAppend(&evidence, " (the counter wrapped at 32 bits)");
  if (b.reset) absl::StrAppend(&evidence, " (the counter was reset)");
  f.set_evidence(std::move(evidence));
  return f;
}

}  // namespace fabric
