#include "agent/daemon/lifecycle/event_loop.h"

#include <cerrno>
#include <climits>

#include "absl/strings/str_cat.h"
#include "agent/common/errno.h"

namespace fabric {

int PollMillis(absl::Time now, absl::Time deadline) {
  if (deadline == absl::InfiniteFuture()) return -1;
  if (deadline <= now) return 0;
  return static_cast<int>(std::min<int64_t>(
      INT_MAX, absl::ToInt64Milliseconds(absl::Ceil(deadline - now, absl::Milliseconds(1)))));
}

int EventLoop::Add(LoopSource source) {
  entries_.push_back({next_id_, std::move(source)});
  return next_id_++;
}

void EventLoop::Remove(int id) {
  for (Entry& e : entries_) {
    if (e.id == id) e.removed = true;
  }
}

size_t EventLoop::size() const {
  size_t n = 0;
  for (const Entry& e : entries_) n += e.removed ? 0 : 1;
  return n;
}

absl::Status EventLoop::Run() {
  std::vector<pollfd> fds;
  // Per source: its first descriptor's index in `fds`, and its deadline for this turn.
  std::vector<size_t> first;
  std::vector<absl::Time> due_at;
  while (!stop_) {
    std::erase_if(entries_, [](const Entry& e) { return e.removed; });
    absl::Time now = absl::Now();
    fds.clear();
    first.clear();
    due_at.clear();
    absl::Time deadline = absl::InfiniteFuture();
    for (const Entry& e : entries_) {
      first.push_back(fds.size());
      if (e.source.fds) e.source.fds(&fds);
      due_at.push_back(e.source.deadline ? e.source.deadline(now) : absl::InfiniteFuture());
      deadline = std::min(deadline, due_at.back());
    }
    first.push_back(fds.size());
    const int n = poll(fds.data(), fds.size(), PollMillis(now, deadline));
    if (n < 0 && errno != EINTR)
      return absl::InternalError(absl::StrCat("poll: ", ErrnoText(errno)));
    // Sources added while dispatching wait for the next turn: only those polled run now.
    const size_t polled = first.size() - 1;
    for (size_t i = 0; i < polled && !stop_; ++i) {
      if (entries_[i].removed) continue;
      bool ready = false;
      for (size_t k = first[i]; n > 0 && k < first[i + 1]; ++k)
        ready = ready || fds[k].revents != 0;
      now = absl::Now();
      const bool due = now >= due_at[i];
      // A copy: `run` may add sources, which moves the entries.
      if (ready || due) {
        auto run = entries_[i].source.run;
        run(ready, due, now);
      }
    }
    if (after_turn_) after_turn_();
  }
  return absl::OkStatus();
}

}  // namespace fabric
