// Parsers for what GPU drivers say about their GPUs: the NVIDIA driver's
// /proc/driver/nvidia/gpus/<bdf>/information and amdgpu's `unique_id` PCI attribute. Text in,
// no file system; table-tested (gpu_info_test.cc) and fuzzed (gpu_info_fuzz.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace fabric {

// The fields of an NVIDIA information file the agent uses. The driver prints "Key: \t value"
// lines ("Model:", "IRQ:", "GPU UUID:", "Video BIOS:", "Bus Type:", "DMA Size:", "DMA Mask:",
// "Bus Location:", "Device Minor:", "GPU Excluded:", ...); unknown keys are ignored.
struct NvidiaGpuInfo {
  std::string model;
  // "GPU-8a3b7c1e-..." as printed, lower-cased hex; empty where the driver prints "??" or "N/A"
  // (a GPU it has not initialized).
  std::string uuid;
  std::string bus_location;  // Canonical PCI address; empty when absent.
  std::optional<uint32_t> device_minor;
};

// InvalidArgument for a file without a "GPU UUID:" line, a malformed UUID, bus location or
// minor, a repeated key, or a line without a colon.
absl::StatusOr<NvidiaGpuInfo> ParseNvidiaGpuInformation(std::string_view text);

// An NVIDIA UUID, "GPU-" or "MIG-" then 8-4-4-4-12 hex digits (any case) -> lower-cased hex
// with the prefix as given ("GPU-"/"MIG-" upper case). InvalidArgument otherwise.
absl::StatusOr<std::string> ParseNvidiaUuid(std::string_view s);

// amdgpu's unique_id ("%016llx\n", 1 to 16 hex digits) -> ROCm's name "GPU-<16 hex digits>",
// lower case. InvalidArgument otherwise (an all-zero id, which amdgpu prints for a GPU without
// one, included).
absl::StatusOr<std::string> ParseAmdUniqueId(std::string_view s);

}  // namespace fabric
