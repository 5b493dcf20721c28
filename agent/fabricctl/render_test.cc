#include "agent/fabricctl/render.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "agent/inventory/discovery/discovery.h"
#include "tests/hosts/builder.h"
#include "tests/hosts/hosts.h"
#include "tests/testing/subprocess.h"

namespace fabric {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

v1::Host DiscoverExample(const std::string& name) {
  std::string tmpl = testing::MakeTempDir("render");
  EXPECT_FALSE(tmpl.empty());
  fs::path dir = fs::path(tmpl) / "host";
  auto spec = testing::ExampleHost(name);
  EXPECT_TRUE(spec.ok());
  EXPECT_TRUE(testing::WriteHost(*spec, dir).ok());
  HostFsImpl sys((dir / "sys").string()), proc((dir / "proc").string());
  auto host = Discover(sys, proc);
  fs::remove_all(tmpl);
  EXPECT_TRUE(host.ok());
  return *host;
}

TEST(RenderInventory, ShowsEverySection) {
  v1::Host h = DiscoverExample("dgx-h100-ib");
  std::string out = RenderInventory(h);
  EXPECT_THAT(out, HasSubstr("Host dgx-07"));
  EXPECT_THAT(out, HasSubstr("RDMA devices (16)"));
  EXPECT_THAT(out, HasSubstr("PF 4/8"));
  EXPECT_THAT(out, HasSubstr("InfiniBand"));
  EXPECT_THAT(out, HasSubstr("GID tables"));
  EXPECT_THAT(out, HasSubstr("Accelerators (8)"));
  // ibstat's facts: lanes and signalling with the rate, LID and SM LID; the model from pci.ids.
  EXPECT_THAT(out, HasSubstr("4X NDR (400 Gb/s)"));
  EXPECT_THAT(out, ::testing::ContainsRegex("mlx5_0:1 +ACTIVE +LinkUp +4X NDR \\(400 Gb/s\\) +- +"
                                            "InfiniBand +0x1/0x1"));
  EXPECT_THAT(out, ::testing::ContainsRegex("mlx5_0 +ConnectX-7 +0000:18:00.0"));
  // Each GPU named as nvidia-smi numbers it; the UUID in the wide view.
  EXPECT_THAT(out, ::testing::ContainsRegex("GPU0 +0000:19:00.0 +NVIDIA +H100 SXM5 80GB"));
  EXPECT_THAT(out, ::testing::ContainsRegex("GPU7 +0000:dd:00.0"));
  EXPECT_THAT(out, Not(HasSubstr("GPU-c15521b1")));
  const std::string wide = RenderInventory(h, {.wide = true});
  EXPECT_THAT(wide, ::testing::ContainsRegex("GPU0 +0000:19:00.0 .* GPU-c15521b1-b3dc-a50a-9daa-"
                                             "37e51b591d75"));
  EXPECT_THAT(wide, HasSubstr("PORT GUID"));
  EXPECT_THAT(wide, HasSubstr("0xa088c20300b21000"));  // mlx5_0's GID 0, its interface id.
  // Every line of the default view fits 100 columns; the wide one does not need to.
  for (const std::string& line : std::vector<std::string>(absl::StrSplit(out, '\n'))) {
    EXPECT_LE(DisplayWidth(line), kDefaultWidth) << line;
  }
  EXPECT_THAT(out, HasSubstr("dma_buf"));
  EXPECT_THAT(out, HasSubstr("Default route: eno1"));
  EXPECT_THAT(out, Not(HasSubstr("Problems")));
}

TEST(RenderInventory, ListsProblems) {
  v1::Host h;
  auto* d = h.add_rdma_devices();
  d->set_name("mlx5_7");
  auto* p = d->add_problems();
  p->set_field("fw_ver");
  p->set_path("class/infiniband/mlx5_7/fw_ver");
  p->set_reason("No such file or directory");
  // The line names the file: the reason does not.
  EXPECT_THAT(RenderInventory(h),
              HasSubstr("mlx5_7: fw_ver unknown (class/infiniband/mlx5_7/fw_ver): No such file or "
                        "directory"));
}

TEST(RenderTopology, MatrixRowsAndLegend) {
  v1::Host h = DiscoverExample("roce-9port");
  std::string out = RenderTopology(h);
  // A header, 8 GPU rows, the NUMA row; the BMC display is not a row.
  EXPECT_THAT(out, HasSubstr("GPU7"));
  EXPECT_THAT(out, Not(HasSubstr("GPU8")));
  EXPECT_THAT(out, Not(HasSubstr("ASPEED"))) << "management display must not appear";
  EXPECT_THAT(out, HasSubstr("NIC1:  mlx5_1"));  // The legend names each NIC column.
  const std::string bare = RenderTopology(h, {.headers = false});
  EXPECT_THAT(bare, Not(HasSubstr("Legend")));
  EXPECT_EQ(bare.substr(0, 4), "GPU0");
}

// A NIC matrix too wide for 100 columns becomes one line per GPU; --wide keeps the matrix.
TEST(RenderTopology, ManyNicsFitAHundredColumns) {
  v1::Host h;
  auto* gpu = h.add_accelerators();
  gpu->set_pci_address("0000:01:00.0");
  gpu->set_vendor(v1::ACCELERATOR_VENDOR_NVIDIA);
  gpu->set_index(0);
  for (int i = 0; i < 32; ++i) {
    auto* d = h.add_rdma_devices();
    d->set_name(absl::StrCat("mlx5_", i));
    d->mutable_pci()->set_address(absl::StrFormat("0000:%02x:00.0", i + 2));
    auto* t = h.add_topology();
    t->set_accelerator("0000:01:00.0");
    t->set_rdma_device(d->name());
    t->set_distance(i < 2 ? v1::DISTANCE_CLASS_PIX : v1::DISTANCE_CLASS_SYS);
  }
  const std::string out = RenderTopology(h);
  for (const std::string& line : std::vector<std::string>(absl::StrSplit(out, '\n'))) {
    EXPECT_LE(DisplayWidth(line), kDefaultWidth) << line;
  }
  EXPECT_THAT(out, ::testing::ContainsRegex("GPU0 +- +- +PIX: NIC0 NIC1 +30 SYS"));
  EXPECT_THAT(out, HasSubstr("NIC31:  mlx5_31"));
  EXPECT_THAT(RenderTopology(h, {.wide = true}), HasSubstr("NIC31  NUMA"));
}

TEST(RenderSelection, ReasonsAndRejections) {
  v1::Selection sel;
  auto* a = sel.add_assignments();
  a->set_gpu("0000:18:00.0");
  a->set_rdma_device("mlx5_1");
  a->set_port(1);
  a->set_netdev("eth1");
  a->set_gid_index(3);
  a->set_ipv4("25.11.128.11");
  a->set_distance(v1::DISTANCE_CLASS_PIX);
  a->add_reasons("PIX: common PCIe switch");
  auto* r = a->add_rejected();
  r->set_port("mlx5_0:1");
  r->set_reason("front-end");
  sel.add_notes("a note");
  std::string out = RenderSelection(sel);
  EXPECT_THAT(out,
              HasSubstr("GPU 0000:18:00.0 -> mlx5_1:1  PIX  netdev eth1  GID 3 (25.11.128.11)"));
  EXPECT_THAT(out, HasSubstr("why: PIX: common PCIe switch"));
  EXPECT_THAT(out, HasSubstr("not mlx5_0:1: front-end"));
  EXPECT_THAT(out, HasSubstr("note: a note"));
}

TEST(RenderSelection, Ipv6Gid) {
  v1::Selection sel;
  auto* a = sel.add_assignments();
  a->set_gpu("0000:19:00.0");
  a->set_rdma_device("mlx5_0");
  a->set_port(1);
  a->set_netdev("enp24s0np0");
  a->set_gid_index(3);
  a->set_ipv6("2001:db8:a00:1:e42:a1ff:fe03:0");
  a->set_distance(v1::DISTANCE_CLASS_PIX);
  EXPECT_THAT(RenderSelection(sel),
              HasSubstr("GPU 0000:19:00.0 -> mlx5_0:1  PIX  netdev "
                        "enp24s0np0  GID 3 (2001:db8:a00:1:e42:a1ff:fe03:0)"));
}

TEST(RenderSelection, EchoesTheNameGiven) {
  v1::Selection sel;
  auto* a = sel.add_assignments();
  a->set_gpu("0000:19:00.0");
  a->set_given("GPU-c15521b1-b3dc-a50a-9daa-37e51b591d75");
  a->set_rdma_device("mlx5_0");
  a->set_port(1);
  auto* b = sel.add_assignments();
  b->set_gpu("0000:41:00.0");
  b->set_given("0000:41:00.0");
  b->set_rdma_device("mlx5_3");
  b->set_port(1);
  std::string out = RenderSelection(sel);
  EXPECT_THAT(out, HasSubstr("GPU GPU-c15521b1-b3dc-a50a-9daa-37e51b591d75 (0000:19:00.0) -> "
                             "mlx5_0:1"));
  EXPECT_THAT(out, HasSubstr("GPU 0000:41:00.0 -> mlx5_3:1"));
}

TEST(ToJson, TheContract) {
  v1::Host h;
  h.set_hostname("n1");
  v1::RdmaDevice* d = h.add_rdma_devices();
  d->set_name("mlx5_0");
  v1::Gid* gid = d->add_ports()->add_gids();
  gid->set_index(0);
  v1::Netdev* n = h.add_netdevs();
  n->mutable_neighbor()->set_first_seen_unix_ms(1764150000123);
  h.add_netdevs()->mutable_neighbor()->set_first_seen_unix_ms(int64_t{1} << 60);
  const std::string json = ToJson(h);
  EXPECT_THAT(json, HasSubstr("\"rdma_devices\""));    // The .proto's names.
  EXPECT_THAT(json, HasSubstr("\"index\": 0"));        // A zero is printed ...
  EXPECT_THAT(json, Not(HasSubstr("\"numa_node\"")));  // ... an unknown is absent.
  EXPECT_THAT(json, HasSubstr("\"first_seen_unix_ms\": 1764150000123"));            // A number ...
  EXPECT_THAT(json, HasSubstr("\"first_seen_unix_ms\": \"1152921504606846976\""));  // ... or not.
  EXPECT_EQ(json.back(), '\n');

  // Maps print sorted, whatever order they were filled in.
  v1::Selection sel;
  for (const char* k : {"UCX_NET_DEVICES", "NCCL_IB_HCA", "NCCL_IB_GID_INDEX"}) {
    (*sel.mutable_env())[k] = "x";
  }
  const std::string env = ToJson(sel);
  EXPECT_LT(env.find("NCCL_IB_GID_INDEX"), env.find("NCCL_IB_HCA"));
  EXPECT_LT(env.find("NCCL_IB_HCA"), env.find("UCX_NET_DEVICES"));
  EXPECT_EQ(ToJsonLine(sel).find('\n'), ToJsonLine(sel).size() - 1);  // One line.
}

}  // namespace
}  // namespace fabric
