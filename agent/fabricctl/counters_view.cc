#include "agent/fabricctl/counters_view.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/fabricctl/render.h"
#include "agent/publish/metrics/port_counters.h"

namespace fabric::ctl {
namespace {

using Values = google::protobuf::RepeatedPtrField<v1::CounterValue>;

// The two lists of a port, with the directory each comes from (its rows' prefix).
struct List {
  const char* dir;
  Values* (*get)(v1::PortCounterSet*);
  const Values& (*read)(const v1::PortCounterSet&);
};
const List kLists[] = {
    {"counters", [](v1::PortCounterSet* p) { return p->mutable_counters(); },
     [](const v1::PortCounterSet& p) -> const Values& { return p.counters(); }},
    {"hw_counters", [](v1::PortCounterSet* p) { return p->mutable_hw_counters(); },
     [](const v1::PortCounterSet& p) -> const Values& { return p.hw_counters(); }},
};

// Whether a rate of the file means anything: hw_counters/ levels and settings are no counts.
bool Counts(std::string_view dir, std::string_view name) {
  return dir == "counters" || !(metrics::IsHwLevel(name) || metrics::IsHwSetting(name));
}

std::string PortName(const v1::PortCounterSet& p) {
  return absl::StrCat(p.device(), ":", p.port());
}

absl::Time TimeOf(const google::protobuf::Timestamp& t) {
  return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
}

// Counts per second as the table prints them: whole above 100, else with decimals (a few error
// counts over a second are worth seeing as 0.5); no change is a plain 0.
std::string Rate(double v) {
  if (v == 0) return "0";
  if (v >= 100) return absl::StrFormat("%.0f", v);
  return absl::StrFormat("%.2f", v);
}

}  // namespace

double DataWordsToGbps(double words_per_second) { return words_per_second * 4 * 8 / 1e9; }

v1::PortCountersResponse WithRates(const v1::PortCountersResponse& first,
                                   const v1::PortCountersResponse& second,
                                   absl::Duration requested) {
  v1::PortCountersResponse out = second;
  double seconds = absl::ToDoubleSeconds(requested);
  if (first.has_read_at() && second.has_read_at()) {
    const double measured =
        absl::ToDoubleSeconds(TimeOf(second.read_at()) - TimeOf(first.read_at()));
    if (measured > 0) seconds = measured;
  }
  if (!(seconds > 0)) return out;
  out.set_interval_seconds(seconds);
  std::map<std::string, const v1::PortCounterSet*> before;
  for (const v1::PortCounterSet& p : first.ports()) before[PortName(p)] = &p;
  for (v1::PortCounterSet& p : *out.mutable_ports()) {
    auto was = before.find(PortName(p));
    if (was == before.end()) continue;
    for (const List& list : kLists) {
      std::map<std::string, uint64_t> old;
      for (const v1::CounterValue& c : list.read(*was->second)) old[c.name()] = c.value();
      for (v1::CounterValue& c : *list.get(&p)) {
        auto o = old.find(c.name());
        if (o == old.end() || !Counts(list.dir, c.name())) continue;
        if (c.value() < o->second) {
          out.add_notes(absl::StrCat(PortName(p), " ", list.dir, "/", c.name(), " went backwards (",
                                     o->second, " -> ", c.value(),
                                     "): reset between the readings, no rate"));
          continue;
        }
        c.set_per_second(static_cast<double>(c.value() - o->second) / seconds);
      }
    }
  }
  return out;
}

std::string RenderCounters(const v1::PortCountersResponse& r, bool all) {
  const bool rates = r.interval_seconds() > 0;
  std::string out;
  int hidden_total = 0;
  for (const v1::PortCounterSet& p : r.ports()) {
    std::vector<std::vector<std::string>> rows;
    rows.push_back({"COUNTER", "VALUE"});
    if (rates) rows.back().push_back("PER-SECOND");
    int hidden = 0;
    std::string traffic;
    for (const List& list : kLists) {
      for (const v1::CounterValue& c : list.read(p)) {
        const bool counts = Counts(list.dir, c.name());
        if (rates && std::string_view(list.dir) == "counters" && c.has_per_second()) {
          if (c.name() == "port_rcv_data") {
            absl::StrAppend(&traffic,
                            absl::StrFormat("  rx %.2f Gb/s", DataWordsToGbps(c.per_second())));
          } else if (c.name() == "port_xmit_data") {
            absl::StrAppend(&traffic,
                            absl::StrFormat("  tx %.2f Gb/s", DataWordsToGbps(c.per_second())));
          }
        }
        // Zero and unchanged (a counting file with two readings and no rate went backwards or
        // is new: shown), or a setting (lifespan: no counter at all).
        const bool unchanged = !rates || !counts || (c.has_per_second() && c.per_second() == 0);
        if (!all && ((c.value() == 0 && unchanged) || metrics::IsHwSetting(c.name()))) {
          ++hidden;
          continue;
        }
        std::vector<std::string>& row = rows.emplace_back();
        row = {absl::StrCat(list.dir, "/", c.name()), absl::StrCat(c.value())};
        if (rates) row.push_back(c.has_per_second() ? Rate(c.per_second()) : "-");
      }
    }
    absl::StrAppend(&out, "\n", PortName(p), p.netdev().empty() ? "" : "  netdev ", p.netdev(),
                    traffic);
    if (hidden > 0) absl::StrAppend(&out, "  (", hidden, " hidden)");
    hidden_total += hidden;
    absl::StrAppend(&out, "\n");
    if (rows.size() > 1) {
      out += Table(rows, true, "  ", {false, true, true});
    } else if (hidden == 0) {
      out += "  no counters (the port has no counters/ or hw_counters/)\n";
    }
    for (const v1::FieldProblem& f : p.problems()) {
      absl::StrAppend(&out, "  problem ", f.field(), ": ", f.reason(), " (", f.path(), ")\n");
    }
  }
  if (!r.notes().empty()) out += "\n";
  for (const std::string& n : r.notes()) absl::StrAppend(&out, "note: ", n, "\n");
  return absl::StrCat(
      r.ports_size(), r.ports_size() == 1 ? " port" : " ports", "; ",
      rates ? absl::StrFormat("rates over %.3f s", r.interval_seconds())
            : std::string("one reading, no rates"),
      hidden_total > 0 ? "; hidden: zero and unchanged, settings (--all shows them)" : "", "\n",
      out);
}

}  // namespace fabric::ctl
