// What limits a job's process will register RDMA memory and NCCL's shared memory under, read the
// way the kernel reports them to that process: RLIMIT_MEMLOCK (with CAP_IPC_LOCK the kernel does
// not enforce it for ibv_reg_mr), RLIMIT_NOFILE, and /dev/shm (its filesystem, read-only flag,
// size and free bytes). Parsers take the text; the reader only gathers it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace fabric {

inline constexpr int kCapIpcLock = 14;  // linux/capability.h

// CapEff from /proc/<pid>/status text.
absl::StatusOr<uint64_t> ParseCapEff(std::string_view proc_status);

struct MountEntry {
  std::string mount_point;  // Unescaped (\040 is a space).
  std::string fstype;
  bool read_only = false;  // The mount's own options (per-mount "ro").
};
// The entry of /proc/<pid>/mountinfo text mounted last at `mount_point` (the one in effect).
std::optional<MountEntry> FindMount(std::string_view mountinfo, std::string_view mount_point);

struct ProcessLimits {
  std::optional<uint64_t> memlock_soft;              // Bytes; nullopt: unlimited.
  std::optional<uint64_t> nofile_soft, nofile_hard;  // nullopt: unlimited.
  std::optional<bool> cap_ipc_lock;                  // nullopt: unreadable.
  std::optional<MountEntry> shm;                     // nullopt: /dev/shm is not a mount point.
  std::optional<uint64_t> shm_size, shm_free;        // Bytes; nullopt when statvfs failed.
  std::vector<std::string> unreadable;               // What could not be read, each a sentence.
};

// This process's; `proc` and `shm` are the paths to read (tests point them elsewhere).
ProcessLimits ReadProcessLimits(const std::string& proc = "/proc/self",
                                const std::string& shm = "/dev/shm");

}  // namespace fabric
