// A child process for tests that run the real binaries (fabric-agent, fabricctl): started with
// fork/exec, stdout and stderr captured to files, waited for with a bound, killed on destruction.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace fabric::testing {

class Subprocess {
 public:
  // `env` entries ("KEY=VALUE") are added to (or replace in) the test's own environment.
  // `stdin_data`, when given, is the child's stdin (otherwise /dev/null).
  static absl::StatusOr<std::unique_ptr<Subprocess>> Start(
      const std::vector<std::string>& argv, const std::vector<std::string>& env = {},
      const std::optional<std::string>& stdin_data = std::nullopt);
  ~Subprocess();

  pid_t pid() const { return pid_; }
  void Signal(int sig) const;
  // The exit status (128 + signal when killed), or nullopt when still running after `timeout`.
  std::optional<int> Wait(absl::Duration timeout);
  bool running();
  std::string Stdout() const;
  std::string Stderr() const;

 private:
  Subprocess() = default;
  pid_t pid_ = -1;
  std::optional<int> status_;
  std::string dir_;
};

// Runs to completion (bounded); returns {exit status, stdout, stderr}.
struct RunResult {
  int status = -1;
  std::string out;
  std::string err;
};
absl::StatusOr<RunResult> Run(const std::vector<std::string>& argv,
                              absl::Duration timeout = absl::Seconds(30),
                              const std::vector<std::string>& env = {},
                              const std::optional<std::string>& stdin_data = std::nullopt);

// Polls `done` every few milliseconds until it holds or `timeout` passes.
bool WaitFor(const std::function<bool()>& done, absl::Duration timeout);

// Waits up to `timeout` for `mark` in the process's stderr and returns the rest of that line
// (e.g. the port after "listening on 127.0.0.1:"); nullopt when it did not appear.
std::optional<std::string> WaitForLogged(const Subprocess& p, const std::string& mark,
                                         absl::Duration timeout);

// Whether something accepts connections on the Unix socket `path` (a stale file does not).
bool UnixSocketAccepts(const std::string& path);

// Waits until `socket` accepts connections: false when `p` exited first or `timeout` passed
// (callers print p.Stderr()). Connecting only once the socket exists spares a gRPC channel the
// seconds of back-off that an early failed connect costs.
bool WaitForSocket(Subprocess& p, const std::string& socket,
                   absl::Duration timeout = absl::Seconds(20));

// A fresh directory under $TEST_TMPDIR, else /dev/shm when it has over 1 GB free, else /tmp.
std::string MakeTempDir(const std::string& prefix);

}  // namespace fabric::testing
