// The CDI spec as a publisher: the host's RDMA devices as container devices
// (agent/publish/cdi), kept in the CDI directory by a FilePublisher (check "cdi").
#pragma once

#include <string>

#include "agent/daemon/cycle/file_publisher.h"
#include "agent/publish/cdi/cdi_spec.h"
#include "agent/publish/cdi/cdi_writer.h"

namespace fabric {

class CdiPublisher final : public FilePublisher {
 public:
  CdiPublisher(std::string dir, cdi::SpecOptions opt)
      : FilePublisher(cdi::SpecWriter(std::move(dir)), "cdi", "CDI spec",
                      "containers get the previous spec's devices",
                      [opt](const Snapshot& s) -> std::optional<std::string> {
                        // No device to name (a spec must have one): a spec left from before
                        // would name gone ones, so the file goes.
                        absl::StatusOr<std::string> spec = cdi::SpecJson(*s.host, s.policy, opt);
                        if (!spec.ok()) return std::nullopt;
                        return *std::move(spec);
                      }) {}
};

}  // namespace fabric
