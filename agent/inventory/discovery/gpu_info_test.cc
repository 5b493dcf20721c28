#include "agent/inventory/discovery/gpu_info.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>

namespace fabric {
namespace {

// As the NVIDIA driver (535, open kernel modules) prints it: "Key: \t value".
constexpr char kH100[] =
    "Model: \t\t NVIDIA H100 80GB HBM3\n"
    "IRQ:   \t\t 412\n"
    "GPU UUID: \t GPU-3F1B2C4D-5e6f-7a8b-9c0d-1e2f3a4b5c6d\n"
    "Video BIOS: \t 96.00.99.00.01\n"
    "Bus Type: \t PCIe\n"
    "DMA Size: \t 52 bits\n"
    "DMA Mask: \t 0xfffffffffffff\n"
    "Bus Location: \t 0000:19:00.0\n"
    "Device Minor: \t 3\n"
    "GPU Firmware: \t 535.161.07\n"
    "GPU Excluded:\t No\n";

TEST(ParseNvidiaGpuInformation, RealFile) {
  absl::StatusOr<NvidiaGpuInfo> info = ParseNvidiaGpuInformation(kH100);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->model, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(info->uuid, "GPU-3f1b2c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d");
  EXPECT_EQ(info->bus_location, "0000:19:00.0");
  EXPECT_EQ(info->device_minor, std::optional<uint32_t>(3));
}

TEST(ParseNvidiaGpuInformation, Table) {
  struct Case {
    const char* text;
    bool ok;
    const char* uuid;
  };
  const Case cases[] = {
      {"GPU UUID: \t GPU-00000000-0000-0000-0000-000000000001\n", true,
       "GPU-00000000-0000-0000-0000-000000000001"},
      {"GPU UUID: \t GPU-00000000-0000-0000-0000-000000000001", true,
       "GPU-00000000-0000-0000-0000-000000000001"},
      {"Model: x\nGPU UUID: \t ??\n", true, ""},  // not initialized
      {"GPU UUID: N/A\nBus Location: 19:00.0\n", true, ""},
      {"\n\nGPU UUID: GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee\n\n", true,
       "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"},
      {"", false, ""},                                                     // no UUID line
      {"Model: NVIDIA H100\n", false, ""},                                 // no UUID line
      {"GPU UUID GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee\n", false, ""},  // no colon
      {"GPU UUID: GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeee\n", false, ""},  // short group
      {"GPU UUID: GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeeg\n", false, ""},
      {"GPU UUID: MIG-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee\n", false, ""},  // not a GPU
      {"GPU UUID: aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee\n", false, ""},      // no prefix
      {"GPU UUID: ??\nGPU UUID: ??\n", false, ""},                          // repeated
      {"GPU UUID: ??\nBus Location: 0000:zz:00.0\n", false, ""},
      {"GPU UUID: ??\nDevice Minor: -1\n", false, ""},
      {"GPU UUID: ??\nDevice Minor: many\n", false, ""},
      {": x\nGPU UUID: ??\n", false, ""},
  };
  for (const Case& c : cases) {
    absl::StatusOr<NvidiaGpuInfo> info = ParseNvidiaGpuInformation(c.text);
    EXPECT_EQ(info.ok(), c.ok) << c.text << " -> " << info.status();
    if (info.ok() && c.ok) {
      EXPECT_EQ(info->uuid, c.uuid) << c.text;
    }
    if (!info.ok()) {
      EXPECT_TRUE(absl::IsInvalidArgument(info.status())) << info.status();
    }
  }
}

TEST(ParseNvidiaUuid, Table) {
  const std::pair<const char*, const char*> cases[] = {
      {"GPU-3f1b2c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d", "GPU-3f1b2c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d"},
      {"gpu-3F1B2C4D-5E6F-7A8B-9C0D-1E2F3A4B5C6D", "GPU-3f1b2c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d"},
      {"MIG-3f1b2c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d", "MIG-3f1b2c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d"},
      {"GPU-3f1b2c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6", ""},
      {"GPU-3f1b2c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d0", ""},
      {"GPU-3f1b2c4d5e6f-7a8b-9c0d-1e2f3a4b5c6d0", ""},
      {"GPU-", ""},
      {"GPU", ""},
      {"", ""},
      {"XPU-3f1b2c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d", ""},
      {"GPU-3f1b2c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6 ", ""},
  };
  for (const auto& [in, want] : cases) {
    absl::StatusOr<std::string> got = ParseNvidiaUuid(in);
    if (*want == '\0') {
      EXPECT_TRUE(absl::IsInvalidArgument(got.status())) << in;
    } else {
      EXPECT_EQ(got.value_or("error"), want) << in;
    }
  }
}

TEST(ParseAmdUniqueId, Table) {
  const std::pair<const char*, const char*> cases[] = {
      {"d3b4a1c0e5f69788\n", "GPU-d3b4a1c0e5f69788"},
      {"D3B4A1C0E5F69788", "GPU-d3b4a1c0e5f69788"},
      {"0x1234\n", "GPU-0000000000001234"},
      {"1234", "GPU-0000000000001234"},
      {"0000000000000000\n", ""},
      {"", ""},
      {"\n", ""},
      {"d3b4a1c0e5f697880", ""},
      {"d3b4a1c0e5f6978g", ""},
      {"0x", ""},
  };
  for (const auto& [in, want] : cases) {
    absl::StatusOr<std::string> got = ParseAmdUniqueId(in);
    if (*want == '\0') {
      EXPECT_TRUE(absl::IsInvalidArgument(got.status())) << in;
    } else {
      EXPECT_EQ(got.value_or("error"), want) << in;
    }
  }
}

}  // namespace
}  // namespace fabric
