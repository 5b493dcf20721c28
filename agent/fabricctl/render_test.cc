#include "agent/fabricctl/render.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "agent/inventory/discovery/discovery.h"
#include "tests/hosts/builder.h"
#include "tests/hosts/hosts.h"

namespace fabric {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

v1::Host DiscoverExample(const std::string& name) {
  std::string tmpl = ::testing::TempDir() + "render.XXXXXX";
  EXPECT_NE(::mkdtemp(tmpl.data()), nullptr);
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
  EXPECT_THAT(out, HasSubstr("PF 4/8 VFs"));
  EXPECT_THAT(out, HasSubstr("InfiniBand"));
  EXPECT_THAT(out, HasSubstr("GID tables"));
  EXPECT_THAT(out, HasSubstr("Accelerators (8)"));
  // Each GPU's index (nvidia-smi order) and UUID.
  EXPECT_THAT(out, HasSubstr("INDEX"));
  EXPECT_THAT(
      out, ::testing::ContainsRegex("0000:19:00.0 .* 0 +GPU-c15521b1-b3dc-a50a-9daa-37e51b591d75"));
  EXPECT_THAT(out, ::testing::ContainsRegex("0000:dd:00.0 .* 7 +GPU-"));
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
  EXPECT_THAT(RenderInventory(h), HasSubstr("mlx5_7: fw_ver unknown: No such file or directory"));
}

TEST(RenderTopology, MatrixRowsAndLegend) {
  v1::Host h = DiscoverExample("roce-9port");
  std::string out = RenderTopology(h);
  // A header, 8 GPU rows, the NUMA row; the BMC display is not a row.
  EXPECT_THAT(out, HasSubstr("GPU7"));
  EXPECT_THAT(out, Not(HasSubstr("GPU8")));
  EXPECT_THAT(out, Not(HasSubstr("ASPEED"))) << "management display must not appear";
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
