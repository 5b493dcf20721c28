#include "agent/inventory/topology/nccl_topo.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/inventory/topology/topology.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fabric {
namespace {

using ::testing::HasSubstr;

// Azure's NDv4 file as its images install it (two GPU-NIC pairs per virtual switch), cut to
// three pairs.
constexpr char kAzure[] = R"(<system version="1">
  <cpu numaid="0" affinity="0000ffff,0000ffff" arch="x86_64" vendor="AuthenticAMD" familyid="23" modelid="49">
    <pci busid="ffff:ff:01.0" class="0x060400" link_speed="16 GT/s" link_width="16">
      <pci busid="0001:00:00.0" class="0x030200" link_speed="16 GT/s" link_width="16"/>
      <pci busid="0101:00:00.0" class="0x020700" link_speed="16 GT/s" link_width="16"/>
    </pci>
  </cpu>
  <cpu numaid="1" affinity="ffff0000,ffff0000" arch="x86_64" vendor="AuthenticAMD" familyid="23" modelid="49">
    <pci busid="FFFF:FF:02.0" class="0x060400" link_speed="16 GT/s" link_width="16">
      <pci busid="0002:00:00.0" class="0x030200" link_speed="16 GT/s" link_width="16"/>
    </pci>
  </cpu>
</system>)";

// What NCCL_TOPO_DUMP_FILE writes: nested switches, <gpu> and <nic><net> inside <pci>.
constexpr char kNcclDump[] = R"(<system version="1">
  <cpu host_hash="0x8b2b7c3e" numaid="0" affinity="00000000,0000ffff" arch="x86_64">
    <pci busid="0000:15:01.0" class="0x060400">
      <pci busid="0000:16:00.0" class="0x060400">
        <pci busid="0000:18:00.0" class="0x030200"><gpu dev="0" sm="90" rank="0" gdr="1"/></pci>
      </pci>
      <pci busid="0000:1a:00.0" class="0x020700">
        <nic><net name="mlx5_0" dev="0" speed="400000" port="1" gdr="1"/></nic>
      </pci>
    </pci>
  </cpu>
</system>)";

std::string Summary(const v1::NcclTopology& t) {
  std::vector<std::string> lines;
  for (const v1::NcclTopoDevice& d : t.devices()) {
    lines.push_back(absl::StrCat(d.bus_id(), " <", absl::StrJoin(d.path(), " / "),
                                 "> numa=", d.has_numa_node() ? absl::StrCat(d.numa_node()) : "-"));
  }
  return absl::StrJoin(lines, "\n");
}

TEST(NcclTopoParseTest, ReadsEveryPciElementWithWhatEnclosesIt) {
  auto t = ParseNcclTopology(kAzure);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(Summary(*t),
            "ffff:ff:01.0 <cpu 0> numa=0\n"
            "0001:00:00.0 <cpu 0 / pci ffff:ff:01.0> numa=0\n"
            "0101:00:00.0 <cpu 0 / pci ffff:ff:01.0> numa=0\n"
            "ffff:ff:02.0 <cpu 1> numa=1\n"
            "0002:00:00.0 <cpu 1 / pci ffff:ff:02.0> numa=1");
  auto dump = ParseNcclTopology(kNcclDump);
  ASSERT_TRUE(dump.ok()) << dump.status();
  EXPECT_EQ(Summary(*dump),
            "0000:15:01.0 <cpu 0> numa=0\n"
            "0000:16:00.0 <cpu 0 / pci 0000:15:01.0> numa=0\n"
            "0000:18:00.0 <cpu 0 / pci 0000:15:01.0 / pci 0000:16:00.0> numa=0\n"
            "0000:1a:00.0 <cpu 0 / pci 0000:15:01.0> numa=0");
}

TEST(NcclTopoParseTest, RefusesWhatIsNotATopologyFile) {
  const std::string many = [] {
    std::string x = "<system>";
    for (int i = 0; i <= kMaxNcclTopoDevices; ++i) {
      x += absl::StrCat("<pci busid=\"0000:", absl::Hex(i / 32 % 256, absl::kZeroPad2), ":",
                        absl::Hex(i % 32, absl::kZeroPad2), ".", i / 8192, "\"/>");
    }
    return x + "</system>";
  }();
  const std::string deep = [] {
    std::string x = "<system>";
    for (int i = 0; i < 70; ++i) {
      x += absl::StrCat("<pci busid=\"0000:", absl::Hex(i, absl::kZeroPad2), ":00.0\">");
    }
    for (int i = 0; i < 70; ++i) x += "</pci>";
    return x + "</system>";
  }();
  const struct {
    std::string xml;
    std::string error;
  } cases[] = {
      {"", "not well-formed XML"},
      {"<system><cpu numaid=\"0\"></system>", "not well-formed XML"},
      {"<topology/>", "the root element is <topology>, not <system>"},
      {"<system version=\"1\"/>", "names no <pci> element"},
      {"<system>\n<pci class=\"0x030200\"/></system>", "without busid at line 2"},
      {"<system><pci busid=\"0:1:0.0\"/></system>", "busid \"0:1:0.0\" at line 1 is not a PCI"},
      {"<system><pci busid=\"0000:0g:00.0\"/></system>", "is not a PCI address"},
      {"<system><pci busid=\"0000:01:00.0\"/>\n<pci busid=\"0000:01:00.0\"/></system>",
       "busid 0000:01:00.0 appears twice (lines 1 and 2)"},
      {"<system><pci busid=\"0000:01:00.0\"/><pci busid=\"0000:01:00.0\"/></system>",
       "appears twice"},
      {std::string(kMaxNcclTopoBytes + 1, ' '), "more than the 1048576"},
      {many, "more than 4096 <pci> elements"},
  };
  for (const auto& c : cases) {
    auto t = ParseNcclTopology(c.xml);
    ASSERT_FALSE(t.ok()) << c.xml.substr(0, 80);
    EXPECT_THAT(t.status().message(), HasSubstr(c.error)) << c.xml.substr(0, 80);
  }
  // A DTD's entity is never expanded (tinyxml2 reads no DTD): "&x;" stays the text it is.
  auto dtd = ParseNcclTopology(
      "<!DOCTYPE system [<!ENTITY x \"yyyyyyyy\">]><system>&x;<pci "
      "busid=\"0000:01:00.0\"/></system>");
  ASSERT_TRUE(dtd.ok()) << dtd.status();
  EXPECT_EQ(dtd->devices_size(), 1);
  // Deeper than any NCCL file, refused before the walk's recursion grows with it.
  auto t = ParseNcclTopology(deep);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("nest deeper than 64"));
}

TEST(NcclTopoClassifyTest, AsNcclReadsTheTree) {
  auto azure = ParseNcclTopology(kAzure);
  auto dump = ParseNcclTopology(kNcclDump);
  ASSERT_TRUE(azure.ok() && dump.ok());
  const auto& a = azure->devices();
  const auto& d = dump->devices();
  const struct {
    const v1::NcclTopoDevice& x;
    const v1::NcclTopoDevice& y;
    v1::DistanceClass want;
    std::string reason;
  } cases[] = {
      {a[1], a[2], v1::DISTANCE_CLASS_PIX, "common PCIe switch ffff:ff:01.0 in f.xml"},
      {a[1], a[4], v1::DISTANCE_CLASS_SYS, "NUMA node 0 vs 1 in f.xml"},
      {d[2], d[3], v1::DISTANCE_CLASS_PXB, "nested PCIe switches, common 0000:15:01.0 in f.xml"},
      {d[1], d[3], v1::DISTANCE_CLASS_PIX, "common PCIe switch 0000:15:01.0"},
  };
  for (const auto& c : cases) {
    const Distance got = ClassifyByNcclTopology(c.x, c.y, "f.xml");
    EXPECT_EQ(got.distance, c.want) << c.x.bus_id() << " " << c.y.bus_id();
    EXPECT_THAT(got.reason, HasSubstr(c.reason));
  }
  // Two top-level switches under one <cpu>: only the CPU joins them (NCCL's PHB).
  auto two = ParseNcclTopology(R"(<system><cpu numaid="3">
      <pci busid="ffff:ff:01.0"><pci busid="0001:00:00.0"/></pci>
      <pci busid="ffff:ff:02.0"><pci busid="0101:00:00.0"/></pci></cpu></system>)");
  ASSERT_TRUE(two.ok()) << two.status();
  const Distance phb = ClassifyByNcclTopology(two->devices(1), two->devices(3), "f.xml");
  EXPECT_EQ(phb.distance, v1::DISTANCE_CLASS_PHB);
  EXPECT_THAT(phb.reason, HasSubstr("meet only at cpu 3 in f.xml"));
}

class NcclTopoReadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / absl::StrCat("nccl_topo_test.", getpid());
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "topo.xml").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Write(const std::string& text) { std::ofstream(path_) << text; }

  std::filesystem::path dir_;
  std::string path_;
};

TEST_F(NcclTopoReadTest, AFailedReadKeepsTheLastGoodOneAndSaysItIsStale) {
  Write(kAzure);
  const v1::NcclTopology good = ReadNcclTopology(path_, nullptr);
  EXPECT_EQ(good.error(), "");
  EXPECT_EQ(good.path(), path_);
  EXPECT_EQ(good.devices_size(), 5);
  EXPECT_FALSE(good.stale());

  Write("<system><pci busid=");  // An editor's half-written file.
  const v1::NcclTopology kept = ReadNcclTopology(path_, &good);
  EXPECT_THAT(kept.error(), HasSubstr("not well-formed XML"));
  EXPECT_TRUE(kept.stale());
  EXPECT_EQ(kept.devices_size(), 5);

  std::filesystem::remove(path_);
  const v1::NcclTopology gone = ReadNcclTopology(path_, &kept);
  EXPECT_THAT(gone.error(), HasSubstr("No such file"));
  EXPECT_TRUE(gone.stale());
  EXPECT_EQ(gone.devices_size(), 5);

  // Another file's facts are never carried over, nor a first read's.
  const v1::NcclTopology other = ReadNcclTopology(path_ + ".other", &good);
  EXPECT_FALSE(other.stale());
  EXPECT_EQ(other.devices_size(), 0);
  EXPECT_THAT(ReadNcclTopology("topo.xml", nullptr).error(), HasSubstr("not an absolute path"));
}

TEST_F(NcclTopoReadTest, ApplyLaysItOnTheHostAndAnEmptyPathTakesItOff) {
  Write(kAzure);
  v1::Host h;
  ApplyNcclTopology(path_, nullptr, &h);
  EXPECT_EQ(h.nccl_topology().devices_size(), 5);
  EXPECT_EQ(NcclTopoFileForJobs(h), path_);
  EXPECT_EQ(NcclTopologyProblem(h), "");
  ApplyNcclTopology(path_ + ".gone", &h.nccl_topology(), &h);
  EXPECT_EQ(NcclTopoFileForJobs(h), "");
  EXPECT_THAT(NcclTopologyProblem(h), HasSubstr("no read of it has succeeded"));
  ApplyNcclTopology("", nullptr, &h);
  EXPECT_FALSE(h.has_nccl_topology());
}

}  // namespace
}  // namespace fabric
