#include "agent/fabric/announce/announce.h"

#include <arpa/inet.h>
#include <poll.h>
#include <time.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "agent/fabric/announce/frames.h"

namespace fabric::announce {
namespace {

// Tentative IPv6 addresses are re-checked this often, up to kTentativeLimit after start.
constexpr absl::Duration kTentativePoll = absl::Milliseconds(100);
constexpr absl::Duration kTentativeLimit = absl::Seconds(3);
// Frames handled per Step at most, so a flood cannot hold the caller's thread.
constexpr int kMaxFramesPerStep = 256;

in_addr V4(const in6_addr& a) {
  in_addr v{};
  std::memcpy(&v, &a, sizeof(v));
  return v;
}

bool SameV4(const in_addr& a, const in_addr& b) { return a.s_addr == b.s_addr; }

}  // namespace

std::vector<absl::Duration> Schedule::Offsets() const {
  std::vector<absl::Duration> out = {absl::ZeroDuration()};
  for (int i = 1; i <= fast_count; ++i) out.push_back(fast_interval * i);
  out.insert(out.end(), tail.begin(), tail.end());
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

absl::Status Schedule::Validate() const {
  if (fast_count < 0 || fast_count > 100) {
    return absl::InvalidArgumentError(absl::StrCat("fast_count ", fast_count, " not in 0..100"));
  }
  if (fast_interval < absl::Milliseconds(1) || fast_interval > absl::Seconds(60)) {
    return absl::InvalidArgumentError(
        absl::StrCat("fast_interval ", absl::FormatDuration(fast_interval), " not in 1ms..60s"));
  }
  if (tail.size() > 100) {
    return absl::InvalidArgumentError(absl::StrCat(tail.size(), " tail offsets (at most 100)"));
  }
  for (absl::Duration d : tail) {
    if (d < absl::ZeroDuration() || d > absl::Minutes(10)) {
      return absl::InvalidArgumentError(
          absl::StrCat("tail offset ", absl::FormatDuration(d), " not in 0..10m"));
    }
  }
  if (fast_interval * fast_count > absl::Minutes(10)) {
    return absl::InvalidArgumentError("fast repeats run past 10m");
  }
  return absl::OkStatus();
}

std::string MacString(const Mac& m) {
  char buf[18];
  std::snprintf(buf, sizeof(buf), "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4],
                m[5]);
  return buf;
}

std::string Address::ToString() const {
  std::string s = IpToString(family, addr);
  if (prefix_len > 0) absl::StrAppend(&s, "/", prefix_len);
  if (has_gateway) absl::StrAppend(&s, " via ", IpToString(family, gateway));
  return s;
}

absl::Time MonotonicNow() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return absl::TimeFromTimespec(ts);
}

struct Job::State {
  struct Addr {
    Address a;
    bool conflict = false;
    bool announced = false;  // IPv6: an NA went out (tentative ones wait)
    bool gave_up = false;    // IPv6: DAD failed or stayed tentative too long
    bool primed = false;
    int gateway = -1;  // index into report.gateways while waiting for its answer
    absl::Time primed_at;
    absl::Time gateway_deadline;
  };

  Target target;
  Plan plan;
  std::unique_ptr<Link> link;
  absl::Time start;
  absl::Time base;  // offset 0 of the announcements: after the probe when probing
  std::vector<absl::Duration> offsets;
  size_t next_round = 0;
  enum class Probe { kNone, kWaiting, kDone } probe = Probe::kNone;
  absl::Time probe_deadline;
  bool probing = false;  // conflict_probe with IPv4 addresses, and round 0 is ours
  bool first_round_sent = false;
  bool priming_started = false;
  absl::Time v6_poll = absl::InfinitePast();
  std::vector<Addr> addrs;
  Report report;
  bool done = false;

  bool IsV4(const Addr& x) const { return x.a.family == AF_INET; }
  bool IsV6(const Addr& x) const { return x.a.family == AF_INET6 && plan.ipv6; }
  bool PendingV6(const Addr& x) const { return IsV6(x) && !x.announced && !x.gave_up; }

  void Note(std::string msg) { report.last_error = std::move(msg); }

  // False when the frame did not go out; a vanished interface ends the job.
  bool SendFrame(const std::vector<uint8_t>& frame) {
    if (done) return false;
    absl::Status s = link->Send(frame);
    if (s.ok()) return true;
    ++report.send_errors;
    Note(std::string(s.message()));
    if (absl::IsNotFound(s)) done = true;
    return false;
  }

  void Probe() {
    for (Addr& x : addrs) {
      if (IsV4(x)) SendFrame(BuildArpProbe(target.mac, V4(x.a.addr)));
    }
  }

  void AnnounceV4(const Addr& x) {
    if (SendFrame(BuildGratuitousArp(target.mac, V4(x.a.addr), ArpForm::kRequest))) {
      ++report.arp_sent;
    }
    if (plan.arp_reply_form &&
        SendFrame(BuildGratuitousArp(target.mac, V4(x.a.addr), ArpForm::kReply))) {
      ++report.arp_sent;
    }
  }

  // Sends the NA unless the address is still tentative.
  void AnnounceV6(Addr& x, absl::Time now) {
    absl::StatusOr<bool> tentative = link->Tentative(x.a.addr);
    if (!tentative.ok()) {
      if (absl::IsFailedPrecondition(tentative.status())) {
        x.gave_up = true;
        Note(absl::StrCat(IpToString(AF_INET6, x.a.addr), ": ", tentative.status().message(),
                          "; no NA sent"));
      } else {
        Note(absl::StrCat(IpToString(AF_INET6, x.a.addr),
                          ": DAD state unknown: ", tentative.status().message()));
      }
      return;
    }
    if (*tentative) return;
    if (!SendFrame(BuildUnsolicitedNa(target.mac, x.a.addr))) return;
    ++report.na_sent;
    if (!x.announced) {
      x.announced = true;
      Prime(x, now);  // an NS from a tentative address would be premature
    }
  }

  void Round(absl::Time now) {
    for (Addr& x : addrs) {
      if (done) return;
      if (IsV4(x) && !x.conflict) AnnounceV4(x);
      if (IsV6(x) && !x.gave_up) AnnounceV6(x, now);
    }
    v6_poll = now + kTentativePoll;
  }

  void Prime(Addr& x, absl::Time now) {
    if (!plan.prime_gateway || !priming_started || x.primed || !x.a.has_gateway) return;
    if (IsV4(x)) {
      if (x.conflict) return;
      x.primed = true;
      if (!SendFrame(BuildArpRequest(target.mac, V4(x.a.addr), V4(x.a.gateway)))) return;
    } else if (IsV6(x)) {
      if (!x.announced) return;
      x.primed = true;
      if (!SendFrame(BuildNeighborSolicitation(target.mac, x.a.addr, x.a.gateway))) return;
    } else {
      return;
    }
    x.primed_at = now;
    x.gateway_deadline = now + plan.gateway_timeout;
    x.gateway = static_cast<int>(report.gateways.size());
    Report::Gateway g;
    g.address = IpToString(x.a.family, x.a.gateway);
    report.gateways.push_back(g);
  }

  void Answered(Addr& x, absl::Time now, const Mac& mac) {
    Report::Gateway& g = report.gateways[static_cast<size_t>(x.gateway)];
    g.reachable = true;
    g.rtt = now - x.primed_at;
    g.mac = mac;
    x.gateway = -1;
  }

  void HandleArp(const ArpPacket& p, absl::Time now) {
    for (Addr& x : addrs) {
      if (!IsV4(x)) continue;
      const in_addr ip = V4(x.a.addr);
      // RFC 5227 2.1.1: any ARP with our IP as sender, or a probe for it, from another MAC.
      if (probe == Probe::kWaiting && !x.conflict && p.sender_mac != target.mac &&
          (SameV4(p.sender_ip, ip) ||
           (p.op == kArpRequest && p.sender_ip.s_addr == 0 && SameV4(p.target_ip, ip)))) {
        x.conflict = true;
        report.conflicts.push_back({IpToString(AF_INET, x.a.addr), p.sender_mac});
      }
      if (x.gateway >= 0 && p.op == kArpReply && SameV4(p.sender_ip, V4(x.a.gateway)) &&
          SameV4(p.target_ip, ip)) {
        Answered(x, now, p.sender_mac);
      }
    }
  }

  void HandleNa(const NdPacket& p, absl::Time now) {
    for (Addr& x : addrs) {
      if (x.gateway >= 0 && IsV6(x) &&
          std::memcmp(&p.target, &x.a.gateway, sizeof(in6_addr)) == 0) {
        Answered(x, now, p.target_lladdr.value_or(p.eth_src));
      }
    }
  }

  void Drain(absl::Time now) {
    for (int i = 0; i < kMaxFramesPerStep; ++i) {
      absl::StatusOr<std::vector<uint8_t>> f = link->TryReceive();
      if (!f.ok()) {
        if (!absl::IsNotFound(f.status())) Note(std::string(f.status().message()));
        return;
      }
      if (auto arp = ParseArp(AsView(*f)); arp.ok()) {
        HandleArp(*arp, now);
      } else if (auto na = ParseNeighborAdvert(AsView(*f)); na.ok()) {
        HandleNa(*na, now);
      }
    }
  }

  absl::Time Step(absl::Time now) {
    if (done) return absl::InfiniteFuture();
    if (now < start) return start;
    Drain(now);
    if (probe == Probe::kNone && probing) {
      Probe();
      probe = Probe::kWaiting;
      probe_deadline = start + plan.conflict_timeout;
    }
    if (probe == Probe::kWaiting && now >= probe_deadline) probe = Probe::kDone;
    if (done) return absl::InfiniteFuture();

    bool round_sent = false;
    if (probe != Probe::kWaiting) {
      // Rounds that are overdue collapse into one: a late job does not burst.
      size_t due = next_round;
      while (due < offsets.size() && now >= base + offsets[due]) ++due;
      if (due > next_round) {
        next_round = due;
        Round(now);
        round_sent = true;
        if (!first_round_sent) {
          first_round_sent = true;
          if (!done) return now;  // gateways are primed by the next Step
        }
      }
    }
    if (first_round_sent && !priming_started) {
      priming_started = true;
      for (Addr& x : addrs) Prime(x, now);
    }
    const bool rounds_left = next_round < offsets.size();
    const absl::Time v6_limit = start + kTentativeLimit;
    if (first_round_sent && !round_sent && now >= v6_poll && now < v6_limit) {
      for (Addr& x : addrs) {
        if (PendingV6(x)) AnnounceV6(x, now);
      }
      v6_poll = now + kTentativePoll;
    }
    if (first_round_sent && !rounds_left && now >= v6_limit) {
      for (Addr& x : addrs) {
        if (!PendingV6(x)) continue;
        x.gave_up = true;
        Note(absl::StrCat(IpToString(AF_INET6, x.a.addr), " still tentative after ",
                          absl::FormatDuration(now - start), "; no NA sent"));
      }
    }
    if (done) return absl::InfiniteFuture();

    absl::Time next = absl::InfiniteFuture();
    if (probe == Probe::kWaiting) next = std::min(next, probe_deadline);
    if (rounds_left) next = std::min(next, base + offsets[next_round]);
    for (Addr& x : addrs) {
      if (x.gateway >= 0) {
        if (now >= x.gateway_deadline) {
          x.gateway = -1;  // unanswered: stays unreachable
        } else {
          next = std::min(next, x.gateway_deadline);
        }
      }
      if (first_round_sent && PendingV6(x)) {
        next = std::min(next,
                        now < v6_limit ? std::min(v6_poll, v6_limit) : base + offsets[next_round]);
      }
    }
    if (next == absl::InfiniteFuture()) done = true;
    return next;
  }
};

Job::Job(Target target, Plan plan, std::unique_ptr<Link> link, absl::Time start, bool first_done)
    : s_(std::make_unique<State>()) {
  s_->target = std::move(target);
  s_->plan = std::move(plan);
  s_->link = std::move(link);
  s_->start = start;
  s_->offsets = s_->plan.schedule.Offsets();
  for (const Address& a : s_->target.addresses) {
    State::Addr x;
    x.a = a;
    s_->addrs.push_back(x);
    if (a.family == AF_INET) s_->probing = s_->plan.conflict_probe && !first_done;
  }
  s_->base = s_->probing ? start + s_->plan.conflict_timeout : start;
  if (first_done) {
    s_->next_round = 1;  // offsets[0] is always 0
    s_->first_round_sent = true;
    s_->probe = State::Probe::kDone;
    s_->v6_poll = start + kTentativePoll;  // the sender of round 0 checked at 0
  }
}

Job::~Job() = default;
Job::Job(Job&&) noexcept = default;
Job& Job::operator=(Job&&) noexcept = default;

absl::Time Job::Step(absl::Time now) { return s_->Step(now); }
bool Job::done() const { return s_->done; }
void Job::Cancel() { s_->done = true; }
int Job::poll_fd() const { return s_->link ? s_->link->poll_fd() : -1; }
const Report& Job::report() const { return s_->report; }
const Target& Job::target() const { return s_->target; }
bool Job::first_round_sent() const { return s_->first_round_sent; }
Link& Job::link() { return *s_->link; }

Report RunToCompletion(Job& job, const std::function<bool()>& cancelled) {
  int error_wakes = 0;
  for (;;) {
    if (cancelled && cancelled()) {
      job.Cancel();
      break;
    }
    const absl::Time next = job.Step(MonotonicNow());
    if (job.done()) break;
    absl::Duration wait = next - MonotonicNow();
    if (wait <= absl::ZeroDuration()) continue;
    // `cancelled` is a predicate, not an fd: look at it at least every 100 ms.
    if (cancelled) wait = std::min(wait, absl::Milliseconds(100));
    const int64_t ms = std::min<int64_t>(
        absl::ToInt64Milliseconds(absl::Ceil(wait, absl::Milliseconds(1))), INT_MAX);
    pollfd p{job.poll_fd(), POLLIN, 0};
    // A socket stuck in an error state would wake poll at once forever: after two such wakes,
    // just sleep until the next step.
    const bool use_fd = p.fd >= 0 && error_wakes < 2;
    int n = poll(use_fd ? &p : nullptr, use_fd ? 1 : 0, static_cast<int>(ms));
    if (n > 0 && (p.revents & (POLLERR | POLLHUP | POLLNVAL)) != 0) {
      ++error_wakes;
    } else {
      error_wakes = 0;
    }
  }
  return job.report();
}

}  // namespace fabric::announce
