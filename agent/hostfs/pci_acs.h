// The ACS (Access Control Services) Control register of a PCIe bridge, parsed from its config
// space as sysfs gives it (/sys/bus/pci/devices/BDF/config). With P2P Request/Completion Redirect
// set on a switch port, GPU-NIC peer traffic goes up to the root complex instead of across the
// switch, which cuts GPUDirect RDMA bandwidth. Pure: the caller reads the bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "absl/status/statusor.h"

namespace fabric {

inline constexpr uint16_t kPciExtCapAcs = 0x000d;

// Walks the extended capability list from offset 0x100. nullopt: the list has no ACS capability.
// FailedPrecondition when `config` ends at or before 0x100 (an unprivileged read of sysfs config
// returns the first 64 bytes only); InvalidArgument when the list is malformed (a pointer below
// 0x100 or past the bytes read, a loop).
absl::StatusOr<std::optional<uint16_t>> ParseAcsControl(std::string_view config);

// ACS Control bits that send peer-to-peer traffic up to the root complex (GPUDirect slow or
// hung, NCCL's own hint).
inline constexpr uint16_t kAcsP2pRequestRedirect = 1 << 2;
inline constexpr uint16_t kAcsP2pCompletionRedirect = 1 << 3;
inline bool AcsRedirects(uint16_t control) {
  return (control & (kAcsP2pRequestRedirect | kAcsP2pCompletionRedirect)) != 0;
}

}  // namespace fabric
