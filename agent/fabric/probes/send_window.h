// Internal: the sending half of perftest's bandwidth loops (run_iter_bw, run_iter_bi).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "agent/fabric/probes/verbs_resources.h"

namespace fabric::probes {

// On each QP at most tx_depth messages outstanding, posted post_list at a time, every cq_mod-th
// (and, by iterations, the last) signalled; a signalled completion accounts for every message up
// to it. By iterations each QP sends the run's iterations; in duration mode until Stop().
class SendWindow {
 public:
  explicit SendWindow(VerbsResources& v);
  SendWindow(const SendWindow&) = delete;
  SendWindow& operator=(const SendWindow&) = delete;

  // Posts on QP `q` what its window admits, each message's post time into `post_ns` (if set).
  // After Stop(): one last signalled message where the QP's last ones went unsignalled, so that
  // its completion covers them.
  absl::Status Fill(uint32_t q, std::vector<int64_t>* post_ns);
  void Stop() { stopping_ = true; }
  // A successful completion of one of this window's work requests.
  void Complete(uint64_t wr_id);
  // Messages completed on all QPs.
  uint64_t completed() const { return total_completed_; }
  // Every posted message has completed.
  bool Drained() const;

 private:
  VerbsResources& v_;
  const ProbeParams& p_;
  const bool dur_;
  bool stopping_ = false;
  std::vector<ibv_sge> sges_;  // one per QP, which wrs_ point at
  std::vector<std::vector<ibv_send_wr>> wrs_;
  std::vector<uint64_t> posted_, completed_, last_signaled_;
  uint64_t total_completed_ = 0;
};

}  // namespace fabric::probes
