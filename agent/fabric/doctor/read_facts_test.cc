// The fact reader against an example host's tree (tests/hosts), temporary /dev and library
// directories, a fake verbs seam, and this machine's own interfaces and limits.
#include "agent/fabric/doctor/read_facts.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/hosts/hosts.h"
#include "tests/testing/subprocess.h"

namespace fabric::doctor {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

// dgx-h100-ib: GPU 0 and mlx5_0 share the switch under root port 0000:15:01.0 (hosts.cc).
constexpr char kGpu0[] = "0000:19:00.0";

void WriteFile(const fs::path& p, const std::string& bytes) {
  fs::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << bytes;
  ASSERT_TRUE(out.good()) << p;
}

class ReadFactsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("read-facts");
    absl::Status s = testing::WriteExampleHost("dgx-h100-ib", dir_ / "host");
    ASSERT_TRUE(s.ok()) << s;
    opt_.sysfs = dir_ / "host/sys";
    opt_.procfs = dir_ / "host/proc";
    opt_.dev_dir = dir_ / "dev/infiniband";  // Absent unless a test makes it.
    opt_.ld_library_path = "";
    opt_.lib_dirs = {};
  }
  void TearDown() override { fs::remove_all(dir_); }

  DoctorFacts Read(const std::vector<std::string>& named, const std::vector<std::string>& gpus) {
    DoctorFacts f;
    ReadFacts(
        opt_, [&](const v1::Host&) { return named; }, gpus, &f);
    return f;
  }
  fs::path PciDir(const std::string& bdf) { return dir_ / "host/sys/bus/pci/devices" / bdf; }

  fs::path dir_;
  ReadOptions opt_;
};

TEST_F(ReadFactsTest, DiscoversTheHostAndTakesTheContext) {
  opt_.context = "container";
  DoctorFacts f = Read({}, {});
  EXPECT_EQ(f.context, "container");
  ASSERT_TRUE(f.host.has_value()) << f.host_error;
  EXPECT_THAT(f.host_error, IsEmpty());
  EXPECT_EQ(f.host->rdma_devices_size(), 16);
  EXPECT_EQ(f.host->accelerators_size(), 8);
}

TEST_F(ReadFactsTest, UnreadableSysfsIsAHostError) {
  opt_.sysfs = dir_ / "no-sys";
  DoctorFacts f = Read({}, {});
  EXPECT_FALSE(f.host.has_value());
  EXPECT_THAT(f.host_error, Not(IsEmpty()));
}

TEST_F(ReadFactsTest, MissingDevDirectory) {
  DoctorFacts f = Read({}, {});
  EXPECT_TRUE(f.dev_missing);
  EXPECT_FALSE(f.dev_nodes.has_value());
  EXPECT_THAT(f.dev_error, IsEmpty());
}

TEST_F(ReadFactsTest, DevNodesListed) {
  fs::create_directories(opt_.dev_dir);
  // A FIFO: listed as not a character device, never opened (that would block).
  ASSERT_EQ(::mkfifo((opt_.dev_dir + "/uverbs0").c_str(), 0600), 0);
  DoctorFacts f = Read({}, {});
  EXPECT_FALSE(f.dev_missing);
  ASSERT_TRUE(f.dev_nodes.has_value()) << f.dev_error;
  ASSERT_EQ(f.dev_nodes->size(), 1u);
  EXPECT_EQ((*f.dev_nodes)[0].name, "uverbs0");
  EXPECT_FALSE((*f.dev_nodes)[0].is_char);
}

TEST_F(ReadFactsTest, VerbsOnlyThroughTheSeam) {
  EXPECT_FALSE(Read({"mlx5_0"}, {}).verbs.has_value()) << "no opener: not tried";
  std::vector<std::string> asked;
  opt_.open_verbs = [&](const std::string& name) {
    asked.push_back(name);
    VerbsOpen v;
    v.device = name;
    if (name == "mlx5_3") v.error = "ibv_open_device mlx5_3: Permission denied";
    return v;
  };
  DoctorFacts f = Read({"mlx5_0", "mlx5_3", "mlx5_0"}, {});
  EXPECT_THAT(asked, ElementsAre("mlx5_0", "mlx5_3")) << "each device once";
  ASSERT_TRUE(f.verbs.has_value());
  ASSERT_EQ(f.verbs->size(), 2u);
  EXPECT_EQ((*f.verbs)[0].device, "mlx5_0");
  EXPECT_THAT((*f.verbs)[0].error, IsEmpty());
  EXPECT_EQ((*f.verbs)[1].device, "mlx5_3");
  EXPECT_THAT((*f.verbs)[1].error, HasSubstr("Permission denied"));
}

TEST_F(ReadFactsTest, VerbsOpensAreBounded) {
  opt_.max_verbs_opens = 2;
  int calls = 0;
  opt_.open_verbs = [&](const std::string& name) {
    ++calls;
    VerbsOpen v;
    v.device = name;
    return v;
  };
  DoctorFacts f = Read({"a", "b", "c", "d"}, {});
  EXPECT_EQ(calls, 2);
  ASSERT_TRUE(f.verbs.has_value());
  ASSERT_EQ(f.verbs->size(), 3u);
  EXPECT_THAT((*f.verbs)[1].error, IsEmpty()) << "an opened device does not read as failed";
  EXPECT_EQ((*f.verbs)[2].device, "c");
  EXPECT_THAT((*f.verbs)[2].error, AllOf(HasSubstr("4 devices"), HasSubstr("2 skipped")));
}

TEST_F(ReadFactsTest, LibibverbsNotLookedForUnlessAsked) {
  EXPECT_FALSE(Read({}, {}).libibverbs.has_value());
}

TEST_F(ReadFactsTest, LibibverbsNotFoundNamesTheDirectories) {
  opt_.look_for_libibverbs = true;
  const fs::path empty = dir_ / "empty";
  fs::create_directories(empty);
  opt_.ld_library_path = empty.string() + "::" + (dir_ / "gone").string();
  opt_.lib_dirs = {(dir_ / "sys-lib").string()};
  DoctorFacts f = Read({}, {});
  ASSERT_TRUE(f.libibverbs.has_value());
  EXPECT_FALSE(*f.libibverbs);
  EXPECT_THAT(f.libibverbs_detail, AllOf(HasSubstr(empty.string()), HasSubstr("gone"),
                                         HasSubstr("sys-lib"), HasSubstr("libibverbs.so.1")));
}

TEST_F(ReadFactsTest, LibibverbsFoundFirstInLdLibraryPath) {
  opt_.look_for_libibverbs = true;
  const fs::path lib = dir_ / "lib";
  WriteFile(lib / "libibverbs.so.1", "not really ELF");
  WriteFile(lib / "libibverbs/libfoo-rdmav34.so", "");
  opt_.ld_library_path = lib.string();
  opt_.lib_dirs = ReadOptions().lib_dirs;  // Later: the real ones must not win.
  DoctorFacts f = Read({}, {});
  ASSERT_TRUE(f.libibverbs.has_value());
  EXPECT_TRUE(*f.libibverbs) << f.libibverbs_detail;
  EXPECT_EQ(f.libibverbs_detail, (lib / "libibverbs.so.1").string());
}

TEST_F(ReadFactsTest, LibibverbsWithoutProvidersListsNoDevice) {
  opt_.look_for_libibverbs = true;
  const fs::path lib = dir_ / "lib";
  WriteFile(lib / "libibverbs.so.1", "");
  WriteFile(lib / "libibverbs/libfoo.so", "");  // Not a provider's name.
  opt_.ld_library_path = lib.string();
  DoctorFacts f = Read({}, {});
  ASSERT_TRUE(f.libibverbs.has_value());
  EXPECT_FALSE(*f.libibverbs);
  EXPECT_THAT(f.libibverbs_detail, HasSubstr("no verbs providers in " + lib.string()));
}

TEST_F(ReadFactsTest, LimitsAndInterfacesOfThisProcess) {
  DoctorFacts f = Read({}, {});
  ASSERT_TRUE(f.limits.has_value());
  rlimit r{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &r), 0);
  EXPECT_EQ(f.limits->nofile_soft, r.rlim_cur);
  ASSERT_TRUE(f.interfaces.has_value());
  EXPECT_THAT(*f.interfaces,
              Contains(AllOf(Field(&Interface::name, "lo"), Field(&Interface::up, true),
                             Field(&Interface::ipv4, Contains("127.0.0.1")))));
}

TEST(ReadInterfaces, NaturalOrderWithoutDuplicates) {
  auto ifs = ReadInterfaces();
  ASSERT_TRUE(ifs.ok()) << ifs.status();
  ASSERT_THAT(*ifs, Not(IsEmpty()));
  for (size_t i = 1; i < ifs->size(); ++i) {
    EXPECT_NE((*ifs)[i - 1].name, (*ifs)[i].name);
  }
}

TEST_F(ReadFactsTest, IommuOffWithoutIommuUnits) {
  EXPECT_EQ(Read({}, {kGpu0}).iommu, "off");
  fs::create_directories(dir_ / "host/sys/class/iommu/dmar0");
  EXPECT_EQ(Read({}, {kGpu0}).iommu, "") << "units but no group type: not known";
}

TEST_F(ReadFactsTest, IommuGroupTypeOfTheGpu) {
  fs::create_directories(dir_ / "host/sys/class/iommu/dmar0");
  WriteFile(PciDir(kGpu0) / "iommu_group/type", "identity\n");
  EXPECT_EQ(Read({}, {kGpu0}).iommu, "identity");
  // The named NIC's group, when the GPU has none.
  EXPECT_EQ(Read({"mlx5_0"}, {"0000:41:00.0"}).iommu, "");
  WriteFile(PciDir("0000:18:00.0") / "iommu_group/type", "DMA-FQ\n");
  EXPECT_EQ(Read({"mlx5_0"}, {"0000:41:00.0"}).iommu, "DMA-FQ");
}

TEST_F(ReadFactsTest, IommuNotKnownWithoutPciDevices) {
  opt_.sysfs = dir_ / "no-sys";
  EXPECT_EQ(Read({}, {kGpu0}).iommu, "");
}

TEST_F(ReadFactsTest, AcsOfTheBridgesOnTheGpuAndNicPaths) {
  // The example host's config files have 256 bytes: no extended space, as for a reader that is
  // not root. One bridge gets a full dump with ACS (P2P Request and Completion Redirect on).
  std::string config(4096, '\0');
  config[0x100] = 0x0d;  // ACS, version 1, last in the list.
  config[0x102] = 0x01;
  config[0x106] = 0x0c;
  WriteFile(PciDir("0000:17:01.0") / "config", config);
  DoctorFacts f = Read({"mlx5_0"}, {kGpu0});
  std::vector<std::string> bridges;
  for (const AcsBridge& b : f.acs) bridges.push_back(b.bridge);
  EXPECT_THAT(bridges, ElementsAre("0000:15:01.0", "0000:16:00.0", "0000:17:01.0", "0000:17:00.0"))
      << "GPU 0's path, then mlx5_0's new bridges; the root complex left out";
  for (const AcsBridge& b : f.acs) {
    if (b.bridge == "0000:17:01.0") {
      EXPECT_EQ(b.control, kAcsP2pRequestRedirect | kAcsP2pCompletionRedirect);
      EXPECT_THAT(b.error, IsEmpty());
    } else {
      EXPECT_FALSE(b.control.has_value()) << b.bridge;
      EXPECT_THAT(b.error, HasSubstr("first 256 bytes")) << b.bridge;
    }
  }
}

TEST_F(ReadFactsTest, AcsOfEveryComputeGpuWhenNoneAreNamed) {
  DoctorFacts f = Read({}, {});
  // Eight GPUs, each behind its own root port, switch up and down port.
  EXPECT_EQ(f.acs.size(), 24u);
  fs::remove(PciDir("0000:16:00.0") / "config");
  f = Read({}, {});
  bool seen = false;
  for (const AcsBridge& b : f.acs) {
    if (b.bridge != "0000:16:00.0") continue;
    seen = true;
    EXPECT_FALSE(b.control.has_value());
    EXPECT_THAT(b.error, HasSubstr("config"));
  }
  EXPECT_TRUE(seen);
}

}  // namespace
}  // namespace fabric::doctor
