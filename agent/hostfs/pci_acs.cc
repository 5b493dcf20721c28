#include "agent/hostfs/pci_acs.h"

#include <bitset>
#include <cstddef>

#include "absl/strings/str_format.h"

namespace fabric {
namespace {

constexpr size_t kExtStart = 0x100;
constexpr size_t kExtEnd = 0x1000;  // A 12-bit next pointer cannot reach past it.
constexpr size_t kAcsControl = 6;   // ACS Capability (2 bytes) follows the 4-byte header.

uint32_t Le32(std::string_view b, size_t off) {
  return static_cast<uint32_t>(static_cast<uint8_t>(b[off])) |
         static_cast<uint32_t>(static_cast<uint8_t>(b[off + 1])) << 8 |
         static_cast<uint32_t>(static_cast<uint8_t>(b[off + 2])) << 16 |
         static_cast<uint32_t>(static_cast<uint8_t>(b[off + 3])) << 24;
}

}  // namespace

absl::StatusOr<std::optional<uint16_t>> ParseAcsControl(std::string_view config) {
  if (config.size() <= kExtStart) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "only the first %d bytes of config space are readable (root can read the rest)",
        config.size()));
  }
  // One visit per dword of extended space: a revisit is a loop, and the walk is bounded by it.
  std::bitset<(kExtEnd - kExtStart) / 4> seen;
  size_t off = kExtStart;
  for (;;) {
    if (off < kExtStart) {
      return absl::InvalidArgumentError(
          absl::StrFormat("extended capability pointer 0x%x is below 0x100", off));
    }
    if (off + 4 > config.size()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "extended capability at 0x%x is past the %d bytes read", off, config.size()));
    }
    const size_t slot = (off - kExtStart) / 4;
    if (seen.test(slot)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("extended capability list loops back to 0x%x", off));
    }
    seen.set(slot);
    const uint32_t header = Le32(config, off);
    // As the kernel: an all-zero first header means no extended capabilities.
    if (header == 0 && off == kExtStart) return std::nullopt;
    if (header == 0xffffffffu) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "extended capability header at 0x%x reads as all ones (the device did not answer)", off));
    }
    if ((header & 0xffff) == kPciExtCapAcs) {
      if (off + kAcsControl + 2 > config.size()) {
        return absl::InvalidArgumentError(
            absl::StrFormat("ACS capability at 0x%x is cut off by the end of the %d bytes read",
                            off, config.size()));
      }
      return static_cast<uint16_t>(static_cast<uint8_t>(config[off + kAcsControl]) |
                                   static_cast<uint8_t>(config[off + kAcsControl + 1]) << 8);
    }
    // The low two bits of the pointer are reserved; software masks them (PCIe base spec,
    // the kernel's PCI_EXT_CAP_NEXT), so every offset walked is dword-aligned.
    const size_t next = (header >> 20) & 0xffc;
    if (next == 0) return std::nullopt;
    off = next;
  }
}

}  // namespace fabric
