#include "agent/hostfs/pci_aer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/hosts/hosts.h"
#include "tests/testing/subprocess.h"

namespace fabric {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;
using ::testing::SizeIs;
using Bits = std::vector<std::pair<std::string, uint64_t>>;

// As a kernel with a flapping link prints them.
constexpr char kCorrectable[] =
    "RxErr 7\nBadTLP 2\nBadDLLP 1\nRollover 0\nTimeout 0\nNonFatalErr 0\nCorrIntErr 0\n"
    "HeaderOF 0\nTOTAL_ERR_COR 10\n";
constexpr char kNonfatal[] =
    "Undefined 0\nDLP 0\nSDES 0\nTLP 0\nFCP 0\nCmpltTO 3\nCmpltAbrt 0\nUnxCmplt 0\nRxOF 0\n"
    "MalfTLP 0\nECRC 0\nUnsupReq 1\nACSViol 0\nUncorrIntErr 0\nBlockedTLP 0\n"
    "AtomicOpBlocked 0\nTLPBlockedErr 0\nPoisonTLPBlocked 0\nTOTAL_ERR_NONFATAL 4\n";
constexpr char kFatal[] =
    "Undefined 0\nDLP 1\nSDES 0\nTLP 0\nFCP 0\nCmpltTO 0\nCmpltAbrt 0\nUnxCmplt 0\nRxOF 0\n"
    "MalfTLP 0\nECRC 0\nUnsupReq 0\nACSViol 0\nUncorrIntErr 0\nBlockedTLP 0\n"
    "AtomicOpBlocked 0\nTLPBlockedErr 0\nPoisonTLPBlocked 0\nTOTAL_ERR_FATAL 1\n";

std::string Lines(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) absl::StrAppend(&s, "bit", i, " 0\n");
  return s;
}

struct Case {
  std::string name;
  std::string text;
  bool ok;
  uint64_t total = 0;        // When ok.
  size_t bits = 0;           // When ok.
  std::string message = {};  // A substring of the error.

  friend void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }
};

std::vector<Case> Cases() {
  return {
      {"Correctable", kCorrectable, true, 10, 8},
      {"Nonfatal", kNonfatal, true, 4, 18},
      {"Fatal", kFatal, true, 1, 18},
      {"NoFinalNewline", "RxErr 1\nTOTAL_ERR_COR 1", true, 1, 1},
      {"OldKernelFewerBits", "RxErr 0\nTOTAL_ERR_COR 0\n", true, 0, 1},
      {"UnnamedBit", "dev_cor_errs_bit[16] 2\nTOTAL_ERR_COR 2\n", true, 2, 1},
      {"TotalOnly", "TOTAL_ERR_FATAL 0\n", true, 0, 0},
      {"MaxCount", "RxErr 18446744073709551615\nTOTAL_ERR_COR 0\n", true, 0, 1},
      {"SixtyFourLines", Lines(63) + "TOTAL_ERR_COR 0\n", true, 0, 63},
      // sysfs never writes a CR: a file with one did not come from the kernel.
      {"Crlf", "RxErr 0\r\nTOTAL_ERR_COR 0\r\n", false, 0, 0, "line 1 is not"},
      {"Garbage", "RxErr 0\nhello\nTOTAL_ERR_COR 0\n", false, 0, 0, "line 2 is not \"<name>"},
      {"Negative", "RxErr -1\nTOTAL_ERR_COR 0\n", false, 0, 0, "\"RxErr -1\""},
      {"Hex", "RxErr 0x1\nTOTAL_ERR_COR 0\n", false, 0, 0, "line 1 is not"},
      {"NoName", " 5\nTOTAL_ERR_COR 0\n", false, 0, 0, "line 1 is not"},
      {"NoCount", "RxErr \nTOTAL_ERR_COR 0\n", false, 0, 0, "line 1 is not"},
      {"BlankLine", "RxErr 0\n\nTOTAL_ERR_COR 0\n", false, 0, 0, "line 2 is not"},
      {"Overflow", "RxErr 18446744073709551616\nTOTAL_ERR_COR 0\n", false, 0, 0,
       "count over 2^64-1"},
      {"TotalOverflow", "TOTAL_ERR_COR 99999999999999999999\n", false, 0, 0, "count over"},
      {"MissingTotal", "RxErr 0\nBadTLP 0\n", false, 0, 0, "no TOTAL_ line"},
      {"DuplicateTotal", "TOTAL_ERR_COR 0\nTOTAL_ERR_COR 1\n", false, 0, 0,
       "line 2 is a second TOTAL_"},
      {"SixtyFiveLines", Lines(64) + "TOTAL_ERR_COR 0\n", false, 0, 0, "line 65 is past the 64"},
      {"Empty", "", false, 0, 0, "empty"},
      {"Binary", std::string("Rx\0rr 0\nTOTAL_ERR_COR 0\n", 24), false, 0, 0, "Rx\\x00rr"},
  };
}

class ParseAerCountsTest : public ::testing::TestWithParam<Case> {};

TEST_P(ParseAerCountsTest, Parses) {
  const Case& c = GetParam();
  absl::StatusOr<AerCounts> r = ParseAerCounts(c.text);
  if (!c.ok) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.message));
    return;
  }
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->total, c.total);
  EXPECT_THAT(r->bits, SizeIs(c.bits));
}

INSTANTIATE_TEST_SUITE_P(Table, ParseAerCountsTest, ::testing::ValuesIn(Cases()),
                         [](const auto& p) { return p.param.name; });

TEST(ParseAerCountsTest, KeepsBitsInFileOrder) {
  absl::StatusOr<AerCounts> r = ParseAerCounts(kCorrectable);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->bits, ElementsAre(Pair("RxErr", 7), Pair("BadTLP", 2), Pair("BadDLLP", 1),
                                   Pair("Rollover", 0), Pair("Timeout", 0), Pair("NonFatalErr", 0),
                                   Pair("CorrIntErr", 0), Pair("HeaderOF", 0)));
}

// A sysfs root with one function (0000:18:00.0) behind a root port, linked from bus/pci/devices.
class ReadPciAerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = testing::MakeTempDir("pci_aer");
    ASSERT_FALSE(tmpl.empty());
    root_ = tmpl;
    fs::create_directories(root_ / kFn);
    fs::create_directories(root_ / "bus/pci/devices");
    fs::create_directory_symlink("../../../devices/pci0000:15/0000:15:01.0/0000:18:00.0",
                                 root_ / "bus/pci/devices/0000:18:00.0");
  }
  void TearDown() override { fs::remove_all(root_); }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(root_ / kFn / name) << text;
  }
  void WriteAll() {
    Write("aer_dev_correctable", kCorrectable);
    Write("aer_dev_nonfatal", kNonfatal);
    Write("aer_dev_fatal", kFatal);
  }

  static constexpr char kFn[] = "devices/pci0000:15/0000:15:01.0/0000:18:00.0";
  fs::path root_;
};

TEST_F(ReadPciAerTest, ReadsTheThreeFiles) {
  WriteAll();
  HostFsImpl sysfs(root_.string());
  absl::StatusOr<PciAer> aer = ReadPciAer(sysfs, "0000:18:00.0");
  ASSERT_TRUE(aer.ok()) << aer.status();
  EXPECT_EQ(aer->correctable.total, 10u);
  EXPECT_EQ(aer->nonfatal.total, 4u);
  EXPECT_THAT(aer->nonfatal.bits[5], Pair("CmpltTO", 3));
  EXPECT_EQ(aer->fatal.total, 1u);
  EXPECT_THAT(aer->fatal.bits[1], Pair("DLP", 1));
}

TEST_F(ReadPciAerTest, NoAerFilesIsNotFound) {
  Write("vendor", "0x15b3\n");
  HostFsImpl sysfs(root_.string());
  absl::StatusOr<PciAer> aer = ReadPciAer(sysfs, "0000:18:00.0");
  EXPECT_TRUE(absl::IsNotFound(aer.status())) << aer.status();
  EXPECT_THAT(std::string(aer.status().message()), HasSubstr("no AER counters"));
  // A function that is not there at all.
  EXPECT_TRUE(absl::IsNotFound(ReadPciAer(sysfs, "0000:99:00.0").status()));
}

TEST_F(ReadPciAerTest, GarbledFileIsNamed) {
  WriteAll();
  Write("aer_dev_nonfatal", "Undefined 0\nDLP zero\nTOTAL_ERR_NONFATAL 0\n");
  HostFsImpl sysfs(root_.string());
  absl::StatusOr<PciAer> aer = ReadPciAer(sysfs, "0000:18:00.0");
  EXPECT_EQ(aer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(aer.status().message()),
              HasSubstr("0000:18:00.0/aer_dev_nonfatal: line 2 is not"));
}

TEST_F(ReadPciAerTest, UnreadableFileIsNamed) {
  WriteAll();
  // A directory where the attribute should be: read() fails even for root.
  fs::remove(root_ / kFn / "aer_dev_fatal");
  fs::create_directory(root_ / kFn / "aer_dev_fatal");
  HostFsImpl sysfs(root_.string());
  absl::StatusOr<PciAer> aer = ReadPciAer(sysfs, "0000:18:00.0");
  ASSERT_FALSE(aer.ok());
  EXPECT_FALSE(absl::IsNotFound(aer.status())) << aer.status();
  EXPECT_THAT(std::string(aer.status().message()), HasSubstr("0000:18:00.0/aer_dev_fatal"));
}

TEST_F(ReadPciAerTest, RejectsWhatIsNotAnAddress) {
  HostFsImpl sysfs(root_.string());
  for (const char* bdf : {"", "..", "0000:18:00.0/..", "0000:18:00.8", "0000:18:00", "0000:1B:00.0",
                          "../../devices/pci0000:15/0000:15:01.0/0000:18:00.0"}) {
    EXPECT_EQ(ReadPciAer(sysfs, bdf).status().code(), absl::StatusCode::kInvalidArgument) << bdf;
  }
}

// The generated DGX H100: GPU 0's NIC and GPU, the switch path above them, a VF without AER.
TEST(ReadPciAerExampleHostTest, DgxH100IbReadsZero) {
  std::string tmpl = testing::MakeTempDir("pci_aer_host");
  ASSERT_FALSE(tmpl.empty());
  const fs::path dir = fs::path(tmpl) / "host";
  ASSERT_TRUE(testing::WriteExampleHost("dgx-h100-ib", dir).ok());
  HostFsImpl sysfs((dir / "sys").string());
  for (const char* bdf : {"0000:18:00.0", "0000:19:00.0", "0000:15:01.0", "0000:16:00.0",
                          "0000:17:00.0", "0000:17:01.0", "0000:26:00.0"}) {
    absl::StatusOr<PciAer> aer = ReadPciAer(sysfs, bdf);
    ASSERT_TRUE(aer.ok()) << bdf << ": " << aer.status();
    EXPECT_EQ(aer->correctable.total + aer->nonfatal.total + aer->fatal.total, 0u) << bdf;
    EXPECT_THAT(aer->correctable.bits, SizeIs(8)) << bdf;
    EXPECT_THAT(aer->nonfatal.bits, SizeIs(18)) << bdf;
    EXPECT_THAT(aer->fatal.bits, SizeIs(18)) << bdf;
    for (const auto* c : {&aer->correctable, &aer->nonfatal, &aer->fatal}) {
      for (const auto& [name, count] : c->bits) EXPECT_EQ(count, 0u) << bdf << " " << name;
    }
  }
  EXPECT_TRUE(absl::IsNotFound(ReadPciAer(sysfs, "0000:26:00.1").status()));  // A VF.
  fs::remove_all(tmpl);
}

}  // namespace
}  // namespace fabric
