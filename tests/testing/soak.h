// The soak: callers asking SelectNics on connections of their own and watchers following the
// inventory, against a running agent, while the caller changes the host. One home for the load
// test (agent/daemon/api/load_test.cc asserts) and the soak benchmark (tests/bench/soak_bench.cc
// prints).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>

#include "absl/time/time.h"
#include "tests/testing/hostile.h"

namespace fabric::testing {

struct SoakOptions {
  std::string target;  // A gRPC target: "unix:PATH" or "HOST:PORT".
  pid_t agent = -1;    // Measured before, after warm-up, at the end and after the clients left.
  int callers = 64;
  int watchers = 16;
  absl::Duration run = absl::Seconds(60);
  absl::Duration warmup = absl::Seconds(10);
  // Called every `change_every` while the soak runs (the inventory should change each time).
  std::function<void(uint64_t round)> change;
  absl::Duration change_every = absl::Milliseconds(500);
};

struct SoakReport {
  uint64_t calls = 0;
  uint64_t errors = 0;
  std::string first_error;
  uint64_t changes = 0;
  uint64_t generation = 0;  // The inventory's at the end.
  bool caught_up = false;   // Every watcher reached `generation`.
  ProcStats before, warm, end, after;
};

SoakReport RunSoak(const SoakOptions& opt);

// Opens `n` watch streams to `target`, 25 to a connection (under the agent's --max-streams),
// waits for each one's first event, holds them for a second, measures `agent` into `held`, and
// cancels them. Returns how many got their first event.
int HoldWatches(const std::string& target, int n, pid_t agent, ProcStats* held);

}  // namespace fabric::testing
