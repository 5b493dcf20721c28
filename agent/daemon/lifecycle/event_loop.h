// The agent's poll loop as a registry of sources: each source names its descriptors, its next
// deadline, or both, and what to do when one is ready or the deadline has come. The loop knows
// no source by position; a source added or removed changes nothing else.
#pragma once

#include <poll.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace fabric {

struct LoopSource {
  std::string name;  // For logs.
  // Appends this source's descriptors (none, one or many); null: none.
  std::function<void(std::vector<pollfd>*)> fds;
  // When it must run even without an event (InfiniteFuture: never); null: never. Read before each
  // wait, with the time of that wait.
  std::function<absl::Time(absl::Time now)> deadline;
  // `ready`: one of its descriptors has an event; `due`: its deadline has come. Called when
  // either holds, in the order the sources were added.
  std::function<void(bool ready, bool due, absl::Time now)> run;
};

class EventLoop {
 public:
  // Returns an id for Remove.
  int Add(LoopSource source);
  // Safe from a source's own `run`: the source runs no more, from this turn on.
  void Remove(int id);
  // Runs after every turn, whatever ran (copies of counters for other threads).
  void AfterEachTurn(std::function<void()> fn) { after_turn_ = std::move(fn); }
  // Ends Run after the current turn.
  void Stop() { stop_ = true; }
  // Waits and dispatches until Stop; an error of poll itself ends it.
  absl::Status Run();
  size_t size() const;

 private:
  struct Entry {
    int id;
    LoopSource source;
    bool removed = false;
  };
  std::vector<Entry> entries_;
  int next_id_ = 0;
  std::function<void()> after_turn_;
  bool stop_ = false;
};

// poll(2)'s timeout for a wait until `deadline`: -1 for none, rounded up to whole milliseconds.
int PollMillis(absl::Time now, absl::Time deadline);

}  // namespace fabric
