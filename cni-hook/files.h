// Small OS helpers of fabric-cni: state and env files (written atomically), directory listings,
// and an interface's bus address (ETHTOOL_GDRVINFO). Errors are CNI errors (cni.h's Error).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace fabric::cni {

absl::Status MakeDir(const std::string& dir);
// Temp file + rename, so readers see the old file or the new one, never a part.
absl::Status WriteAtomically(const std::string& dir, const std::string& name,
                             const std::string& text);
// `dir` (created when missing) owned by the owner of `like`: the pod records' directory belongs to
// whoever owns envDir (the agent's user), which removes records of pods that died without DEL.
absl::Status MakeDirOwnedLike(const std::string& dir, const std::string& like);
// The inode of `path` (a network namespace's: what /proc/self/ns/net shows inside it).
std::optional<uint64_t> InodeOf(const std::string& path);
// At most 64 KiB; nullopt when it cannot be opened.
std::optional<std::string> ReadText(const std::string& path);
// Names in `dir` not starting with '.'; empty when it cannot be read.
std::vector<std::string> ListDir(const std::string& dir);
// ETHTOOL_GDRVINFO's bus_info in the current netns: a PCI address for physical functions and
// VFs, empty for virtual devices (veth, macvlan).
std::string BusInfo(const std::string& ifname);

}  // namespace fabric::cni
