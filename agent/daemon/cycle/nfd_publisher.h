// The NFD feature file as a publisher: node labels rendered from each published snapshot and
// written where nfd-worker's local source reads them, only when they changed.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "agent/daemon/cycle/publisher.h"
#include "agent/daemon/cycle/snapshot.h"

namespace fabric {

class NfdPublisher final : public Publisher {
 public:
  // `dir`: NFD's features.d directory.
  explicit NfdPublisher(std::string dir) : dir_(std::move(dir)) {}
  // Renders and writes the labels of `s` now (start-up: a directory that cannot be written is a
  // configuration error there).
  absl::Status Write(const Snapshot& s);
  // Most changes (a GID, a link state) leave the labels as they were: no rewrite, no NFD event.
  // A failed write is logged and tried again at the next publish.
  void Publish(const Publication& p) override;

 private:
  const std::string dir_;
  std::string written_;  // The file's content as last written; empty: write at the next publish.
  // The health verdict written: labels_same says nothing of health, which changes on its own.
  v1::Severity written_health_ = v1::SEVERITY_UNSPECIFIED;
};

}  // namespace fabric
