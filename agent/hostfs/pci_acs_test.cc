#include "agent/hostfs/pci_acs.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace fabric {
namespace {

using ::testing::HasSubstr;

// An extended capability to place in a config dump.
struct Cap {
  size_t offset;
  uint16_t id;
  uint16_t next;     // Raw 12-bit field, as written (low bits included).
  uint16_t control;  // ACS Control (offset+6), written for an ACS capability only.
};

// A config dump of `size` bytes: zeros, then each capability's header (and ACS Control).
std::string Config(size_t size, const std::vector<Cap>& caps) {
  std::string c(size, '\0');
  auto put = [&](size_t off, uint32_t v, int bytes) {
    for (int i = 0; i < bytes && off + i < c.size(); ++i) {
      c[off + i] = static_cast<char>((v >> (8 * i)) & 0xff);
    }
  };
  for (const Cap& cap : caps) {
    put(cap.offset, cap.id | (1u << 16) | (static_cast<uint32_t>(cap.next) << 20), 4);
    if (cap.id == kPciExtCapAcs) put(cap.offset + 6, cap.control, 2);
  }
  return c;
}

struct Case {
  std::string name;
  std::string config;
  absl::StatusCode code;
  std::optional<uint16_t> control;  // When OK.
  std::string message;              // A substring of the error, when not OK.

  friend void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }
};

std::vector<Case> Cases() {
  constexpr uint16_t kAer = 0x0001, kVc = 0x0002, kDsn = 0x0003;
  using C = absl::StatusCode;
  return {
      {"UnprivilegedRead", std::string(64, '\x11'), C::kFailedPrecondition, {}, "first 64 bytes"},
      {"ConventionalSpaceOnly", std::string(256, '\0'), C::kFailedPrecondition, {}, "first 256"},
      {"EmptyExtendedSpace", Config(4096, {}), C::kOk, std::nullopt, ""},
      {"AcsFirst", Config(4096, {{0x100, kPciExtCapAcs, 0, 0x005d}}), C::kOk, 0x005d, ""},
      {"AcsAfterOthers",
       Config(4096, {{0x100, kAer, 0x148, 0},
                     {0x148, kDsn, 0x200, 0},
                     {0x200, kPciExtCapAcs, 0x300, 0x001c},
                     {0x300, kVc, 0, 0}}),
       C::kOk, 0x001c, ""},
      {"AcsControlZero", Config(4096, {{0x100, kAer, 0x180, 0}, {0x180, kPciExtCapAcs, 0, 0}}),
       C::kOk, 0x0000, ""},
      {"NoAcs", Config(4096, {{0x100, kAer, 0x148, 0}, {0x148, kDsn, 0, 0}}), C::kOk, std::nullopt,
       ""},
      // Reserved low pointer bits are masked, as the kernel does: 0x183 is 0x180.
      {"ReservedPointerBitsMasked",
       Config(4096, {{0x100, kAer, 0x183, 0}, {0x180, kPciExtCapAcs, 0, 0x0004}}), C::kOk, 0x0004,
       ""},
      {"ShortReadStillHasAcs", Config(0x110, {{0x100, kPciExtCapAcs, 0, 0x0008}}), C::kOk, 0x0008,
       ""},
      {"PointerBelowExtendedSpace",
       Config(4096, {{0x100, kAer, 0x040, 0}}),
       C::kInvalidArgument,
       {},
       "below 0x100"},
      {"PointerPastRead",
       Config(0x200, {{0x100, kAer, 0x400, 0}}),
       C::kInvalidArgument,
       {},
       "past the 512 bytes"},
      {"HeaderCutOff", Config(0x102, {}), C::kInvalidArgument, {}, "past the 258 bytes"},
      {"AcsCutOff",
       Config(0x105, {{0x100, kPciExtCapAcs, 0, 0}}),
       C::kInvalidArgument,
       {},
       "cut off"},
      {"SelfLoop",
       Config(4096, {{0x100, kAer, 0x100, 0}}),
       C::kInvalidArgument,
       {},
       "loops back to 0x100"},
      {"LongLoop",
       Config(4096, {{0x100, kAer, 0x140, 0}, {0x140, kDsn, 0x180, 0}, {0x180, kVc, 0x140, 0}}),
       C::kInvalidArgument,
       {},
       "loops back to 0x140"},
      {"AllOnes", std::string(4096, '\xff'), C::kInvalidArgument, {}, "all ones"},
  };
}

class ParseAcsControlTest : public ::testing::TestWithParam<Case> {};

TEST_P(ParseAcsControlTest, Parses) {
  const Case& c = GetParam();
  auto got = ParseAcsControl(c.config);
  ASSERT_EQ(got.status().code(), c.code) << got.status();
  if (got.ok()) {
    EXPECT_EQ(*got, c.control);
  } else {
    EXPECT_THAT(got.status().message(), HasSubstr(c.message));
  }
}

INSTANTIATE_TEST_SUITE_P(Table, ParseAcsControlTest, ::testing::ValuesIn(Cases()),
                         [](const auto& p) { return p.param.name; });

// The longest list that fits: every dword of extended space chained, ACS last.
TEST(ParseAcsControl, WalksTheWholeSpace) {
  std::vector<Cap> caps;
  for (size_t off = 0x100; off < 0xffc; off += 4) {
    caps.push_back({off, 0x0001, static_cast<uint16_t>(off + 4), 0});
  }
  std::string config = Config(4096, caps);
  // The last dword holds the ACS header; its control word would be past 4096 bytes.
  config[0xffc] = 0x0d;
  auto got = ParseAcsControl(config);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << got.status();
  EXPECT_THAT(got.status().message(), HasSubstr("cut off"));
}

}  // namespace
}  // namespace fabric
