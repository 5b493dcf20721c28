// Verbs resources are released in the reverse order of their creation, on every path, and each
// destroy call is checked (rdma-core's examples do the same by hand). A ReleaseStack records one
// undo step per resource as it is created; Release() runs them newest first, keeps going past a
// failure (a removed device fails them with EIO, and the rest must still be freed) and reports
// every failure.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace fabric::probes {

class ReleaseStack {
 public:
  ReleaseStack() = default;
  ReleaseStack(const ReleaseStack&) = delete;
  ReleaseStack& operator=(const ReleaseStack&) = delete;
  // Releases what is left; failures are logged, as a destructor cannot return them.
  ~ReleaseStack();

  // `undo` returns 0, or an errno value (a negative return is taken as -1 with errno set).
  void Push(std::string what, std::function<int()> undo) {
    steps_.emplace_back(std::move(what), std::move(undo));
  }
  bool empty() const { return steps_.empty(); }
  // Runs every step, newest first; Internal listing the failed ones ("ibv_destroy_qp: Input/
  // output error; ..."), else OK.
  absl::Status Release();

 private:
  std::vector<std::pair<std::string, std::function<int()>>> steps_;
};

}  // namespace fabric::probes
