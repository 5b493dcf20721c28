// The published host file as a publisher (agent/publish/hostfile): the snapshot's host and
// policy, kept by a FilePublisher (check "host-file") for fabric-env and fabricctl exec.
#pragma once

#include <string>

#include "agent/daemon/cycle/file_publisher.h"
#include "agent/publish/hostfile/host_file.h"

namespace fabric {

class HostFilePublisher final : public FilePublisher {
 public:
  explicit HostFilePublisher(std::string dir)
      : FilePublisher(
            KeptFile(std::move(dir), hostfile::kFileName, "published host"), "host-file",
            "published host", "jobs started with fabric-env get the previous host's answer",
            // The agent's namespace is the host's: fabric-env elsewhere is in a pod.
            [netns = hostfile::OwnNetnsInode()](const Snapshot& s) -> std::optional<std::string> {
              return hostfile::HostFileBytes(*s.host, s.policy, netns);
            }) {}
};

}  // namespace fabric
