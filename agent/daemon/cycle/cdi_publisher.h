// The CDI spec as a publisher: the host's RDMA devices as container devices
// (agent/publish/cdi), rendered from each published snapshot whose host or policy changed and
// written into the CDI directory only when its bytes change. A write that fails (a read-only or
// full directory) leaves the old spec in place and is a WARNING finding ("cdi") until a write
// succeeds; it is tried again at every publish and every rescan.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "agent/daemon/cycle/publisher.h"
#include "agent/daemon/cycle/snapshot.h"
#include "agent/publish/cdi/cdi_spec.h"
#include "agent/publish/cdi/cdi_writer.h"

namespace fabric {

class CdiPublisher final : public Publisher {
 public:
  CdiPublisher(std::string dir, cdi::SpecOptions opt) : writer_(std::move(dir)), opt_(opt) {}

  void Publish(const Publication& p) override;
  void Retry(const Snapshot& current, absl::Time now) override;
  void Findings(absl::Time now, std::vector<v1::Finding>* out) const override;

  // Renders and writes the spec of `s` unless its host and policy are those of the last
  // successful write; the write's error, if any.
  absl::Status Sync(const Snapshot& s);
  size_t renders() const { return renders_; }  // Spec renders so far (tests, the benchmark).
  size_t writes() const { return writes_; }    // Files actually replaced or removed.
  const std::string& path() const { return writer_.path(); }

 private:
  cdi::SpecWriter writer_;
  const cdi::SpecOptions opt_;
  // The inputs of the last successful write: the very host object and the policy's bytes.
  std::shared_ptr<const v1::Host> host_;
  std::string policy_;
  absl::Status last_;  // The last write's outcome.
  size_t renders_ = 0;
  size_t writes_ = 0;
};

}  // namespace fabric
