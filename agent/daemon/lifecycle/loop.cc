// The agent's loop: each thing it waits on is a LoopSource in registration order (the order in
// which a turn handles them): signals, the config file, LLDP, InfiniBand answers, kernel events,
// then the timers (config reload, refresh and rescan, heap trim, watchdog).
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "agent/common/log.h"
#include "agent/config/config.h"
#include "agent/daemon/lifecycle/agent_state.h"

namespace fabric {
namespace {

// Pending kernel events, coalesced for --debounce, and the safety net's next rescan.
struct Pending {
  absl::Time dirty_at = absl::InfiniteFuture();  // When coalesced events are handled.
  std::string why;
  ChangeScope scope;                              // What they named.
  absl::Time reload_at = absl::InfiniteFuture();  // When a changed config file is read.
  absl::Time next_rescan;
  bool events() const { return dirty_at != absl::InfiniteFuture(); }
};

// `why`: "SIGHUP" or "file changed", for the log. `events_pending`: events wait to be handled, so
// what the rescan finds is theirs, not drift.
void Reload(AgentState& st, const char* why, bool events_pending) {
  st.notifier->Notify("RELOADING=1");
  bool policy_changed = false;
  if (!st.opt.config.empty()) {
    auto config = LoadConfig(st.opt.config);
    if (config.ok()) {
      st.process.config = *std::move(config);
      st.cycle.SetPolicy(st.process.config.selection());
      policy_changed = true;
      if (st.workers.prober != nullptr) st.workers.prober->SetSchedule(st.process.config.probes());
      if (st.workers.health != nullptr) st.workers.health->SetConfig(st.process.config.health());
      Log(LogLevel::kInfo, "reloaded ", st.opt.config, " (", why, ")");
    } else {
      Log(LogLevel::kError, "keeping the previous config (", why, "): ", config.status().message());
    }
  }
  st.cycle.Rescan(why, {.policy_changed = policy_changed, .safety_net = !events_pending});
  st.notifier->Notify("READY=1");
}

// The one descriptor `fd()` names at each wait.
std::function<void(std::vector<pollfd>*)> PollIn(std::function<int()> fd) {
  return [fd = std::move(fd)](std::vector<pollfd>* fds) { fds->push_back({fd(), POLLIN, 0}); };
}

void OnSignals(AgentState& st, Pending& p) {
  signalfd_siginfo si;
  while (read(st.process.signals.get(), &si, sizeof(si)) == sizeof(si)) {
    if (si.ssi_signo == SIGHUP) {
      Reload(st, "SIGHUP", p.events());
      continue;
    }
    Log(LogLevel::kInfo, "received ", strsignal(static_cast<int>(si.ssi_signo)), "; stopping");
    st.events.loop.Stop();
    return;
  }
}

// Returns false when the watch broke (it is closed: SIGHUP still reloads).
bool OnConfigFile(AgentState& st, Pending& p, absl::Time now) {
  auto d = st.events.config_watch->Drain();
  if (!d.ok()) {
    Log(LogLevel::kWarning, d.status().message(), "; reload the config with SIGHUP");
    st.events.config_watch.reset();
    return false;
  }
  // Editors write in several steps: read it once they are done.
  if ((d->relevant > 0 || d->overflow) && p.reload_at == absl::InfiniteFuture()) {
    p.reload_at = now + st.opt.debounce;
  }
  return true;
}

// Neighbours change the inventory's netdevs, not what sysfs says: published at once, not
// through a refresh (a flood is bounded per netdev by the table).
void OnLldp(AgentState& st, LldpListener& lldp, bool ready, bool due, absl::Time now) {
  bool changed = ready && lldp.Drain(now);
  changed = (due && lldp.Expire(now)) || changed;
  // At a silence deadline too: the findings say which netdevs heard nothing.
  if (changed || due) st.cycle.Republish();
}

// SMP answers from the worker, and ports due to be asked again.
void OnIbNeighbors(AgentState& st, IbNeighbors& ib, bool ready, bool due, absl::Time now) {
  const bool answered = ready && ib.Collect();
  if (due) ib.Sync(*st.cycle.store().Current()->host, now);
  if (answered) st.cycle.Republish();
}

// Returns false when the source broke: it is closed and health says so.
bool OnKernelEvents(AgentState& st, Pending& p, EventSource* src, absl::Time now) {
  auto d = src->Drain();
  if (!d.ok()) {
    // A broken source would spin the loop.
    Log(LogLevel::kWarning, d.status().message(), "; no more ", src->name(), " events");
    std::erase_if(st.events.kernel, [src](const auto& s) { return s.get() == src; });
    CountSources(st);
    st.cycle.Republish();
    return false;
  }
  if (d->overflow) {
    ++st.counters.netlink_resyncs;
    Log(LogLevel::kInfo, src->name(), " overflowed (ENOBUFS): full resync");
  }
  if (d->relevant > 0 || d->overflow) {
    if (!p.events()) p.dirty_at = now + st.opt.debounce;
    p.why = d->overflow ? absl::StrCat(src->name(), " resync") : d->last;
    p.scope.Merge(d->scope);
  }
  return true;
}

// Coalesced events, the safety-net rescan, the retry of a stale inventory, or the GID tables read
// again after netdev events.
void OnRefresh(AgentState& st, Pending& p, absl::Time now) {
  if (!p.events() && now < p.next_rescan && now < st.cycle.stale_retry_at()) {
    st.cycle.FollowUpGids(now);  // Only the GID follow-up is due.
    return;
  }
  const uint64_t full_before = st.counters.refreshes_full.load();
  if (now >= p.next_rescan || now >= st.cycle.stale_retry_at()) {
    // The safety net reads everything, pending events included (then it is no drift check).
    const bool periodic = now >= p.next_rescan;
    st.cycle.Rescan(periodic ? "periodic" : "retry of a stale inventory",
                    {.safety_net = periodic && !p.events()});
  } else {
    st.cycle.RefreshFor(p.scope, p.why);
  }
  p.scope = ChangeScope();
  p.dirty_at = absl::InfiniteFuture();
  // The safety net runs --rescan-interval after the last full rescan, however many targeted
  // refreshes happened since.
  if (st.counters.refreshes_full.load() != full_before) {
    p.next_rescan = absl::Now() + st.opt.rescan_interval;
  }
}

// Scrapes read the loop's counters of the workers from copies, made after every turn.
void CopyCounters(AgentState& st) {
  if (const LldpListener* lldp = st.workers.lldp.get()) {
    const LldpListener::Counters& c = lldp->counters();
    st.counters.lldp_frames.store(c.frames);
    st.counters.lldp_malformed.store(c.malformed + c.truncated);
    st.counters.lldp_dropped.store(lldp->table().dropped());
    st.counters.lldp_listening.store(lldp->listening());
  }
}

// The sources in the order a turn handles them.
void AddSources(AgentState& st, Pending& p) {
  EventLoop& loop = st.events.loop;
  loop.Add({"signals", PollIn([&st] { return st.process.signals.get(); }), nullptr,
            [&st, &p](bool, bool, absl::Time) { OnSignals(st, p); }});
  if (st.events.config_watch != nullptr) {
    auto id = std::make_shared<int>();
    *id = loop.Add({"config file", PollIn([&st] { return st.events.config_watch->fd(); }), nullptr,
                    [&st, &p, id](bool, bool, absl::Time now) {
                      if (!OnConfigFile(st, p, now)) st.events.loop.Remove(*id);
                    }});
  }
  if (LldpListener* lldp = st.workers.lldp.get()) {
    loop.Add(
        {"LLDP", [lldp](std::vector<pollfd>* fds) { lldp->AppendFds(fds); },
         [lldp](absl::Time now) { return std::min(lldp->NextExpiry(), lldp->NextSilence(now)); },
         [&st, lldp](bool ready, bool due, absl::Time now) {
           OnLldp(st, *lldp, ready, due, now);
         }});
  }
  if (IbNeighbors* ib = st.workers.ib.get()) {
    loop.Add({"InfiniBand neighbours", PollIn([ib] { return ib->fd(); }),
              [ib](absl::Time) { return ib->NextQuery(); },
              [&st, ib](bool ready, bool due, absl::Time now) {
                OnIbNeighbors(st, *ib, ready, due, now);
              }});
  }
  for (const auto& source : st.events.kernel) {
    EventSource* src = source.get();
    auto id = std::make_shared<int>();
    *id = loop.Add({src->name(), PollIn([src] { return src->fd(); }), nullptr,
                    [&st, &p, src, id](bool, bool, absl::Time now) {
                      if (!OnKernelEvents(st, p, src, now)) st.events.loop.Remove(*id);
                    }});
  }
  loop.Add({"config reload", nullptr, [&p](absl::Time) { return p.reload_at; },
            [&st, &p](bool, bool, absl::Time) {
              Reload(st, "file changed", p.events());
              p.reload_at = absl::InfiniteFuture();
            }});
  loop.Add({"refresh", nullptr,
            [&st, &p](absl::Time) {
              return std::min({p.dirty_at, p.next_rescan, st.cycle.stale_retry_at(),
                               st.cycle.gid_follow_up_at()});
            },
            [&st, &p](bool, bool, absl::Time now) { OnRefresh(st, p, now); }});
  if (HealthMonitor* health = st.workers.health.get()) {
    auto next = std::make_shared<absl::Time>(absl::Now() + health->interval());
    loop.Add({"health poll", nullptr, [next](absl::Time) { return *next; },
              [&st, health, next](bool, bool, absl::Time now) {
                // New findings reach GetHealth, the watchers and the publishers now.
                if (health->Poll()) st.cycle.Republish();
                *next = now + health->interval();
              }});
  }
  if (st.workers.kmsg != nullptr && st.workers.health != nullptr) {
    // A source that ended (a FIFO's writer left) has no descriptor (-1: poll skips it) and a
    // deadline to reopen at, so it costs nothing while it is closed.
    loop.Add({"kernel log", PollIn([&st] { return st.workers.kmsg_source->fd(); }),
              [&st](absl::Time) { return st.workers.kmsg_source->reopen_at(); },
              [&st](bool ready, bool due, absl::Time now) {
                KmsgSourceImpl& source = *st.workers.kmsg_source;
                if (due && source.ended()) {
                  if (absl::Status s = source.Reopen(now); !s.ok()) {
                    Log(LogLevel::kDebug, "kernel log: reopen: ", s.message());
                  }
                }
                if (!ready) return;
                // Bounded per wake-up (the reader's rate bound drops a flood); the rest wakes the
                // loop again at once.
                std::vector<KmsgRecord> records = st.workers.kmsg->Drain(now, 4096);
                if (st.workers.health->OnKernelLog(records, st.workers.kmsg->counts())) {
                  st.cycle.Republish();
                }
              }});
  }
  loop.Add({"heap trim", nullptr, [&st](absl::Time) { return st.process.trimmer.next(); },
            [&st](bool, bool, absl::Time now) { st.process.trimmer.Tick(now); }});
  const absl::Duration watchdog = st.notifier->WatchdogInterval();
  if (watchdog > absl::ZeroDuration()) {
    auto next = std::make_shared<absl::Time>(absl::Now());
    loop.Add({"watchdog", nullptr, [next](absl::Time) { return *next; },
              [&st, next, watchdog](bool, bool, absl::Time now) {
                st.notifier->Notify("WATCHDOG=1");
                *next = now + watchdog;
              }});
  }
  loop.AfterEachTurn([&st] { CopyCounters(st); });
}

}  // namespace

void CountSources(AgentState& st) {
  bool route = false, uevent = false;
  for (const auto& s : st.events.kernel) {
    route = route || std::string(s->name()) == "route netlink";
    uevent = uevent || std::string(s->name()) == "uevent";
  }
  st.counters.route_events = route;
  st.counters.uevents = uevent;
}

void RunLoop(AgentState& st) {
  Pending p;
  p.next_rescan = absl::Now() + st.opt.rescan_interval;
  AddSources(st, p);
  if (absl::Status s = st.events.loop.Run(); !s.ok()) Log(LogLevel::kError, s.message());
}

}  // namespace fabric
