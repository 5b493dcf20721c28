// fabric-cni's pod routing (issue 16): on each pod interface ADD handles, the ARP sysctls and
// source routing of agent/fabric/announce/pod_routing.h, a record of them in stateDir
// (<containerid>-<ifname>.routes) for DEL and GC, and their removal.
//
// The record holds the netns, the tables and the sysctl values found before ADD; DEL removes
// our rules and routes of those tables (and of any table of the range whose routes of ours leave
// through the attachment's interfaces, should the record be lost) and restores the sysctls where
// the interface still exists.
#pragma once

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/fabric/announce/pod_routing.h"
#include "cni-hook/cni.h"

namespace fabric::cni {

inline constexpr int kPodRoutingFailed = 104;  // a table or rule could not be set up

struct PodRoutingAdded {
  announce::Undo undo;      // what this ADD changed
  bool new_record = false;  // the record did not exist before
};
// ADD, in the pod's netns (the caller entered it), before the first announcement. On error
// nothing of it is left. A later failure of ADD takes it back with UndoPodRouting.
absl::StatusOr<PodRoutingAdded> AddPodRouting(const Env& env, const Config& config,
                                              const std::string& sysfs_root,
                                              const std::vector<PodInterface>& pods);
// Enters the netns, reverts what ADD changed, removes a record ADD created.
void UndoPodRouting(const Env& env, const Config& config, const PodRoutingAdded& added);
// DEL: a gone netns is not an error (its rules went with it).
absl::Status DelPodRouting(const Env& env, const Config& config,
                           const std::vector<std::string>& ifnames);
// CHECK, in the pod's netns: what the record names is still there.
absl::Status CheckPodRouting(const Env& env, const Config& config,
                             const std::vector<PodInterface>& pods);
// GC: records of attachments not in `valid` are undone and removed. Returns how many.
int GcPodRouting(const Config& config, const std::set<std::pair<std::string, std::string>>& valid);

}  // namespace fabric::cni
