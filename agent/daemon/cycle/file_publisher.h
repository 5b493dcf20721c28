// A file kept from each published snapshot (the CDI spec, the published host): rendered when the
// snapshot's host or policy changed and written only when its bytes change. A write that fails (a
// read-only or full directory) leaves the old file in place and is a WARNING finding until a
// write succeeds; it is tried again at every publish and every rescan.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/common/kept_file.h"
#include "agent/daemon/cycle/publisher.h"
#include "agent/daemon/cycle/snapshot.h"

namespace fabric {

class FilePublisher : public Publisher {
 public:
  // The file's text for a snapshot; nullopt: the file must not exist (the old one is removed).
  using Render = std::function<std::optional<std::string>(const Snapshot&)>;

  // `check`: the finding's check name; `what`: the file in log lines and findings ("CDI spec");
  // `consequence`: what readers get meanwhile ("containers get the previous spec's devices").
  FilePublisher(KeptFile file, std::string check, std::string what, std::string consequence,
                Render render)
      : file_(std::move(file)),
        check_(std::move(check)),
        what_(std::move(what)),
        consequence_(std::move(consequence)),
        render_(std::move(render)) {}

  void Publish(const Publication& p) override;
  void Retry(const Snapshot& current, absl::Time now) override;
  void Findings(absl::Time now, std::vector<v1::Finding>* out) const override;

  // Renders and writes the file of `s` unless its host and policy are those of the last
  // successful write; the write's error, if any.
  absl::Status Sync(const Snapshot& s);
  size_t renders() const { return renders_; }  // Renders so far (tests, the benchmarks).
  size_t writes() const { return writes_; }    // Files actually replaced or removed.
  const std::string& path() const { return file_.path(); }

 private:
  KeptFile file_;
  const std::string check_;
  const std::string what_;
  const std::string consequence_;
  const Render render_;
  // The inputs of the last successful write: the very host object and the policy's bytes.
  std::shared_ptr<const v1::Host> host_;
  std::string policy_;
  absl::Status last_;  // The last write's outcome.
  size_t renders_ = 0;
  size_t writes_ = 0;
};

}  // namespace fabric
