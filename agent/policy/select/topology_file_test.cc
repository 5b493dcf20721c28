// A cloud VM's flat PCI tree with and without its shape's NCCL topology file: the file pairs
// (not NUMA and order), GPUDirect is decided by it, jobs and pods get NCCL_TOPO_FILE, and a file
// that cannot be read is said and never handed to a job.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/inventory/topology/nccl_topo.h"
#include "agent/inventory/topology/topology.h"
#include "agent/policy/health/health.h"
#include "agent/policy/select/env.h"
#include "agent/policy/select/pairing.h"
#include "agent/policy/select/select.h"
#include "agent/publish/cdi/cdi_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/hosts/discovered.h"
#include "tests/hosts/hosts.h"

namespace fabric {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Key;
using ::testing::Not;
using ::testing::Pair;

const std::vector<std::string> kGpus = {"0001:00:00.0", "0002:00:00.0", "0003:00:00.0",
                                        "0004:00:00.0", "0005:00:00.0", "0006:00:00.0",
                                        "0007:00:00.0", "0008:00:00.0"};

// The first NUMA node's pairs crossed (GPU i with mlx5_(3-i)): only the file can say that.
std::string CrossedXml() {
  std::string xml = "<system version=\"1\">\n";
  for (int numa = 0; numa < 2; ++numa) {
    absl::StrAppendFormat(&xml, "<cpu numaid=\"%d\">\n", numa);
    for (int i = 4 * numa; i < 4 * numa + 4; ++i) {
      const int nic = numa == 0 ? 3 - i : i;
      absl::StrAppendFormat(&xml,
                            "<pci busid=\"ffff:ff:%02x.0\"><pci busid=\"%04x:00:00.0\"/>"
                            "<pci busid=\"%04x:00:00.0\"/></pci>\n",
                            i + 1, 0x0001 + i, 0x0101 + nic);
    }
    xml += "</cpu>\n";
  }
  return xml + "</system>\n";
}

class TopologyFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / absl::StrCat("topology_file_test.", getpid());
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "ndv5-topo.xml").string();
    Write(testing::CloudVmTopologyXml());
    host_ = testing::DiscoveredExampleHost("cloud-vm-flat");
    host_.clear_pairing();
    ASSERT_EQ(host_.accelerators_size(), 8);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Write(const std::string& text) { std::ofstream(path_) << text; }

  std::map<std::string, v1::GpuAssignment> Select(const v1::Host& h) {
    std::map<std::string, v1::GpuAssignment> by_gpu;
    auto sel = SelectNics(h, kGpus, policy_);
    EXPECT_TRUE(sel.ok()) << sel.status();
    if (!sel.ok()) return by_gpu;
    for (const v1::GpuAssignment& a : sel->assignments()) by_gpu[a.gpu()] = a;
    notes_.assign(sel->notes().begin(), sel->notes().end());
    env_ = EnvOf(*sel);
    return by_gpu;
  }

  std::filesystem::path dir_;
  std::string path_;
  v1::Host host_;
  v1::SelectionPolicy policy_;
  std::vector<std::string> notes_;
  EnvMap env_;
};

TEST_F(TopologyFileTest, TheShapesFilePairsEachGpuWithTheNicUnderItsSwitch) {
  ApplyNcclTopology(path_, nullptr, &host_);
  ASSERT_TRUE(PairedByNcclTopology(host_));
  std::map<std::pair<std::string, std::string>, const v1::TopologyPair*> pairs;
  for (const v1::TopologyPair& p : host_.topology()) pairs[{p.accelerator(), p.rdma_device()}] = &p;
  const v1::TopologyPair* own = pairs[{"0001:00:00.0", "mlx5_0"}];
  const v1::TopologyPair* numa_mate = pairs[{"0001:00:00.0", "mlx5_1"}];
  const v1::TopologyPair* far = pairs[{"0001:00:00.0", "mlx5_4"}];
  ASSERT_TRUE(own && numa_mate && far);
  EXPECT_EQ(own->distance(), v1::DISTANCE_CLASS_PIX);
  EXPECT_THAT(own->reason(), HasSubstr(absl::StrCat("common PCIe switch ffff:ff:01.0 in ", path_)));
  EXPECT_EQ(numa_mate->distance(), v1::DISTANCE_CLASS_PHB);
  EXPECT_EQ(far->distance(), v1::DISTANCE_CLASS_SYS);

  const auto by_gpu = Select(host_);
  for (int i = 0; i < 8; ++i) {
    const v1::GpuAssignment& a = by_gpu.at(kGpus[i]);
    EXPECT_EQ(a.rdma_device(), absl::StrCat("mlx5_", i)) << kGpus[i];
    EXPECT_EQ(a.distance(), v1::DISTANCE_CLASS_PIX) << kGpus[i];
    // The open module's dma-buf, now that a path is known.
    EXPECT_EQ(a.gpudirect(), "dma_buf") << a.gpudirect_reason();
  }
  EXPECT_THAT(notes_,
              Contains(HasSubstr(absl::StrCat("paired by the NCCL topology file ", path_))));
  EXPECT_THAT(env_, Contains(Pair("NCCL_TOPO_FILE", path_)));

  // Health says what pairs; pods mount the file where the variable points.
  const v1::Health h = EvaluateHealth(host_, policy_);
  bool said = false;
  for (const v1::Finding& f : h.findings()) {
    if (f.check() == "pci_topology") {
      EXPECT_EQ(f.severity(), v1::SEVERITY_OK);
      EXPECT_THAT(f.message(), HasSubstr("paired by the NCCL topology file"));
      said = true;
    }
  }
  EXPECT_TRUE(said);
  auto spec = cdi::SpecJson(host_, policy_, {});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(*spec, HasSubstr(absl::StrCat("\"hostPath\": \"", path_, "\"")));
  EXPECT_THAT(*spec, HasSubstr(absl::StrCat("\"containerPath\": \"", path_, "\"")));
}

TEST_F(TopologyFileTest, ACrossedFileIsFollowedNotNumaAndOrder) {
  const auto unpaired = Select(host_);
  EXPECT_EQ(unpaired.at("0001:00:00.0").rdma_device(), "mlx5_0");  // NUMA and order.
  EXPECT_THAT(notes_, Contains(HasSubstr("name the shape's NCCL topology file in "
                                         "selection.ncclTopoFile")));
  EXPECT_THAT(env_, Not(Contains(Key("NCCL_TOPO_FILE"))));

  Write(CrossedXml());
  ApplyNcclTopology(path_, nullptr, &host_);
  *host_.mutable_pairing() = PairGpus(host_, policy_);
  const auto crossed = Select(host_);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(crossed.at(kGpus[i]).rdma_device(), absl::StrCat("mlx5_", 3 - i)) << kGpus[i];
  }
  EXPECT_EQ(crossed.at(kGpus[5]).rdma_device(), "mlx5_5");
}

TEST_F(TopologyFileTest, AFileThatCannotBeReadIsSaidKeptStaleAndNotGivenToJobs) {
  ApplyNcclTopology(path_, nullptr, &host_);
  const v1::NcclTopology good = host_.nccl_topology();
  std::filesystem::remove(path_);
  ApplyNcclTopology(path_, &good, &host_);
  EXPECT_TRUE(host_.nccl_topology().stale());
  const auto by_gpu = Select(host_);
  EXPECT_EQ(by_gpu.at("0003:00:00.0").distance(), v1::DISTANCE_CLASS_PIX);  // The last good read.
  EXPECT_THAT(notes_, Contains(HasSubstr("its last good read is used")));
  EXPECT_THAT(env_, Not(Contains(Key("NCCL_TOPO_FILE"))));
  bool warned = false;
  const v1::Health health = EvaluateHealth(host_, policy_);
  for (const v1::Finding& f : health.findings()) {
    if (f.check() == "pci_topology" && f.severity() == v1::SEVERITY_WARNING) {
      EXPECT_THAT(f.message(), HasSubstr("could not be read"));
      warned = true;
    }
  }
  EXPECT_TRUE(warned);
  auto spec = cdi::SpecJson(host_, policy_, {});
  ASSERT_TRUE(spec.ok());
  EXPECT_THAT(*spec, Not(HasSubstr("ndv5-topo.xml")));
}

TEST_F(TopologyFileTest, ARealTreeKeepsItsDistancesAndJobsStillGetTheFile) {
  v1::Host dgx = testing::DiscoveredExampleHost("dgx-h100-ib");
  const v1::Host before = dgx;
  ApplyNcclTopology(path_, nullptr, &dgx);
  EXPECT_FALSE(PairedByNcclTopology(dgx));
  ASSERT_EQ(dgx.topology_size(), before.topology_size());
  for (int i = 0; i < dgx.topology_size(); ++i) {
    EXPECT_EQ(dgx.topology(i).reason(), before.topology(i).reason());
  }
  EXPECT_EQ(NcclTopoFileForJobs(dgx), path_);
}

TEST(TopologyFilePolicyTest, TheConfigNamesOneAbsolutePath) {
  v1::SelectionPolicy p;
  for (const char* bad : {"topo.xml", "/opt/my topo.xml", "/opt/t\n.xml"}) {
    p.set_nccl_topo_file(bad);
    auto s = SelectNics(v1::Host(), {"0"}, p);
    ASSERT_FALSE(s.ok());
    EXPECT_THAT(s.status().message(), HasSubstr("selection.ncclTopoFile")) << bad;
  }
}

}  // namespace
}  // namespace fabric
