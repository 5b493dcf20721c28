#include "agent/inventory/discovery/pci_names.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace fabric {
namespace {

// The real database Debian's pci.ids package installs (install-deps.sh).
TEST(PciNames, NamesFromTheDatabase) {
  const PciNames& names = DefaultPciNames();
  EXPECT_EQ(names.Vendor(0x15b3), "Mellanox Technologies");
  EXPECT_EQ(names.Device(0x15b3, 0x1021), "MT2910 Family [ConnectX-7]");
  EXPECT_EQ(names.Vendor(0x10de), "NVIDIA Corporation");
  EXPECT_NE(names.Device(0x10de, 0x2330).find("H100"), std::string::npos);
}

TEST(PciNames, UnknownIdsHaveNoName) {
  const PciNames& names = DefaultPciNames();
  EXPECT_EQ(names.Device(0x15b3, 0xfff0), "");
  EXPECT_EQ(names.Vendor(0x7777), "");
}

TEST(PciNames, AFileOfOurOwnAMalformedOneAndAMissingOne) {
  const std::string path = testing::TempDir() + "/pci_names_test.ids";
  {
    std::ofstream f(path);
    f << "# comment\n1234  Acme Fabrics\n\t5678  Widget [W-1]\n";
  }
  auto acme = LibPciNames(path);
  EXPECT_EQ(acme->Vendor(0x1234), "Acme Fabrics");
  EXPECT_EQ(acme->Device(0x1234, 0x5678), "Widget [W-1]");
  // libpci gives up on a database with a line it cannot parse: no names, and no crash.
  {
    std::ofstream f(path);
    f << "1234  Acme Fabrics\nnot a line at all\n";
  }
  auto broken = LibPciNames(path);
  EXPECT_EQ(broken->Vendor(0x1234), "");
  EXPECT_EQ(broken->Device(0x1234, 0x5678), "");
  std::remove(path.c_str());
  auto none = LibPciNames(testing::TempDir() + "/no-such.ids");
  EXPECT_EQ(none->Vendor(0x15b3), "");
}

TEST(PciNames, ShortName) {
  const struct {
    const char* in;
    const char* want;
  } cases[] = {
      {"GH100 [H100 SXM5 80GB]", "H100 SXM5 80GB"},
      {"MT2910 Family [ConnectX-7]", "ConnectX-7"},
      {"Aldebaran/MI200 [Instinct MI250X/MI250]", "Instinct MI250X/MI250"},
      {"BCM57508 NetXtreme-E 10Gb/25Gb/40Gb/50Gb/100Gb/200Gb Ethernet",
       "BCM57508 NetXtreme-E 10Gb/25Gb/40Gb/50Gb/100Gb/200Gb Ethernet"},
      {"odd [] name", "odd [] name"},
      {"unclosed [bracket", "unclosed [bracket"},
      {"", ""},
  };
  for (const auto& c : cases) EXPECT_EQ(ShortPciName(c.in), c.want) << c.in;
}

}  // namespace
}  // namespace fabric
