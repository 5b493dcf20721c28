#include "agent/policy/select/pairing.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/inventory/query/host_query.h"
#include "agent/policy/select/select.h"
#include "tests/hosts/discovered.h"
#include "tests/hosts/hosts.h"
#include "tests/hosts/model_builder.h"

namespace fabric {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;

std::string PortOf(const v1::GpuAssignment& a) {
  return a.rdma_device() + ":" + std::to_string(a.port());
}

// Launchers that start one process per GPU ask per GPU: each answer must be the one the GPU
// gets in the whole-host request, on every example host.
TEST(PairingTest, PerGpuAnswersEqualTheWholeHostAnswerOnEveryExampleHost) {
  for (const std::string& name : testing::ExampleHostNames()) {
    SCOPED_TRACE(name);
    const v1::Host& host = testing::DiscoveredExampleHost(name);
    const std::vector<std::string> gpus = ComputeGpus(host);
    absl::StatusOr<v1::Selection> all = SelectNics(host, gpus, {});
    if (!all.ok()) continue;  // A host without a usable port answers nobody.
    ASSERT_THAT(all->assignments(), SizeIs(gpus.size()));
    for (size_t i = 0; i < gpus.size(); ++i) {
      absl::StatusOr<v1::Selection> one = SelectNics(host, {gpus[i]}, {});
      ASSERT_TRUE(one.ok()) << one.status();
      EXPECT_EQ(PortOf(one->assignments(0)), PortOf(all->assignments(i))) << gpus[i];
    }
    // Reversed, the request gives every GPU the same port again.
    std::vector<std::string> reversed(gpus.rbegin(), gpus.rend());
    absl::StatusOr<v1::Selection> back = SelectNics(host, reversed, {});
    ASSERT_TRUE(back.ok()) << back.status();
    for (size_t i = 0; i < gpus.size(); ++i) {
      EXPECT_EQ(PortOf(back->assignments(gpus.size() - 1 - i)), PortOf(all->assignments(i)));
    }
  }
}

TEST(PairingTest, TwoGpusOnOneSwitchAskedAloneGetDifferentNics) {
  const v1::Host& host = testing::DiscoveredExampleHost("pcie-2x2");
  const std::map<std::string, std::string> want = {
      {"0000:13:00.0", "mlx5_1:1"}, {"0000:14:00.0", "mlx5_2:1"}, {"0000:33:00.0", "mlx5_3:1"},
      {"0000:34:00.0", "mlx5_4:1"}, {"0000:93:00.0", "mlx5_5:1"}, {"0000:94:00.0", "mlx5_6:1"},
      {"0000:b3:00.0", "mlx5_7:1"}, {"0000:b4:00.0", "mlx5_8:1"}};
  for (const auto& [gpu, port] : want) {
    absl::StatusOr<v1::Selection> one = SelectNics(host, {gpu}, {});
    ASSERT_TRUE(one.ok()) << one.status();
    EXPECT_EQ(PortOf(one->assignments(0)), port) << gpu;
  }
  absl::StatusOr<v1::Selection> second = SelectNics(host, {"14:00.0"}, {});
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_THAT(second->assignments(0).reasons(1),
              HasSubstr("paired with mlx5_2: second of two GPUs under switch 0000:11:00.0"));
  EXPECT_THAT(second->assignments(0).reasons(1), HasSubstr("beat mlx5_1:1 on host-wide pairing"));
  bool lost_on_pairing = false;
  for (const v1::Rejection& r : second->assignments(0).rejected()) {
    if (r.port() == "mlx5_1:1") {
      lost_on_pairing = r.reason().find("lost on host-wide pairing") != std::string::npos;
    }
  }
  EXPECT_TRUE(lost_on_pairing);
}

// Four GPUs and two NICs under one switch: paired in PCI order, wrapping as NCCL does; the
// whole request still spreads two GPUs per NIC.
TEST(PairingTest, MoreGpusThanPortsWrapInPciOrder) {
  testing::ModelBuilder b;
  const std::vector<std::string> gpus = {"0000:1d:00.0", "0000:1a:00.0", "0000:1c:00.0",
                                         "0000:1b:00.0"};
  for (const std::string& g : gpus) b.Gpu(g);
  b.Nic("mlx5_b", "0000:1e:00.0", 0, "eth1", "10.0.1.2", "10.0.1.0/24");
  b.Nic("mlx5_a", "0000:1f:00.0", 0, "eth0", "10.0.0.2", "10.0.0.0/24");
  for (v1::Accelerator& a : *b.host().mutable_accelerators()) {
    for (const char* p : {"pci0000:17", "0000:17:01.0", "0000:18:00.0", "0000:19:00.0"}) {
      a.mutable_pci()->add_path(p);
    }
  }
  for (v1::RdmaDevice& d : *b.host().mutable_rdma_devices()) {
    for (const char* p : {"pci0000:17", "0000:17:01.0", "0000:18:00.0", "0000:19:01.0"}) {
      d.mutable_pci()->add_path(p);
    }
  }
  for (const std::string& g : gpus) {
    for (const char* d : {"mlx5_a", "mlx5_b"}) b.Distance(g, d, v1::DISTANCE_CLASS_PIX);
  }
  const v1::Host& host = b.Build();
  v1::GpuPairing pairing = PairGpus(host, {});
  ASSERT_THAT(pairing.pairs(), SizeIs(4));
  // GPUs in PCI order; ports in PCI order (mlx5_b sits at 1e, before mlx5_a at 1f).
  const char* want[][2] = {{"0000:1a:00.0", "mlx5_b"},
                           {"0000:1b:00.0", "mlx5_a"},
                           {"0000:1c:00.0", "mlx5_b"},
                           {"0000:1d:00.0", "mlx5_a"}};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(pairing.pairs(i).gpu(), want[i][0]);
    EXPECT_EQ(pairing.pairs(i).rdma_device(), want[i][1]);
  }
  EXPECT_EQ(pairing.pairs(2).reason(),
            "paired with mlx5_b: third of four GPUs under switch 0000:18:00.0, which has two "
            "equal ports (PCI order, wrapping as NCCL does)");

  absl::StatusOr<v1::Selection> all = SelectNics(host, gpus, {});
  ASSERT_TRUE(all.ok()) << all.status();
  std::map<std::string, int> per_port;
  for (const v1::GpuAssignment& a : all->assignments()) per_port[a.rdma_device()]++;
  EXPECT_EQ(per_port["mlx5_a"], 2);
  EXPECT_EQ(per_port["mlx5_b"], 2);
}

// The daemon computes the pairing once per snapshot; SelectNics follows the snapshot's, not one
// of its own per request.
TEST(PairingTest, SelectNicsFollowsTheSnapshotsPairing) {
  v1::Host host = testing::DiscoveredExampleHost("pcie-2x2");
  *host.mutable_pairing() = PairGpus(host, {});
  for (v1::GpuPair& p : *host.mutable_pairing()->mutable_pairs()) {
    if (p.gpu() == "0000:13:00.0") p.set_rdma_device("mlx5_2");
  }
  absl::StatusOr<v1::Selection> one = SelectNics(host, {"0000:13:00.0"}, {});
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->assignments(0).rdma_device(), "mlx5_2");
}

// many-hcas: GPU 34:00.0's switch-mate mlx5_2 is down, so every other NIC is equally far (NODE).
// The GPUs with a NIC of their own claim it first; 34:00.0 takes the first equal port in PCI
// order that no GPU is paired with, not GPU 24:00.0's mlx5_1.
TEST(PairingTest, BroadTiesTakeAPortNoOtherGpuIsPairedWith) {
  const v1::Host& host = testing::DiscoveredExampleHost("many-hcas");
  std::map<std::string, const v1::GpuPair*> by_gpu;
  v1::GpuPairing pairing = PairGpus(host, {});
  for (const v1::GpuPair& p : pairing.pairs()) by_gpu[p.gpu()] = &p;
  ASSERT_TRUE(by_gpu.count("0000:24:00.0") && by_gpu.count("0000:34:00.0"));
  EXPECT_EQ(by_gpu["0000:24:00.0"]->rdma_device(), "mlx5_1");
  EXPECT_EQ(by_gpu["0000:34:00.0"]->rdma_device(), "mlx5_3");
  EXPECT_THAT(by_gpu["0000:34:00.0"]->reason(), HasSubstr("ports other GPUs are paired with last"));
}

// A GPU whose best port is unique is paired with it; a GPU with no usable port is left out.
TEST(PairingTest, UniqueBestPortAndNoPort) {
  const v1::Host& host = testing::DiscoveredExampleHost("roce-9port");
  v1::GpuPairing pairing = PairGpus(host, {});
  ASSERT_THAT(pairing.pairs(), SizeIs(ComputeGpus(host).size()));
  EXPECT_THAT(pairing.pairs(0).reason(), HasSubstr("the only best port"));

  v1::Host no_ports = host;
  no_ports.clear_rdma_devices();
  EXPECT_THAT(PairGpus(no_ports, {}).pairs(), SizeIs(0));
}

// The daemon keeps the pairing and NFD labels while RankingInputs stays equal: on every example
// host, GID tables changed at random must then pair and select exactly as before.
TEST(RankingInputsTest, EqualInputsRankAlike) {
  std::mt19937 rng(20261126);
  int kept = 0, changed = 0;
  for (const std::string& name : testing::ExampleHostNames()) {
    SCOPED_TRACE(name);
    const v1::Host& host = testing::DiscoveredExampleHost(name);
    if (host.rdma_devices().empty()) continue;
    const std::string inputs = RankingInputs(host, {});
    const std::vector<std::string> gpus = ComputeGpus(host);
    const std::string pairing = PairGpus(host, {}).SerializeAsString();
    const absl::StatusOr<v1::Selection> a = SelectNics(host, gpus, {});
    for (int round = 0; round < 40; ++round) {
      v1::Host m = host;
      v1::RdmaDevice* d = m.mutable_rdma_devices(static_cast<int>(rng() % m.rdma_devices_size()));
      if (d->ports().empty()) continue;
      v1::Port* p = d->mutable_ports(static_cast<int>(rng() % d->ports_size()));
      const uint32_t pick = rng() % 4;
      if (pick == 0 && !p->gids().empty()) {  // A GID gone.
        p->mutable_gids()->erase(p->mutable_gids()->begin() + rng() % p->gids_size());
      } else if (pick == 1 && !p->gids().empty()) {  // Another address in a slot.
        v1::Gid* g = p->mutable_gids(static_cast<int>(rng() % p->gids_size()));
        if (!g->ipv4().empty()) g->set_ipv4(absl::StrCat("10.250.", rng() % 4, ".", rng() % 250));
      } else {  // A new GID at a high index: RoCE v1, v2, on the port's netdev or another.
        v1::Gid* g = p->add_gids();
        g->set_index(200 + rng() % 50);
        g->set_type(rng() % 2 ? v1::GID_TYPE_ROCE_V2 : v1::GID_TYPE_ROCE_V1);
        g->set_ipv4(absl::StrCat("10.251.", rng() % 4, ".", rng() % 250));
        g->set_netdev(rng() % 2 ? p->netdev() : "macvlan9");
      }
      const std::set<std::string> subjects = {absl::StrCat(d->name(), ":", p->number()),
                                              p->netdev()};
      const bool same = RankingInputs(m, {}) == inputs;
      // The daemon's form: only the changed port's inputs, which must agree with the whole.
      EXPECT_EQ(RankingInputs(m, {}, subjects) == RankingInputs(host, {}, subjects), same);
      if (!same) {
        ++changed;
        continue;
      }
      ++kept;
      EXPECT_EQ(PairGpus(m, {}).SerializeAsString(), pairing);
      absl::StatusOr<v1::Selection> b = SelectNics(m, gpus, {});
      ASSERT_EQ(a.ok(), b.ok());
      if (a.ok()) {
        for (int i = 0; i < a->assignments_size(); ++i) {
          EXPECT_EQ(a->assignments(i).rdma_device(), b->assignments(i).rdma_device());
          EXPECT_EQ(a->assignments(i).port(), b->assignments(i).port());
          EXPECT_EQ(a->assignments(i).gid_index(), b->assignments(i).gid_index());
          EXPECT_EQ(a->assignments(i).ipv4(), b->assignments(i).ipv4());
        }
      }
    }
  }
  // Both sides were seen: GIDs no ranking reads, and GIDs it does.
  EXPECT_GT(kept, 20);
  EXPECT_GT(changed, 20);
}

}  // namespace
}  // namespace fabric
