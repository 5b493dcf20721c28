#include "agent/policy/health/memory.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "agent/policy/health/health.h"

namespace fabric {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;
using v1::Finding;

// The agent started 100 hours after boot; the wall clock at boot was 2023-11-14T22:13:20Z.
const absl::Time kWallAtBoot = absl::FromUnixSeconds(1700000000);
const absl::Duration kT0 = absl::Hours(100);

MemoryClock At(absl::Duration boot) { return {boot, kWallAtBoot + boot}; }
absl::Time WallOf(absl::Duration boot) { return kWallAtBoot + boot; }

absl::Time TimeOf(const google::protobuf::Timestamp& ts) {
  return absl::FromUnixSeconds(ts.seconds()) + absl::Nanoseconds(ts.nanos());
}

Finding Make(v1::Severity s, const std::string& code, const std::string& subject,
             const std::string& message = "something") {
  Finding f;
  f.set_severity(s);
  f.set_check(code.substr(0, code.find('.')));
  f.set_code(code);
  f.set_subject(subject);
  f.set_message(message);
  return f;
}
Finding Warn(const std::string& code, const std::string& subject = "mlx5_0:1") {
  return Make(v1::SEVERITY_WARNING, code, subject);
}

// The one finding of `code` on `subject`, or null.
const Finding* Find(const std::vector<Finding>& all, const std::string& code,
                    const std::string& subject = "mlx5_0:1") {
  const Finding* out = nullptr;
  for (const Finding& f : all) {
    if (f.code() != code || f.subject() != subject) continue;
    EXPECT_EQ(out, nullptr) << "two findings " << code << " " << subject;
    out = &f;
  }
  return out;
}

TEST(MemoryOptionsFrom, ZeroesTakeTheDefaults) {
  v1::HealthConfig c;
  MemoryOptions o = MemoryOptionsFrom(c);
  EXPECT_EQ(o.sticky, absl::Minutes(10));
  EXPECT_EQ(o.flap_max, 5u);
  EXPECT_EQ(o.flap_window, absl::Hours(24));
  EXPECT_EQ(o.escalate_after, 3u);
  EXPECT_EQ(o.escalate_window, absl::Hours(1));
  c.set_sticky_s(30);
  c.set_flap_max(2);
  c.set_flap_window_s(3600);
  c.set_escalate_after(4);
  c.set_escalate_window_s(-1);  // Not a window: the default.
  c.add_dry_run_codes("counter.symbol_error");
  o = MemoryOptionsFrom(c);
  EXPECT_EQ(o.sticky, absl::Seconds(30));
  EXPECT_EQ(o.flap_max, 2u);
  EXPECT_EQ(o.flap_window, absl::Hours(1));
  EXPECT_EQ(o.escalate_after, 4u);
  EXPECT_EQ(o.escalate_window, absl::Hours(1));
  EXPECT_THAT(o.dry_run_codes, ::testing::ElementsAre("counter.symbol_error"));
}

TEST(FindingMemory, FirstSeenKeptAcrossUpdates) {
  FindingMemory m({});
  m.Update("inventory", {Warn("port_rate.slow")}, At(kT0));
  Finding changed = Warn("port_rate.slow");
  changed.set_message("now slower");
  m.Update("inventory", {changed}, At(kT0 + absl::Minutes(1)));
  const auto all = m.Findings(At(kT0 + absl::Minutes(2)));
  ASSERT_THAT(all, SizeIs(1));
  EXPECT_EQ(TimeOf(all[0].first_seen()), WallOf(kT0));
  EXPECT_EQ(TimeOf(all[0].last_seen()), WallOf(kT0 + absl::Minutes(1)));
  EXPECT_EQ(all[0].message(), "now slower");  // As last reported.
  EXPECT_FALSE(all[0].cleared());
  EXPECT_FALSE(all[0].has_sticky_until());
}

TEST(FindingMemory, StickyAfterTheCauseClears) {
  FindingMemory m({});
  m.Update("inventory", {Warn("port_state.down")}, At(kT0));
  const absl::Duration t = kT0 + absl::Minutes(5);
  m.Update("inventory", {}, At(t));
  auto all = m.Findings(At(t + absl::Minutes(9) + absl::Seconds(59)));
  ASSERT_THAT(all, SizeIs(1));
  EXPECT_TRUE(all[0].cleared());
  EXPECT_EQ(TimeOf(all[0].sticky_until()), WallOf(t + absl::Minutes(10)));
  EXPECT_EQ(TimeOf(all[0].last_seen()), WallOf(kT0));
  EXPECT_THAT(m.Findings(At(t + absl::Minutes(10))), IsEmpty());  // Kept until, not through.
  EXPECT_THAT(m.Findings(At(t + absl::Minutes(10) + absl::Seconds(1))), IsEmpty());
  EXPECT_EQ(m.size(), 0u);
}

TEST(FindingMemory, BackBeforeExpiryContinuesTheSameFinding) {
  FindingMemory m({});
  m.Update("inventory", {Warn("port_state.down")}, At(kT0));
  m.Update("inventory", {}, At(kT0 + absl::Minutes(1)));
  m.Update("inventory", {Warn("port_state.down")}, At(kT0 + absl::Minutes(8)));
  auto all = m.Findings(At(kT0 + absl::Minutes(30)));
  ASSERT_THAT(all, SizeIs(1));
  EXPECT_EQ(TimeOf(all[0].first_seen()), WallOf(kT0));
  EXPECT_FALSE(all[0].cleared());
  // Back after expiry: a new finding.
  m.Update("inventory", {}, At(kT0 + absl::Minutes(31)));
  m.Update("inventory", {Warn("port_state.down")}, At(kT0 + absl::Minutes(42)));
  all = m.Findings(At(kT0 + absl::Minutes(42)));
  ASSERT_THAT(all, SizeIs(1));
  EXPECT_EQ(TimeOf(all[0].first_seen()), WallOf(kT0 + absl::Minutes(42)));
}

TEST(FindingMemory, UpdateClearsOnlyItsOwnSource) {
  FindingMemory m({});
  m.Update("inventory", {Warn("port_state.down")}, At(kT0));
  m.Update("pcie", {Warn("pcie_link.narrow", "0000:1a:00.0")}, At(kT0));
  m.Update("pcie", {}, At(kT0 + absl::Minutes(1)));
  const auto all = m.Findings(At(kT0 + absl::Minutes(1)));
  ASSERT_THAT(all, SizeIs(2));
  EXPECT_FALSE(Find(all, "port_state.down")->cleared());
  EXPECT_TRUE(Find(all, "pcie_link.narrow", "0000:1a:00.0")->cleared());
}

TEST(FindingMemory, FindingsWithoutCodeAreKeyedByCheckAndMessage) {
  FindingMemory m({});
  Finding width = Make(v1::SEVERITY_WARNING, "", "0000:1a:00.0", "PCIe link x8, capable of x16");
  width.set_check("pcie_link");
  Finding speed = width;
  speed.set_message("PCIe link at 8 GT/s, capable of 16 GT/s");
  m.Update("inventory", {width, speed}, At(kT0));
  m.Update("inventory", {speed}, At(kT0 + absl::Minutes(1)));
  const auto all = m.Findings(At(kT0 + absl::Minutes(1)));
  ASSERT_THAT(all, SizeIs(2));
  int cleared = 0;
  for (const Finding& f : all) cleared += f.cleared() ? 1 : 0;
  EXPECT_EQ(cleared, 1);
}

TEST(FindingMemory, EventIsClearedAtOnceAndSticky) {
  FindingMemory m({});
  m.Event("kmsg", Make(v1::SEVERITY_CRITICAL, "kmsg.cmd_exec_timeout", "0000:3b:00.0"), At(kT0));
  auto all = m.Findings(At(kT0 + absl::Minutes(9)));
  ASSERT_THAT(all, SizeIs(1));
  EXPECT_TRUE(all[0].cleared());
  EXPECT_EQ(all[0].occurrences(), 1u);
  EXPECT_EQ(TimeOf(all[0].sticky_until()), WallOf(kT0 + absl::Minutes(10)));
  // A later Update of the same source does not touch events.
  m.Update("kmsg", {}, At(kT0 + absl::Minutes(9)));
  EXPECT_THAT(m.Findings(At(kT0 + absl::Minutes(9))), SizeIs(1));
  EXPECT_THAT(m.Findings(At(kT0 + absl::Minutes(11))), IsEmpty());
}

TEST(FindingMemory, EscalationOfRepeatedWarnings) {
  struct Case {
    std::string name;
    v1::Severity severity;
    std::vector<absl::Duration> at;
    v1::Severity want;
    uint32_t occurrences;
  };
  const absl::Duration m = absl::Minutes(1);
  const std::vector<Case> cases = {
      {"3 within an hour", v1::SEVERITY_WARNING, {0 * m, 20 * m, 40 * m}, v1::SEVERITY_CRITICAL, 3},
      {"3 within 59m59s",
       v1::SEVERITY_WARNING,
       {0 * m, 30 * m, 60 * m - absl::Seconds(1)},
       v1::SEVERITY_CRITICAL,
       3},
      {"first falls out at exactly 1h",
       v1::SEVERITY_WARNING,
       {0 * m, 30 * m, 60 * m},
       v1::SEVERITY_WARNING,
       2},
      {"spread over 2 hours",
       v1::SEVERITY_WARNING,
       {0 * m, 60 * m, 120 * m},
       v1::SEVERITY_WARNING,
       1},
      {"2 only", v1::SEVERITY_WARNING, {0 * m, 1 * m}, v1::SEVERITY_WARNING, 2},
      {"4 within an hour",
       v1::SEVERITY_WARNING,
       {0 * m, 1 * m, 2 * m, 3 * m},
       v1::SEVERITY_CRITICAL,
       4},
      {"UNKNOWN is not escalated",
       v1::SEVERITY_UNKNOWN,
       {0 * m, 1 * m, 2 * m},
       v1::SEVERITY_UNKNOWN,
       3},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    FindingMemory mem({});
    for (absl::Duration d : c.at) {
      mem.Event("counter", Make(c.severity, "counter.symbol_error", "mlx5_0:1", "rose by 12"),
                At(kT0 + d));
    }
    const auto all = mem.Findings(At(kT0 + c.at.back()));
    ASSERT_THAT(all, SizeIs(1));
    EXPECT_EQ(all[0].severity(), c.want);
    EXPECT_EQ(all[0].occurrences(), c.occurrences);
    if (c.want == v1::SEVERITY_CRITICAL) {
      EXPECT_EQ(all[0].message(),
                absl::StrCat("rose by 12 (escalated: ", c.occurrences, " times in 1h)"));
    } else {
      EXPECT_EQ(all[0].message(), "rose by 12");
    }
    // One finding from the first occurrence on, unless it expired (sticky over) in a gap.
    absl::Duration start = c.at[0];
    for (size_t i = 1; i < c.at.size(); ++i) {
      if (c.at[i] - c.at[i - 1] >= absl::Minutes(10)) start = c.at[i];
    }
    EXPECT_EQ(TimeOf(all[0].first_seen()), WallOf(kT0 + start));
  }
}

TEST(FindingMemory, FlapsCountedOverTheWindow) {
  FindingMemory m({});
  const absl::Duration min = absl::Minutes(1);
  for (uint32_t i = 1; i <= 5; ++i) {
    EXPECT_EQ(m.Flap("mlx5_0:1", "ACTIVE -> DOWN", At(kT0 + i * min)), i);
  }
  auto all = m.Findings(At(kT0 + 5 * min));
  ASSERT_THAT(all, SizeIs(1));
  EXPECT_EQ(all[0].code(), kFlapCode);
  EXPECT_EQ(all[0].severity(), v1::SEVERITY_WARNING);
  EXPECT_EQ(all[0].occurrences(), 5u);

  EXPECT_EQ(m.Flap("mlx5_0:1", "ACTIVE -> DOWN", At(kT0 + 6 * min)), 6u);
  all = m.Findings(At(kT0 + 6 * min));
  ASSERT_THAT(all, SizeIs(1));  // The WARNING became the CRITICAL.
  const Finding& f = all[0];
  EXPECT_EQ(f.code(), kFlappingCode);
  EXPECT_EQ(f.check(), "port_state");
  EXPECT_EQ(f.severity(), v1::SEVERITY_CRITICAL);
  EXPECT_EQ(f.repair(), v1::REPAIR_ACTION_CHECK_SWITCH_PORT);
  EXPECT_EQ(f.occurrences(), 6u);
  EXPECT_EQ(f.evidence(), "6 flaps in 24h, the last at 2023-11-19T02:19:20Z: ACTIVE -> DOWN");
  EXPECT_EQ(TimeOf(f.first_seen()), WallOf(kT0 + min));  // From the first flap.

  // Long after the sticky time it is still CRITICAL: the window holds 6 flaps until the first
  // leaves it, 24h after it.
  all = m.Findings(At(kT0 + 24 * absl::Hours(1)));
  ASSERT_THAT(all, SizeIs(1));
  EXPECT_EQ(all[0].code(), kFlappingCode);
  EXPECT_EQ(TimeOf(all[0].sticky_until()), WallOf(kT0 + min + absl::Hours(24)));
  EXPECT_THAT(m.Findings(At(kT0 + min + absl::Hours(24))), IsEmpty());

  // The old ones fell out: a new flap counts alone.
  EXPECT_EQ(m.Flap("mlx5_0:1", "", At(kT0 + absl::Hours(25))), 1u);
  all = m.Findings(At(kT0 + absl::Hours(25)));
  ASSERT_THAT(all, SizeIs(1));
  EXPECT_EQ(all[0].code(), kFlapCode);
  EXPECT_EQ(all[0].message(), "link flapped: 1 flap in 24h");
}

TEST(FindingMemory, FlapWindowSlides) {
  FindingMemory m({});
  for (int i = 0; i < 6; ++i) m.Flap("mlx5_1:1", "", At(kT0 + i * absl::Hours(5)));  // to 25h
  // At 25h the flap at 0h has left the window: 5 remain, the 6th makes 6 again.
  EXPECT_EQ(m.Flap("mlx5_1:1", "", At(kT0 + absl::Hours(26))), 6u);
  EXPECT_EQ(m.Flap("mlx5_2:1", "", At(kT0 + absl::Hours(26))), 1u);  // Per subject.
}

TEST(FindingMemory, DryRunCodes) {
  MemoryOptions o;
  o.dry_run_codes = {"counter.symbol_error"};
  FindingMemory m(o);
  m.Event("counter", Make(v1::SEVERITY_CRITICAL, "counter.symbol_error", "mlx5_0:1"), At(kT0));
  Finding reported = Make(v1::SEVERITY_CRITICAL, "counter.link_downed", "mlx5_0:1");
  reported.set_dry_run(true);
  m.Event("counter", reported, At(kT0));
  m.Update("inventory", {Warn("port_rate.slow")}, At(kT0));
  const auto all = m.Findings(At(kT0));
  ASSERT_THAT(all, SizeIs(3));
  EXPECT_TRUE(Find(all, "counter.symbol_error")->dry_run());
  EXPECT_TRUE(Find(all, "counter.link_downed")->dry_run());
  EXPECT_FALSE(Find(all, "port_rate.slow")->dry_run());

  // In a verdict (AddFinding, as the agent's findings reach one) the dry-run CRITICALs are
  // listed and do not count.
  v1::Health h;
  for (const Finding& f : all) AddFinding(&h, f);
  EXPECT_EQ(h.verdict(), v1::SEVERITY_WARNING);
  EXPECT_EQ(h.findings_size(), 3);
  v1::Health only_dry;
  AddFinding(&only_dry, *Find(all, "counter.symbol_error"));
  EXPECT_EQ(only_dry.verdict(), v1::SEVERITY_OK);
}

// A memory with every kind of entry in it.
FindingMemory Busy() {
  FindingMemory m({});
  m.Update("inventory", {Warn("port_state.down"), Warn("port_rate.slow", "mlx5_1:1")}, At(kT0));
  m.Update("inventory", {Warn("port_rate.slow", "mlx5_1:1")}, At(kT0 + absl::Minutes(2)));
  m.Event("counter", Warn("counter.symbol_error"), At(kT0 + absl::Minutes(1)));
  m.Event("counter", Warn("counter.symbol_error"), At(kT0 + absl::Minutes(3)));
  for (int i = 0; i < 6; ++i) m.Flap("mlx5_0:1", "carrier", At(kT0 + i * absl::Seconds(10)));
  return m;
}

TEST(FindingMemory, SaveLoadRoundTrip) {
  FindingMemory m = Busy();
  const MemoryClock now = At(kT0 + absl::Minutes(4));
  const v1::HealthMemoryState saved = m.Save("boot-a");
  EXPECT_EQ(saved.version(), kHealthMemoryVersion);
  absl::StatusOr<v1::HealthMemoryState> parsed =
      FindingMemory::ParseState(saved.SerializeAsString());
  ASSERT_TRUE(parsed.ok()) << parsed.status();

  FindingMemory back({});
  absl::StatusOr<FindingMemory::Loaded> loaded = back.Load(*parsed, "boot-a", now);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_FALSE(loaded->reset);
  const auto want = m.Findings(now);
  const auto got = back.Findings(now);
  ASSERT_EQ(got.size(), want.size());
  ASSERT_EQ(got.size(), 4u);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].SerializeAsString(), want[i].SerializeAsString()) << got[i].DebugString();
  }
  EXPECT_EQ(back.Save("boot-a").SerializeAsString(), m.Save("boot-a").SerializeAsString());

  // The counts continue: a third symbol_error within the hour escalates.
  back.Event("counter", Warn("counter.symbol_error"), At(kT0 + absl::Minutes(5)));
  EXPECT_EQ(Find(back.Findings(At(kT0 + absl::Minutes(5))), "counter.symbol_error")->severity(),
            v1::SEVERITY_CRITICAL);
}

TEST(FindingMemory, AnotherBootStartsClean) {
  FindingMemory m = Busy();
  FindingMemory back({});
  back.Update("inventory", {Warn("port_state.down")}, At(absl::Minutes(1)));  // Replaced.
  absl::StatusOr<FindingMemory::Loaded> loaded =
      back.Load(m.Save("boot-a"), "boot-b", At(absl::Minutes(2)));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE(loaded->reset);
  EXPECT_EQ(back.size(), 0u);
  EXPECT_EQ(back.series(), 0u);
  EXPECT_THAT(back.Findings(At(absl::Minutes(2))), IsEmpty());
}

TEST(FindingMemory, CorruptBytesAreAnError) {
  const std::vector<std::string> bad = {
      std::string("\xff\xff\xff\xff", 4),              // a varint tag that never ends
      std::string("\x08", 1),                          // version without its value
      std::string("\x1a\x10\x0a", 3),                  // a finding 16 bytes long in 1
      std::string("\x12\x05\xff\xfe\xfd\xfc\xfb", 7),  // boot_id not UTF-8
  };
  for (const std::string& bytes : bad) {
    absl::StatusOr<v1::HealthMemoryState> s = FindingMemory::ParseState(bytes);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << absl::CEscape(bytes);
  }
  // Empty bytes are an empty message, whose version Load refuses.
  absl::StatusOr<v1::HealthMemoryState> empty = FindingMemory::ParseState("");
  ASSERT_TRUE(empty.ok());
  FindingMemory m({});
  absl::StatusOr<FindingMemory::Loaded> loaded = m.Load(*empty, "", At(kT0));
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(loaded.status().message(), HasSubstr("unknown version 0"));
}

TEST(FindingMemory, MalformedStatesAreErrors) {
  MemoryOptions o;
  o.max_findings = 8;
  o.max_series = 2;
  o.max_events_per_series = 10;
  const int64_t now_ns = absl::ToInt64Nanoseconds(kT0);
  struct Case {
    std::string name;
    std::function<void(v1::HealthMemoryState*)> mutate;
    std::string want;
  };
  const std::vector<Case> cases = {
      {"future last seen", [&](auto* s) { s->mutable_findings(0)->set_last_seen_ns(now_ns + 1); },
       "after now"},
      {"future cleared", [&](auto* s) { s->mutable_findings(1)->set_cleared_ns(now_ns + 1); },
       "after now"},
      {"future event", [&](auto* s) { s->mutable_events(0)->set_at_ns(0, now_ns + 1); },
       "after now"},
      {"series out of order",
       [&](auto* s) {
         s->mutable_events(0)->add_at_ns(5);
         s->mutable_events(0)->add_at_ns(4);
       },
       "out of order"},
      {"first after last", [&](auto* s) { s->mutable_findings(0)->set_first_seen_ns(now_ns); },
       "first seen"},
      {"negative", [&](auto* s) { s->mutable_findings(0)->set_first_seen_ns(-1); }, "first seen"},
      {"cleared before last seen", [&](auto* s) { s->mutable_findings(1)->set_cleared_ns(1); },
       "before last seen"},
      {"no source", [&](auto* s) { s->mutable_findings(0)->clear_source(); }, "no source"},
      {"no finding", [&](auto* s) { s->mutable_findings(0)->clear_finding(); }, "no finding"},
      {"no code or check",
       [&](auto* s) {
         s->mutable_findings(0)->mutable_finding()->clear_code();
         s->mutable_findings(0)->mutable_finding()->clear_check();
       },
       "neither code nor check"},
      {"duplicate finding", [&](auto* s) { *s->add_findings() = s->findings(0); }, "duplicate"},
      {"duplicate series", [&](auto* s) { *s->add_events() = s->events(0); }, "duplicate"},
      {"series without key", [&](auto* s) { s->mutable_events(0)->clear_key(); }, "no key"},
      {"event never cleared", [&](auto* s) { s->mutable_findings(0)->set_cleared_ns(0); },
       "never cleared"},
      {"unknown version", [&](auto* s) { s->set_version(2); }, "unknown version 2"},
      {"too many findings",
       [&](auto* s) {
         for (int i = 0; i < 8; ++i) {
           *s->add_findings() = s->findings(0);
           s->mutable_findings(s->findings_size() - 1)
               ->mutable_finding()
               ->set_subject(absl::StrCat("x", i));
         }
       },
       "10 findings, more than the 8 kept"},
      {"too many series",
       [&](auto* s) {
         s->add_events()->set_key("b");
         s->add_events()->set_key("c");
       },
       "3 event series"},
      {"too many times",
       [&](auto* s) {
         for (int i = 0; i < 10; ++i) s->mutable_events(0)->add_at_ns(now_ns);
       },
       "11 times, more than the 10 kept"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    FindingMemory src(o);
    src.Update("inventory", {Warn("port_state.down")}, At(kT0 - absl::Minutes(1)));
    src.Event("counter", Warn("counter.symbol_error"), At(kT0 - absl::Minutes(1)));
    v1::HealthMemoryState s = src.Save("boot-a");
    ASSERT_EQ(s.findings_size(), 2);
    ASSERT_EQ(s.events_size(), 1);
    {  // Unchanged, it loads.
      FindingMemory m(o);
      ASSERT_TRUE(m.Load(s, "boot-a", At(kT0)).ok());
    }
    c.mutate(&s);
    FindingMemory m(o);
    m.Update("inventory", {Warn("port_state.down")}, At(kT0));
    absl::StatusOr<FindingMemory::Loaded> loaded = m.Load(s, "boot-a", At(kT0));
    EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(loaded.status().message(), HasSubstr(c.want));
    EXPECT_EQ(m.size(), 0u);  // Left empty.
    EXPECT_EQ(m.series(), 0u);
  }
}

TEST(FindingMemory, FindingCapEvictsClearedFirstThenLeastRecentlySeen) {
  MemoryOptions o;
  o.max_findings = 3;
  FindingMemory m(o);
  m.Update("inventory", {Warn("a.x"), Warn("b.x"), Warn("c.x")}, At(kT0));
  m.Update("inventory", {Warn("a.x"), Warn("c.x")}, At(kT0 + absl::Minutes(1)));  // b cleared
  m.Update("pcie", {Warn("d.x")}, At(kT0 + absl::Minutes(2)));
  EXPECT_EQ(m.evicted(), 1u);
  auto all = m.Findings(At(kT0 + absl::Minutes(2)));
  EXPECT_EQ(Find(all, "b.x"), nullptr);
  ASSERT_THAT(all, SizeIs(3));
  // None cleared: the least recently seen goes (a and c were seen at 1m, d at 2m; a sorts first).
  m.Update("kmsg", {Warn("e.x")}, At(kT0 + absl::Minutes(3)));
  EXPECT_EQ(m.evicted(), 2u);
  all = m.Findings(At(kT0 + absl::Minutes(3)));
  EXPECT_EQ(Find(all, "a.x"), nullptr);
  EXPECT_NE(Find(all, "c.x"), nullptr);
  EXPECT_NE(Find(all, "d.x"), nullptr);
  EXPECT_NE(Find(all, "e.x"), nullptr);
}

TEST(FindingMemory, SeriesCapAndAtLeast) {
  MemoryOptions o;
  o.max_series = 2;
  o.max_events_per_series = 4;
  o.flap_max = 2;  // The series cap holds at least flap_max + 1.
  o.escalate_after = 3;
  FindingMemory m(o);
  for (int i = 0; i < 3; ++i) m.Event("kmsg", Warn(absl::StrCat("kmsg.e", i)), At(kT0));
  EXPECT_EQ(m.series(), 2u);
  EXPECT_EQ(m.series_evicted(), 1u);
  for (int i = 0; i < 10; ++i) m.Event("kmsg", Warn("kmsg.flood"), At(kT0 + absl::Seconds(i)));
  const auto all = m.Findings(At(kT0 + absl::Seconds(10)));
  const Finding* f = Find(all, "kmsg.flood");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->occurrences(), 4u);
  EXPECT_THAT(f->message(), HasSubstr("(escalated: at least 4 times in 1h)"));
}

TEST(FindingMemory, FloodStaysBounded) {
  MemoryOptions o;
  o.max_findings = 100;
  o.max_series = 50;
  FindingMemory m(o);
  for (int i = 0; i < 100000; ++i) {
    m.Event("kmsg", Warn("kmsg.access_reg_failed"), At(kT0 + absl::Milliseconds(i)));
  }
  EXPECT_EQ(m.size(), 1u);
  EXPECT_EQ(m.series(), 1u);
  const auto all = m.Findings(At(kT0 + absl::Seconds(100)));
  ASSERT_THAT(all, SizeIs(1));
  EXPECT_EQ(all[0].occurrences(), 256u);
  EXPECT_EQ(all[0].severity(), v1::SEVERITY_CRITICAL);
  EXPECT_EQ(m.Save("b").events(0).at_ns_size(), 256);

  for (int i = 0; i < 100000; ++i) {
    m.Event("kmsg", Warn("kmsg.x", absl::StrCat("dev", i)), At(kT0 + absl::Seconds(200)));
  }
  EXPECT_EQ(m.size(), 100u);
  EXPECT_EQ(m.series(), 50u);
  EXPECT_EQ(m.evicted(), 100000u + 1 - 100);
  EXPECT_EQ(m.series_evicted(), 100000u + 1 - 50);
}

TEST(FindingMemory, WallClockJumpDoesNotChangeStickiness) {
  FindingMemory m({});
  m.Update("inventory", {Warn("port_state.down")}, At(kT0));
  const MemoryClock cleared = At(kT0 + absl::Minutes(1));
  m.Update("inventory", {}, cleared);
  // The wall clock steps back an hour; the boot clock moves on 9m59s.
  const absl::Duration later = absl::Minutes(9) + absl::Seconds(59);
  MemoryClock now{cleared.boot + later, cleared.wall - absl::Hours(1) + later};
  auto all = m.Findings(now);
  ASSERT_THAT(all, SizeIs(1));
  EXPECT_TRUE(all[0].cleared());
  EXPECT_EQ(TimeOf(all[0].sticky_until()), now.wall + absl::Seconds(1));  // Shown on the new wall
  now = {cleared.boot + absl::Minutes(10) + absl::Seconds(1), cleared.wall - absl::Hours(1)};
  EXPECT_THAT(m.Findings(now), IsEmpty());
  // And forwards: a wall clock an hour ahead does not expire it early.
  FindingMemory m2({});
  m2.Event("kmsg", Warn("kmsg.x"), At(kT0));
  EXPECT_THAT(m2.Findings({kT0 + absl::Minutes(5), WallOf(kT0) + absl::Hours(1)}), SizeIs(1));
}

// The fuzz corpus's seeds are states as the agent writes them: they load.
TEST(FindingMemory, FuzzSeedsLoad) {
  auto read = [](const std::string& name) {
    std::ifstream in(
        std::string(FABRIC_SOURCE_DIR) + "/agent/policy/health/testdata/memory_state_fuzz/" + name,
        std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  absl::StatusOr<v1::HealthMemoryState> s = FindingMemory::ParseState(read("state_and_events"));
  ASSERT_TRUE(s.ok()) << s.status();
  FindingMemory m({});
  const MemoryClock now = At(absl::Hours(1) + absl::Minutes(5));
  ASSERT_TRUE(m.Load(*s, "6a0e3c3e-5a43-4f0e-9b1a-2c1f6f1e8d11", now).ok());
  EXPECT_THAT(m.Findings(now), SizeIs(3));
  m.Event("counter", Warn("counter.symbol_error"), now);  // The third within the hour.
  EXPECT_EQ(Find(m.Findings(now), "counter.symbol_error")->severity(), v1::SEVERITY_CRITICAL);

  // Six flaps between 719h43m20s and 719h43m25s after boot, loaded 16m35s later: the sticky time
  // is over, but the window still holds them.
  s = FindingMemory::ParseState(read("flapping"));
  ASSERT_TRUE(s.ok()) << s.status();
  const MemoryClock month = At(absl::Hours(24 * 30));
  ASSERT_TRUE(m.Load(*s, "b", month).ok());
  const auto all = m.Findings(month);
  ASSERT_THAT(all, SizeIs(1));
  EXPECT_EQ(all[0].code(), kFlappingCode);
  EXPECT_EQ(FindingMemory::ParseState(read("truncated")).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace fabric
