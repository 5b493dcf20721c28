#include "agent/fabric/announce/announce.h"

#include <arpa/inet.h>

#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/fabric/announce/frames.h"
#include "agent/fabric/announce/test_addresses.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fabric::announce {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const Mac kMac = {0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee};
const Mac kOther = {0x02, 0x11, 0x22, 0x33, 0x44, 0x55};

absl::Duration Ms(int64_t n) { return absl::Milliseconds(n); }

in_addr In4(const Address& a) {
  in_addr v;
  std::memcpy(&v, &a.addr, 4);
  return v;
}

// An ARP frame from another host, assembled here byte by byte.
std::vector<uint8_t> ArpFrom(const Mac& mac, uint16_t op, const char* sender_ip,
                             const char* target_ip) {
  std::vector<uint8_t> f = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  f.insert(f.end(), mac.begin(), mac.end());
  f.insert(f.end(), {0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, static_cast<uint8_t>(op)});
  f.insert(f.end(), mac.begin(), mac.end());
  in_addr s{}, t{};
  inet_pton(AF_INET, sender_ip, &s);
  inet_pton(AF_INET, target_ip, &t);
  auto* sp = reinterpret_cast<uint8_t*>(&s);
  auto* tp = reinterpret_cast<uint8_t*>(&t);
  f.insert(f.end(), sp, sp + 4);
  f.insert(f.end(), kMac.begin(), kMac.end());
  f.insert(f.end(), tp, tp + 4);
  return f;
}

struct FakeState {
  std::vector<std::vector<uint8_t>> sent;
  std::deque<std::vector<uint8_t>> rx;
  std::map<std::string, absl::StatusOr<bool>> tentative;  // by IPv6 text; absent: false
  absl::Status send_error;
  int tentative_calls = 0;
};

class FakeLink : public Link {
 public:
  explicit FakeLink(std::shared_ptr<FakeState> s) : s_(std::move(s)) {}
  absl::Status Send(const std::vector<uint8_t>& frame) override {
    if (!s_->send_error.ok()) return s_->send_error;
    s_->sent.push_back(frame);
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<uint8_t>> TryReceive() override {
    if (s_->rx.empty()) return absl::NotFoundError("nothing queued");
    auto f = s_->rx.front();
    s_->rx.pop_front();
    return f;
  }
  int poll_fd() const override { return -1; }
  absl::StatusOr<bool> Tentative(const in6_addr& addr) override {
    ++s_->tentative_calls;
    auto it = s_->tentative.find(IpToString(AF_INET6, addr));
    return it == s_->tentative.end() ? absl::StatusOr<bool>(false) : it->second;
  }

 private:
  std::shared_ptr<FakeState> s_;
};

enum class Kind { kGarpRequest, kGarpReply, kArpRequest, kProbe, kNa, kNs, kUnknown };

Kind Classify(const std::vector<uint8_t>& f) {
  if (auto a = ParseArp(AsView(f)); a.ok()) {
    if (a->sender_ip.s_addr == 0) return Kind::kProbe;
    if (a->sender_ip.s_addr != a->target_ip.s_addr) return Kind::kArpRequest;
    return a->op == kArpRequest ? Kind::kGarpRequest : Kind::kGarpReply;
  }
  if (auto n = ParseNd(AsView(f)); n.ok()) {
    return n->type == kNeighborAdvertisement ? Kind::kNa : Kind::kNs;
  }
  return Kind::kUnknown;
}

class JobTest : public ::testing::Test {
 protected:
  JobTest() : start_(absl::FromUnixSeconds(1000)) {
    target_.ifname = "eth0";
    target_.ifindex = 3;
    target_.mac = kMac;
  }
  std::unique_ptr<Job> Make(bool first_done = false) {
    return std::make_unique<Job>(target_, plan_, std::make_unique<FakeLink>(fake_), start_,
                                 first_done);
  }
  // Steps at each time the job asks for, calling `before(now)` first; records when each frame
  // went out (as offsets from start). Stops when done or at `limit`.
  void Run(Job& job, const std::function<void(absl::Duration)>& before = nullptr,
           absl::Duration limit = absl::Seconds(60)) {
    absl::Time now = start_;
    for (int i = 0; i < 10000 && !job.done(); ++i) {
      if (before) before(now - start_);
      size_t n = fake_->sent.size();
      absl::Time next = job.Step(now);
      for (size_t k = n; k < fake_->sent.size(); ++k) {
        at_.push_back({now - start_, Classify(fake_->sent[k])});
      }
      if (job.done()) {
        end_ = now - start_;
        break;
      }
      ASSERT_GE(next, now) << "step asked to run in the past";
      ASSERT_LT(next - start_, limit);
      now = next;
    }
    ASSERT_TRUE(job.done());
  }
  std::vector<absl::Duration> TimesOf(Kind k) const {
    std::vector<absl::Duration> out;
    for (const auto& [t, kind] : at_) {
      if (kind == k) out.push_back(t);
    }
    return out;
  }

  absl::Time start_;
  Target target_;
  Plan plan_;
  std::shared_ptr<FakeState> fake_ = std::make_shared<FakeState>();
  std::vector<std::pair<absl::Duration, Kind>> at_;
  absl::Duration end_;
};

TEST(ScheduleTest, Offsets) {
  struct Case {
    const char* name;
    Schedule s;
    std::vector<absl::Duration> want;
  };
  Schedule none;
  none.fast_count = 0;
  none.tail = {};
  Schedule overlap;
  overlap.fast_count = 3;
  overlap.fast_interval = Ms(500);
  overlap.tail = {absl::Seconds(1), Ms(100), absl::ZeroDuration(), absl::Seconds(1)};
  const Case cases[] = {
      {"default", Schedule{}, {Ms(0), Ms(100), Ms(200), Ms(300), Ms(1000), Ms(5000)}},
      {"only the first", none, {Ms(0)}},
      {"sorted, duplicates removed", overlap, {Ms(0), Ms(100), Ms(500), Ms(1000), Ms(1500)}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(c.s.Offsets(), c.want);
  }
}

TEST(ScheduleTest, Validate) {
  struct Case {
    const char* name;
    std::function<void(Schedule&)> edit;
    const char* error;  // nullptr: valid
  };
  const Case cases[] = {
      {"default", [](Schedule&) {}, nullptr},
      {"no repeats", [](Schedule& s) { s.fast_count = 0, s.tail.clear(); }, nullptr},
      {"100 fast", [](Schedule& s) { s.fast_count = 100; }, nullptr},
      {"10 min tail", [](Schedule& s) { s.tail = {absl::Minutes(10)}; }, nullptr},
      {"negative count", [](Schedule& s) { s.fast_count = -1; }, "fast_count"},
      {"101 fast", [](Schedule& s) { s.fast_count = 101; }, "fast_count"},
      {"zero interval", [](Schedule& s) { s.fast_interval = absl::ZeroDuration(); }, "1ms..60s"},
      {"61 s interval", [](Schedule& s) { s.fast_interval = absl::Seconds(61); }, "1ms..60s"},
      {"fast past 10 min",
       [](Schedule& s) {
         s.fast_count = 20;
         s.fast_interval = absl::Seconds(60);
       },
       "past 10m"},
      {"negative tail", [](Schedule& s) { s.tail = {Ms(-1)}; }, "tail offset"},
      {"tail past 10 min", [](Schedule& s) { s.tail = {absl::Minutes(10) + Ms(1)}; }, "0..10m"},
      {"101 tail", [](Schedule& s) { s.tail.assign(101, Ms(10)); }, "at most 100"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Schedule s;
    c.edit(s);
    absl::Status st = s.Validate();
    if (c.error == nullptr) {
      EXPECT_TRUE(st.ok()) << st;
    } else {
      EXPECT_THAT(std::string(st.message()), HasSubstr(c.error));
    }
  }
}

TEST(AddressTest, ToString) {
  EXPECT_EQ(V4("10.0.0.2", "10.0.0.1").ToString(), "10.0.0.2/24 via 10.0.0.1");
  EXPECT_EQ(V6("2001:db8::2").ToString(), "2001:db8::2/64");
}

TEST(MonotonicNowTest, AdvancesWithTheMonotonicClock) {
  absl::Time a = MonotonicNow();
  absl::Time b = MonotonicNow();
  EXPECT_LE(a, b);
  // Not the wall clock: CLOCK_MONOTONIC counts from boot, far from the Unix epoch's "now".
  EXPECT_GT(absl::Now() - a, absl::Hours(24 * 365));
}

TEST_F(JobTest, SendsAtEveryOffset) {
  target_.addresses = {V4("10.1.2.3"), V6("2001:db8::10")};
  plan_.prime_gateway = false;
  auto job = Make();
  Run(*job);
  const std::vector<absl::Duration> want = {Ms(0), Ms(100), Ms(200), Ms(300), Ms(1000), Ms(5000)};
  EXPECT_EQ(TimesOf(Kind::kGarpRequest), want);
  EXPECT_EQ(TimesOf(Kind::kNa), want);
  EXPECT_TRUE(TimesOf(Kind::kGarpReply).empty());
  EXPECT_EQ(job->report().arp_sent, 6);
  EXPECT_EQ(job->report().na_sent, 6);
  EXPECT_EQ(job->report().send_errors, 0);
  EXPECT_EQ(end_, Ms(5000));
  // The exact frames.
  EXPECT_EQ(fake_->sent[0], BuildGratuitousArp(kMac, In4(target_.addresses[0]), ArpForm::kRequest));
  EXPECT_EQ(fake_->sent[1], BuildUnsolicitedNa(kMac, target_.addresses[1].addr));
}

TEST_F(JobTest, StepsBetweenOffsetsSendNothingAndLateRoundsCollapse) {
  target_.addresses = {V4("10.1.2.3")};
  plan_.prime_gateway = false;
  auto job = Make();
  EXPECT_EQ(job->Step(start_ - Ms(5)), start_);  // not yet
  EXPECT_TRUE(fake_->sent.empty());
  EXPECT_EQ(job->Step(start_), start_);  // the round; priming wants the next step at once
  EXPECT_EQ(fake_->sent.size(), 1u);
  EXPECT_TRUE(job->first_round_sent());
  EXPECT_EQ(job->Step(start_), start_ + Ms(100));
  EXPECT_EQ(fake_->sent.size(), 1u);
  EXPECT_EQ(job->Step(start_ + Ms(50)), start_ + Ms(100));
  EXPECT_EQ(fake_->sent.size(), 1u);
  // 100, 200 and 300 ms are all overdue at 350 ms: one round, not three.
  EXPECT_EQ(job->Step(start_ + Ms(350)), start_ + Ms(1000));
  EXPECT_EQ(fake_->sent.size(), 2u);
}

TEST_F(JobTest, ReplyFormToo) {
  target_.addresses = {V4("10.1.2.3")};
  plan_.arp_reply_form = true;
  plan_.schedule.fast_count = 0;
  plan_.schedule.tail = {};
  auto job = Make();
  Run(*job);
  ASSERT_EQ(fake_->sent.size(), 2u);
  EXPECT_EQ(Classify(fake_->sent[0]), Kind::kGarpRequest);
  EXPECT_EQ(Classify(fake_->sent[1]), Kind::kGarpReply);
  EXPECT_EQ(job->report().arp_sent, 2);
}

TEST_F(JobTest, FirstDoneSkipsOffsetZeroButPrimes) {
  target_.addresses = {V4("10.1.2.3", "10.1.2.1")};
  auto job = Make(/*first_done=*/true);
  EXPECT_TRUE(job->first_round_sent());
  Run(*job);
  EXPECT_EQ(TimesOf(Kind::kGarpRequest),
            (std::vector<absl::Duration>{Ms(100), Ms(200), Ms(300), Ms(1000), Ms(5000)}));
  EXPECT_EQ(TimesOf(Kind::kArpRequest), std::vector<absl::Duration>{Ms(0)});
  ASSERT_EQ(job->report().gateways.size(), 1u);
  EXPECT_FALSE(job->report().gateways[0].reachable);
}

TEST_F(JobTest, CancelStopsEverything) {
  target_.addresses = {V4("10.1.2.3")};
  auto job = Make();
  job->Step(start_);
  ASSERT_EQ(fake_->sent.size(), 1u);
  job->Cancel();
  EXPECT_TRUE(job->done());
  EXPECT_EQ(job->Step(start_ + absl::Seconds(10)), absl::InfiniteFuture());
  EXPECT_EQ(fake_->sent.size(), 1u);
}

TEST_F(JobTest, TentativeIpv6IsHeldBackThenSent) {
  target_.addresses = {V4("10.1.2.3"), V6("2001:db8::10")};
  plan_.prime_gateway = false;
  Run(*Make(), [&](absl::Duration t) { fake_->tentative["2001:db8::10"] = t < Ms(450); });
  // Polled every 100 ms after the fixed rounds: sent at the first check after 450 ms, then
  // with the remaining rounds.
  EXPECT_EQ(TimesOf(Kind::kNa), (std::vector<absl::Duration>{Ms(500), Ms(1000), Ms(5000)}));
  EXPECT_EQ(TimesOf(Kind::kGarpRequest).size(), 6u);
}

TEST_F(JobTest, TentativeForeverGivesUpAfterThreeSeconds) {
  target_.addresses = {V6("2001:db8::10")};
  plan_.schedule.tail = {};
  fake_->tentative["2001:db8::10"] = true;
  auto job = Make();
  Run(*job);
  EXPECT_EQ(job->report().na_sent, 0);
  EXPECT_THAT(job->report().last_error, HasSubstr("2001:db8::10 still tentative"));
  EXPECT_EQ(end_, absl::Seconds(3));
  EXPECT_LE(fake_->tentative_calls, 32);  // polled, not spun
}

TEST_F(JobTest, DadFailureGivesUpAtOnce) {
  target_.addresses = {V6("2001:db8::10")};
  fake_->tentative["2001:db8::10"] = absl::FailedPreconditionError("DAD failed on eth0");
  auto job = Make();
  Run(*job);
  EXPECT_EQ(job->report().na_sent, 0);
  EXPECT_THAT(job->report().last_error, HasSubstr("DAD failed"));
  EXPECT_EQ(fake_->tentative_calls, 1);
}

TEST_F(JobTest, GatewayReachable) {
  target_.addresses = {V4("10.1.2.3", "10.1.2.1")};
  plan_.schedule.fast_count = 0;
  plan_.schedule.tail = {};
  auto job = Make();
  EXPECT_EQ(job->Step(start_), start_);  // round 0; priming is the next step
  EXPECT_EQ(fake_->sent.size(), 1u);
  EXPECT_EQ(job->Step(start_), start_ + Ms(500));
  ASSERT_EQ(fake_->sent.size(), 2u);
  EXPECT_EQ(fake_->sent[1], BuildArpRequest(kMac, In4(target_.addresses[0]), In4(V4("10.1.2.1"))));
  fake_->rx.push_back(ArpFrom(kOther, kArpReply, "10.1.2.1", "10.1.2.3"));
  EXPECT_EQ(job->Step(start_ + Ms(7)), absl::InfiniteFuture());
  EXPECT_TRUE(job->done());
  ASSERT_EQ(job->report().gateways.size(), 1u);
  const Report::Gateway& g = job->report().gateways[0];
  EXPECT_EQ(g.address, "10.1.2.1");
  EXPECT_TRUE(g.reachable);
  EXPECT_EQ(g.rtt, Ms(7));
  EXPECT_EQ(g.mac, kOther);
}

TEST_F(JobTest, GatewayUnreachableAndAnswersFromTheWrongIpIgnored) {
  target_.addresses = {V4("10.1.2.3", "10.1.2.1")};
  plan_.schedule.fast_count = 0;
  plan_.schedule.tail = {};
  auto job = Make();
  job->Step(start_);
  job->Step(start_);
  fake_->rx.push_back(ArpFrom(kOther, kArpReply, "10.1.2.9", "10.1.2.3"));    // wrong IP
  fake_->rx.push_back(ArpFrom(kOther, kArpRequest, "10.1.2.1", "10.1.2.3"));  // not a reply
  fake_->rx.push_back({0x01, 0x02});                                          // garbage
  EXPECT_EQ(job->Step(start_ + Ms(10)), start_ + Ms(500));
  EXPECT_EQ(job->Step(start_ + Ms(500)), absl::InfiniteFuture());
  ASSERT_EQ(job->report().gateways.size(), 1u);
  EXPECT_FALSE(job->report().gateways[0].reachable);
}

TEST_F(JobTest, Ipv6GatewayPrimedOnceTheAddressIsAnnounced) {
  target_.addresses = {V6("2001:db8::10", "2001:db8::1")};
  plan_.schedule.fast_count = 0;
  plan_.schedule.tail = {};
  fake_->tentative["2001:db8::10"] = true;
  auto job = Make();
  job->Step(start_);
  job->Step(start_);
  EXPECT_TRUE(TimesOf(Kind::kNs).empty());
  EXPECT_TRUE(fake_->sent.empty());  // tentative: neither NA nor NS
  fake_->tentative["2001:db8::10"] = false;
  absl::Time next = job->Step(start_ + Ms(100));
  ASSERT_EQ(fake_->sent.size(), 2u);
  EXPECT_EQ(Classify(fake_->sent[0]), Kind::kNa);
  EXPECT_EQ(Classify(fake_->sent[1]), Kind::kNs);
  EXPECT_EQ(next, start_ + Ms(600));
  // The gateway's solicited NA, built here: Router|Solicited|Override, TLLA kOther.
  const std::vector<uint8_t> answer = {
      0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0x02, 0x11, 0x22, 0x33, 0x44, 0x55, 0x86, 0xdd, 0x60,
      0x00, 0x00, 0x00, 0x00, 0x20, 0x3a, 0xff, 0x20, 0x01, 0x0d, 0xb8, 0,    0,    0,    0,
      0,    0,    0,    0,    0,    0,    0,    0x01, 0x20, 0x01, 0x0d, 0xb8, 0,    0,    0,
      0,    0,    0,    0,    0,    0,    0,    0,    0x10, 0x88, 0x00, 0xa3, 0xcc, 0xe0, 0x00,
      0x00, 0x00, 0x20, 0x01, 0x0d, 0xb8, 0,    0,    0,    0,    0,    0,    0,    0,    0,
      0,    0,    0x01, 0x02, 0x01, 0x02, 0x11, 0x22, 0x33, 0x44, 0x55,
  };
  fake_->rx.push_back(answer);
  EXPECT_EQ(job->Step(start_ + Ms(103)), absl::InfiniteFuture());
  ASSERT_EQ(job->report().gateways.size(), 1u);
  EXPECT_EQ(job->report().gateways[0].address, "2001:db8::1");
  EXPECT_TRUE(job->report().gateways[0].reachable);
  EXPECT_EQ(job->report().gateways[0].rtt, Ms(3));
  EXPECT_EQ(job->report().gateways[0].mac, kOther);
}

TEST_F(JobTest, ConflictFound) {
  target_.addresses = {V4("10.1.2.3", "10.1.2.1"), V4("10.1.2.4")};
  plan_.conflict_probe = true;
  plan_.schedule.fast_count = 1;
  plan_.schedule.tail = {};
  auto job = Make();
  EXPECT_EQ(job->Step(start_), start_ + Ms(200));
  ASSERT_EQ(fake_->sent.size(), 2u);
  EXPECT_EQ(fake_->sent[0], BuildArpProbe(kMac, In4(target_.addresses[0])));
  EXPECT_FALSE(job->first_round_sent());
  // Our own echo is not a conflict; the owner's answer to the probe is.
  fake_->rx.push_back(ArpFrom(kMac, kArpRequest, "0.0.0.0", "10.1.2.3"));
  fake_->rx.push_back(ArpFrom(kOther, kArpReply, "10.1.2.3", "0.0.0.0"));
  EXPECT_EQ(job->Step(start_ + Ms(20)), start_ + Ms(200));
  at_.clear();
  Run(*job);  // from start_, the job catches up
  ASSERT_EQ(job->report().conflicts.size(), 1u);
  EXPECT_EQ(job->report().conflicts[0].address, "10.1.2.3");
  EXPECT_EQ(job->report().conflicts[0].owner, kOther);
  // Only 10.1.2.4 is announced, at 200 and 300 ms (offsets count from the end of the probe),
  // and the conflicting address's gateway is not primed.
  std::vector<Kind> kinds;
  for (size_t i = 2; i < fake_->sent.size(); ++i) {
    auto a = ParseArp(AsView(fake_->sent[i]));
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(a->sender_ip.s_addr, In4(target_.addresses[1]).s_addr);
    kinds.push_back(Classify(fake_->sent[i]));
  }
  EXPECT_THAT(kinds, ElementsAre(Kind::kGarpRequest, Kind::kGarpRequest));
  EXPECT_EQ(job->report().arp_sent, 2);
  EXPECT_TRUE(job->report().gateways.empty());
}

TEST_F(JobTest, SimultaneousProbeIsAConflict) {
  target_.addresses = {V4("10.1.2.3")};
  plan_.conflict_probe = true;
  auto job = Make();
  job->Step(start_);
  fake_->rx.push_back(ArpFrom(kOther, kArpRequest, "0.0.0.0", "10.1.2.3"));
  job->Step(start_ + Ms(200));
  ASSERT_EQ(job->report().conflicts.size(), 1u);
  EXPECT_EQ(job->report().arp_sent, 0);
}

TEST_F(JobTest, NoConflict) {
  target_.addresses = {V4("10.1.2.3")};
  plan_.conflict_probe = true;
  plan_.schedule.fast_count = 0;
  plan_.schedule.tail = {};
  auto job = Make();
  Run(*job);
  EXPECT_TRUE(job->report().conflicts.empty());
  EXPECT_EQ(TimesOf(Kind::kProbe), std::vector<absl::Duration>{Ms(0)});
  EXPECT_EQ(TimesOf(Kind::kGarpRequest), std::vector<absl::Duration>{Ms(200)});
}

TEST_F(JobTest, SendErrorsAreCountedAndTheJobGoesOn) {
  target_.addresses = {V4("10.1.2.3")};
  plan_.prime_gateway = false;
  auto job = Make();
  Run(*job, [&](absl::Duration t) {
    fake_->send_error = t >= Ms(100) && t < Ms(1000)
                            ? absl::UnavailableError("send on eth0 (ifindex 3): Network is down")
                            : absl::OkStatus();
  });
  EXPECT_EQ(job->report().send_errors, 3);
  EXPECT_THAT(job->report().last_error, HasSubstr("eth0"));
  EXPECT_EQ(TimesOf(Kind::kGarpRequest), (std::vector<absl::Duration>{Ms(0), Ms(1000), Ms(5000)}));
}

TEST_F(JobTest, InterfaceGoneEndsTheJob) {
  target_.addresses = {V4("10.1.2.3"), V4("10.1.2.4")};
  auto job = Make();
  job->Step(start_);
  fake_->send_error = absl::NotFoundError("send on eth0 (ifindex 3): No such device (gone)");
  EXPECT_EQ(job->Step(start_ + Ms(100)), absl::InfiniteFuture());
  EXPECT_TRUE(job->done());
  EXPECT_EQ(job->report().send_errors, 1);  // not one per address
  EXPECT_THAT(job->report().last_error, HasSubstr("gone"));
}

TEST(RunToCompletionTest, RunsInRealTimeAndStopsWhenCancelled) {
  auto fake = std::make_shared<FakeState>();
  Target t;
  t.mac = kMac;
  t.addresses = {V4("10.1.2.3")};
  Plan plan;
  plan.schedule.fast_count = 2;
  plan.schedule.fast_interval = Ms(5);
  plan.schedule.tail = {};
  // The job's own start: a clock read after its construction could miss part of its 10 ms.
  const absl::Time before = MonotonicNow();
  Job job(t, plan, std::make_unique<FakeLink>(fake), before);
  Report r = RunToCompletion(job);
  EXPECT_GE(MonotonicNow() - before, Ms(10));
  EXPECT_LT(MonotonicNow() - before, absl::Seconds(2));
  EXPECT_EQ(r.arp_sent, 3);
  EXPECT_TRUE(job.done());

  plan.schedule.tail = {absl::Seconds(30)};
  Job slow(t, plan, std::make_unique<FakeLink>(fake), MonotonicNow());
  // Cancelled once its fast sends are out, not after a fixed delay (a loaded machine can take
  // longer than any): it returns within a second, not after the 30 s tail.
  std::optional<absl::Time> cancelled_at;
  r = RunToCompletion(slow, [&] {
    if (fake->sent.size() < 6) return false;
    if (!cancelled_at) cancelled_at = MonotonicNow();
    return true;
  });
  ASSERT_TRUE(cancelled_at.has_value());
  EXPECT_LT(MonotonicNow() - *cancelled_at, absl::Seconds(1));
  EXPECT_EQ(r.arp_sent, 3);
  EXPECT_TRUE(slow.done());
}

}  // namespace
}  // namespace fabric::announce
