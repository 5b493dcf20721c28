// Removes fabric-cni's pod records (agent/publish/podrecord) whose pod is gone without a CNI DEL
// (a crashed runtime, a node reboot without GC): the namespace path a record names no longer
// exists, or is another namespace now (an nsfs file whose inode differs). A record is judged only
// when the directory holding its namespace path is visible here (the DaemonSet mounts /run/netns),
// so a path the agent cannot see is never taken for a gone one. Records younger than kGrace are
// left alone: ADD writes the record while its namespace exists. Runs at most every kInterval, on
// the cycle's thread (Publish and Retry).
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "agent/daemon/cycle/publisher.h"

namespace fabric {

class PodRecordSweeper final : public Publisher {
 public:
  static constexpr absl::Duration kInterval = absl::Seconds(60);
  static constexpr absl::Duration kGrace = absl::Seconds(60);

  explicit PodRecordSweeper(std::string records_dir) : dir_(std::move(records_dir)) {}

  void Publish(const Publication& p) override { MaybeSweep(p.now); }
  void Retry(const Snapshot&, absl::Time now) override { MaybeSweep(now); }
  void Findings(absl::Time now, std::vector<v1::Finding>* out) const override;

  // One pass now: how many records were removed. Errors other than a missing directory are kept
  // for Findings (the directory not writable by the agent's user).
  int Sweep(absl::Time now);

 private:
  void MaybeSweep(absl::Time now);
  const std::string dir_;
  absl::Time last_ = absl::InfinitePast();
  absl::Status error_;
};

}  // namespace fabric
