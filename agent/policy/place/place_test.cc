#include "agent/policy/place/place.h"

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/inventory/discovery/discovery.h"
#include "agent/policy/select/select.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/hosts/discovered.h"
#include "tests/hosts/hosts.h"
#include "tests/hosts/model_builder.h"

namespace fabric {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::ModelBuilder;
using ::testing::SizeIs;

// roce-9port's GPUs: 1a/1e share a switch on pci0000:15 and 3c/40 one on pci0000:37 (NUMA 0);
// 9c/a0 (pci0000:97) and bc/c0 (pci0000:b7) on NUMA 1. GPU i has mlx5_{i+1} under its own
// second-level switch (PIX).
const std::vector<std::string> kRoceGpus = {"0000:1a:00.0", "0000:1e:00.0", "0000:3c:00.0",
                                            "0000:40:00.0", "0000:9c:00.0", "0000:a0:00.0",
                                            "0000:bc:00.0", "0000:c0:00.0"};

const v1::Host& Example(const std::string& name) { return testing::DiscoveredExampleHost(name); }

v1::PlaceRequest Request(uint32_t count, uint32_t max_results = 0) {
  v1::PlaceRequest r;
  r.set_gpu_count(count);
  r.set_max_results(max_results);
  return r;
}

std::vector<std::string> Gpus(const v1::Placement& p) { return {p.gpus().begin(), p.gpus().end()}; }

std::vector<std::vector<std::string>> AllGpus(const v1::PlaceResponse& r) {
  std::vector<std::vector<std::string>> out;
  for (const v1::Placement& p : r.placements()) out.push_back(Gpus(p));
  return out;
}

std::vector<std::string> Ports(const v1::Placement& p) {
  std::vector<std::string> out;
  for (const v1::GpuAssignment& a : p.selection().assignments()) {
    out.push_back(absl::StrCat(a.rdma_device(), ":", a.port()));
  }
  return out;
}

int Rank(v1::DistanceClass d) { return d == v1::DISTANCE_CLASS_UNSPECIFIED ? 5 : d; }

// Checks what every placement must satisfy: k distinct GPUs in PCI order, a selection for
// exactly those GPUs in that order, scores recomputed from the selection and the host, and the
// placements sorted by score.
void ExpectValid(const v1::Host& host, const v1::PlaceResponse& resp, int k) {
  std::map<std::string, std::string> numa;
  for (const v1::Accelerator& a : host.accelerators()) {
    numa[a.pci_address()] = a.pci().has_numa_node() ? absl::StrCat(a.pci().numa_node()) : "?";
  }
  std::tuple<int, int, int, int, std::vector<std::string>> prev;
  for (int i = 0; i < resp.placements_size(); ++i) {
    SCOPED_TRACE(absl::StrCat("placement ", i));
    const v1::Placement& p = resp.placements(i);
    ASSERT_EQ(p.gpus_size(), k);
    ASSERT_EQ(p.selection().assignments_size(), k);
    int worst = 0, sum = 0, shared = 0;
    std::set<std::string> ports, nodes;
    for (int j = 0; j < k; ++j) {
      if (j > 0) {
        EXPECT_LT(p.gpus(j - 1), p.gpus(j));
      }
      const v1::GpuAssignment& a = p.selection().assignments(j);
      EXPECT_EQ(a.gpu(), p.gpus(j));
      ASSERT_TRUE(numa.count(p.gpus(j))) << p.gpus(j);
      nodes.insert(numa[p.gpus(j)]);
      worst = std::max(worst, Rank(a.distance()));
      sum += Rank(a.distance());
      if (!ports.insert(absl::StrCat(a.rdma_device(), ":", a.port())).second) shared++;
    }
    EXPECT_EQ(p.worst_distance(), worst);
    EXPECT_EQ(p.distance_sum(), static_cast<uint32_t>(sum));
    EXPECT_EQ(p.numa_nodes(), nodes.size());
    EXPECT_EQ(p.shared_ports(), static_cast<uint32_t>(shared));
    EXPECT_TRUE(p.selection().env().count("NCCL_IB_HCA")) << p.selection().DebugString();
    auto key = std::make_tuple(worst, sum, static_cast<int>(nodes.size()), shared, Gpus(p));
    if (i > 0) {
      EXPECT_LT(prev, key);
    }
    prev = key;
  }
}

absl::StatusOr<v1::PlaceResponse> PlaceOn(const v1::Host& host, const v1::PlaceRequest& req) {
  absl::StatusOr<v1::PlaceResponse> r = Place(host, req, {});
  if (r.ok()) ExpectValid(host, *r, static_cast<int>(req.gpu_count()));
  return r;
}

// ---------------------------------------------------------------------------------------------
// roce-9port.

TEST(PlaceTest, BestPairOnRoce9PortSharesASwitchAndNuma) {
  const v1::Host& host = Example("roce-9port");
  absl::StatusOr<v1::PlaceResponse> r = PlaceOn(host, Request(2));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_THAT(r->placements(), SizeIs(5));
  const v1::Placement& best = r->placements(0);
  EXPECT_THAT(Gpus(best), ElementsAre("0000:1a:00.0", "0000:1e:00.0"));
  EXPECT_EQ(best.worst_distance(), v1::DISTANCE_CLASS_PIX);
  EXPECT_EQ(best.distance_sum(), 2u);
  EXPECT_EQ(best.numa_nodes(), 1u);
  EXPECT_EQ(best.shared_ports(), 0u);
  EXPECT_THAT(Ports(best), ElementsAre("mlx5_1:1", "mlx5_2:1"));
  EXPECT_EQ(best.selection().env().at("NCCL_IB_HCA"), "=mlx5_1:1,mlx5_2:1");
  // Both GPUs sit behind the same first-level switch (0000:16:00.0 on pci0000:15).
  std::vector<std::vector<std::string>> paths;
  for (const v1::Accelerator& a : host.accelerators()) {
    if (a.pci_address() == best.gpus(0) || a.pci_address() == best.gpus(1)) {
      paths.emplace_back(a.pci().path().begin(), a.pci().path().end());
    }
  }
  ASSERT_THAT(paths, SizeIs(2));
  ASSERT_GE(paths[0].size(), 3u);
  ASSERT_GE(paths[1].size(), 3u);
  EXPECT_EQ(paths[0][0], paths[1][0]);
  EXPECT_EQ(paths[0][2], paths[1][2]);
  EXPECT_THAT(r->notes(), IsEmpty());

  // The selection is exactly what SelectNics gives for that set.
  absl::StatusOr<v1::Selection> direct = SelectNics(host, Gpus(best), {});
  ASSERT_TRUE(direct.ok()) << direct.status();
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*direct, best.selection()));
}

TEST(PlaceTest, SameNumaPairsComeBeforeCrossNumaPairs) {
  const v1::Host& host = Example("roce-9port");
  absl::StatusOr<v1::PlaceResponse> r = PlaceOn(host, Request(2, 28));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_THAT(r->placements(), SizeIs(28));  // C(8, 2).
  for (int i = 0; i < 28; ++i) {
    EXPECT_EQ(r->placements(i).numa_nodes(), i < 12 ? 1u : 2u) << i;
    EXPECT_EQ(r->placements(i).worst_distance(), v1::DISTANCE_CLASS_PIX);
  }
  EXPECT_THAT(Gpus(r->placements(11)), ElementsAre("0000:bc:00.0", "0000:c0:00.0"));
  EXPECT_THAT(Gpus(r->placements(12)), ElementsAre("0000:1a:00.0", "0000:9c:00.0"));
}

TEST(PlaceTest, EveryCountOnRoce9Port) {
  const v1::Host& host = Example("roce-9port");
  struct Case {
    uint32_t count;
    size_t placements;  // min(C(8, k), 5).
    std::vector<std::string> best;
    uint32_t numa_nodes;
  };
  const Case cases[] = {
      {1, 5, {"0000:1a:00.0"}, 1},
      {2, 5, {"0000:1a:00.0", "0000:1e:00.0"}, 1},
      {3, 5, {"0000:1a:00.0", "0000:1e:00.0", "0000:3c:00.0"}, 1},
      {4, 5, {"0000:1a:00.0", "0000:1e:00.0", "0000:3c:00.0", "0000:40:00.0"}, 1},
      {5, 5, {"0000:1a:00.0", "0000:1e:00.0", "0000:3c:00.0", "0000:40:00.0", "0000:9c:00.0"}, 2},
      {6, 5, {kRoceGpus.begin(), kRoceGpus.begin() + 6}, 2},
      {7, 5, {kRoceGpus.begin(), kRoceGpus.begin() + 7}, 2},
      {8, 1, kRoceGpus, 2},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat("gpu_count ", c.count));
    absl::StatusOr<v1::PlaceResponse> r = PlaceOn(host, Request(c.count));
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_THAT(r->placements(), SizeIs(c.placements));
    const v1::Placement& best = r->placements(0);
    EXPECT_THAT(Gpus(best), ElementsAreArray(c.best));
    EXPECT_EQ(best.worst_distance(), v1::DISTANCE_CLASS_PIX);
    EXPECT_EQ(best.distance_sum(), c.count);
    EXPECT_EQ(best.numa_nodes(), c.numa_nodes);
    EXPECT_EQ(best.shared_ports(), 0u);
  }
}

// Every size from one GPU to all eight has an answer (speed: tests/bench/discovery_bench).
TEST(PlaceTest, Roce9PortEveryCount) {
  const v1::Host& host = Example("roce-9port");
  for (uint32_t k = 1; k <= 8; ++k) {
    absl::StatusOr<v1::PlaceResponse> r = Place(host, Request(k), {});
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_FALSE(r->placements().empty()) << k;
    EXPECT_EQ(r->placements(0).gpus_size(), static_cast<int>(k));
  }
}

TEST(PlaceTest, PolicyReachesTheSelection) {
  const v1::Host& host = Example("roce-9port");
  v1::SelectionPolicy policy;
  policy.add_deny("mlx5_1");  // GPU 1a's own NIC: it now gets mlx5_2 at PXB.
  absl::StatusOr<v1::PlaceResponse> r = Place(host, Request(1, 8), policy);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_THAT(r->placements(), SizeIs(8));
  EXPECT_THAT(Gpus(r->placements(0)), ElementsAre("0000:1e:00.0"));
  EXPECT_THAT(Gpus(r->placements(7)), ElementsAre("0000:1a:00.0"));
  EXPECT_EQ(r->placements(7).worst_distance(), v1::DISTANCE_CLASS_PXB);
  EXPECT_THAT(Ports(r->placements(7)), ElementsAre("mlx5_2:1"));

  policy.clear_deny();
  (*policy.mutable_static_env())["NCCL_IB_TIMEOUT"] = "22";
  r = Place(host, Request(1, 1), policy);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->placements(0).selection().env().at("NCCL_IB_TIMEOUT"), "22");
}

// ---------------------------------------------------------------------------------------------
// Constraints.

TEST(PlaceTest, SameNumaNodeKeepsOnlyOneNodeSets) {
  const v1::Host& host = Example("roce-9port");
  v1::PlaceRequest req = Request(4, 10);
  req.set_same_numa_node(true);
  absl::StatusOr<v1::PlaceResponse> r = PlaceOn(host, req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(
      AllGpus(*r),
      ElementsAre(ElementsAre("0000:1a:00.0", "0000:1e:00.0", "0000:3c:00.0", "0000:40:00.0"),
                  ElementsAre("0000:9c:00.0", "0000:a0:00.0", "0000:bc:00.0", "0000:c0:00.0")));
  EXPECT_THAT(r->notes(), ElementsAre("of 70 sets of 4 GPUs, 68 span NUMA nodes (same_numa_node)"));

  // Without it the two still lead, and cross-node sets follow.
  req.set_same_numa_node(false);
  r = PlaceOn(host, req);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_THAT(r->placements(), SizeIs(10));
  EXPECT_EQ(r->placements(1).numa_nodes(), 1u);
  EXPECT_EQ(r->placements(2).numa_nodes(), 2u);

  // Five GPUs never fit one node of four.
  req = Request(5);
  req.set_same_numa_node(true);
  r = PlaceOn(host, req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->placements(), IsEmpty());
  EXPECT_THAT(r->notes(), Contains(AllOf(HasSubstr("no set of 5 GPUs"), HasSubstr("same_numa_node"),
                                         HasSubstr("0: 4, 1: 4"))));
}

TEST(PlaceTest, UnknownNumaIsANodeOfItsOwn) {
  ModelBuilder b;
  b.Gpu("0000:18:00.0", 0).Gpu("0000:28:00.0", std::nullopt).Gpu("0000:38:00.0", std::nullopt);
  b.Nic("mlx5_1", "0000:19:00.0", 0, "eth1", "10.0.1.1");
  for (const char* g : {"0000:18:00.0", "0000:28:00.0", "0000:38:00.0"}) {
    b.Distance(g, "mlx5_1", v1::DISTANCE_CLASS_NODE);
  }
  v1::PlaceRequest req = Request(2);
  absl::StatusOr<v1::PlaceResponse> r = PlaceOn(b.Build(), req);
  ASSERT_TRUE(r.ok()) << r.status();
  // The two unknowns count as one node; each with the known one spans two.
  ASSERT_THAT(r->placements(), SizeIs(3));
  EXPECT_THAT(Gpus(r->placements(0)), ElementsAre("0000:28:00.0", "0000:38:00.0"));
  EXPECT_EQ(r->placements(0).numa_nodes(), 1u);
  EXPECT_EQ(r->placements(1).numa_nodes(), 2u);

  req.set_same_numa_node(true);
  r = PlaceOn(b.Build(), req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(AllGpus(*r), ElementsAre(ElementsAre("0000:28:00.0", "0000:38:00.0")));
}

// GPUs a and b have only mlx5_1 close (PIX), c only mlx5_2.
ModelBuilder TwoNicsThreeGpus() {
  ModelBuilder b;
  b.Gpu("0000:18:00.0", 0).Gpu("0000:1c:00.0", 0).Gpu("0000:28:00.0", 0);
  b.Nic("mlx5_1", "0000:19:00.0", 0, "eth1", "10.0.1.1");
  b.Nic("mlx5_2", "0000:29:00.0", 0, "eth2", "10.0.2.1");
  for (const char* g : {"0000:18:00.0", "0000:1c:00.0"}) {
    b.Distance(g, "mlx5_1", v1::DISTANCE_CLASS_PIX).Distance(g, "mlx5_2", v1::DISTANCE_CLASS_NODE);
  }
  b.Distance("0000:28:00.0", "mlx5_1", v1::DISTANCE_CLASS_NODE)
      .Distance("0000:28:00.0", "mlx5_2", v1::DISTANCE_CLASS_PIX);
  return b;
}

TEST(PlaceTest, SharedPortsRankBelowOwnPorts) {
  ModelBuilder b = TwoNicsThreeGpus();
  absl::StatusOr<v1::PlaceResponse> r = PlaceOn(b.Build(), Request(2));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(AllGpus(*r), ElementsAre(ElementsAre("0000:18:00.0", "0000:28:00.0"),
                                       ElementsAre("0000:1c:00.0", "0000:28:00.0"),
                                       ElementsAre("0000:18:00.0", "0000:1c:00.0")));
  EXPECT_EQ(r->placements(0).shared_ports(), 0u);
  EXPECT_EQ(r->placements(2).shared_ports(), 1u);
  EXPECT_THAT(Ports(r->placements(2)), ElementsAre("mlx5_1:1", "mlx5_1:1"));
}

TEST(PlaceTest, OneNicPerGpuDropsSetsSharingAPort) {
  ModelBuilder b = TwoNicsThreeGpus();
  v1::PlaceRequest req = Request(2);
  req.set_one_nic_per_gpu(true);
  absl::StatusOr<v1::PlaceResponse> r = PlaceOn(b.Build(), req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(AllGpus(*r), ElementsAre(ElementsAre("0000:18:00.0", "0000:28:00.0"),
                                       ElementsAre("0000:1c:00.0", "0000:28:00.0")));
  EXPECT_THAT(r->notes(), ElementsAre("of 3 sets of 2 GPUs, 1 share an RDMA port "
                                      "(one_nic_per_gpu)"));

  // All three need mlx5_1 twice.
  req.set_gpu_count(3);
  r = PlaceOn(b.Build(), req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->placements(), IsEmpty());
  EXPECT_THAT(r->notes(),
              Contains(AllOf(HasSubstr("no set of 3 GPUs"), HasSubstr("one_nic_per_gpu"))));
}

// Spreading over equally good ports is part of the score: four GPUs, two equal NICs.
TEST(PlaceTest, SpreadingAvoidsSharingWhereItCan) {
  ModelBuilder b;
  const std::vector<std::string> gpus = {"0000:18:00.0", "0000:28:00.0", "0000:38:00.0",
                                         "0000:48:00.0"};
  for (const std::string& g : gpus) b.Gpu(g, 0);
  b.Nic("mlx5_1", "0000:1a:00.0", 0, "eth1", "10.0.1.1");
  b.Nic("mlx5_2", "0000:2a:00.0", 0, "eth2", "10.0.2.1");
  for (const std::string& g : gpus) {
    b.Distance(g, "mlx5_1", v1::DISTANCE_CLASS_NODE).Distance(g, "mlx5_2", v1::DISTANCE_CLASS_NODE);
  }
  v1::PlaceRequest req = Request(2, 10);
  req.set_one_nic_per_gpu(true);
  absl::StatusOr<v1::PlaceResponse> r = PlaceOn(b.Build(), req);
  ASSERT_TRUE(r.ok()) << r.status();
  // The host-wide pairing puts 18 and 38 on mlx5_1, 28 and 48 on mlx5_2 (PCI order, wrapping),
  // whoever asks: the four pairs that mix them use one NIC per GPU.
  ASSERT_THAT(r->placements(), SizeIs(4));
  EXPECT_THAT(Ports(r->placements(0)), ElementsAre("mlx5_1:1", "mlx5_2:1"));
  for (const v1::Placement& p : r->placements()) {
    EXPECT_FALSE(p.gpus(0) == "0000:18:00.0" && p.gpus(1) == "0000:38:00.0");
  }

  req.set_gpu_count(3);
  r = PlaceOn(b.Build(), req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->placements(), IsEmpty());

  req.set_one_nic_per_gpu(false);
  r = PlaceOn(b.Build(), req);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_THAT(r->placements(), SizeIs(4));
  EXPECT_EQ(r->placements(0).shared_ports(), 1u);
  EXPECT_EQ(r->placements(0).worst_distance(), v1::DISTANCE_CLASS_NODE);
  EXPECT_EQ(r->placements(0).distance_sum(), 12u);
}

// ---------------------------------------------------------------------------------------------
// Candidates.

TEST(PlaceTest, VendorFilter) {
  const v1::Host& host = Example("amd-mi300x-bnxt");
  // Eight MI300X and a Tenstorrent card (no NIC under its root complex: NODE at best).
  absl::StatusOr<v1::PlaceResponse> r = PlaceOn(host, Request(9));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_THAT(r->placements(), SizeIs(1));
  EXPECT_THAT(Gpus(r->placements(0)), Contains("0000:c6:00.0"));
  EXPECT_EQ(r->placements(0).worst_distance(), v1::DISTANCE_CLASS_NODE);

  struct Case {
    std::string vendor;
    size_t candidates;
  };
  const Case cases[] = {{"amd", 8},   {"AMD", 8},    {" Amd ", 8},  {"0x1002", 8},
                        {"1002", 8},  {"0X1002", 8}, {"nvidia", 0}, {"0x10de", 0},
                        {"intel", 0}, {"habana", 0}, {"0x1e52", 1}, {"1E52", 1}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.vendor);
    v1::PlaceRequest req = Request(1, 100);
    req.set_vendor(c.vendor);
    r = PlaceOn(host, req);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_THAT(r->placements(), SizeIs(c.candidates));
    for (const v1::Placement& p : r->placements()) {
      EXPECT_EQ(p.gpus(0) == "0000:c6:00.0", c.candidates == 1);
    }
    EXPECT_THAT(r->notes(), Contains(AllOf(HasSubstr(absl::StrCat("vendor \"", c.vendor, "\"")),
                                           HasSubstr("leaves out"))));
  }

  v1::PlaceRequest req = Request(9);
  req.set_vendor("amd");
  r = PlaceOn(host, req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->placements(), IsEmpty());
  EXPECT_THAT(r->notes(), ElementsAre("vendor \"amd\" leaves out 0000:c6:00.0 (Tenstorrent)",
                                      HasSubstr("gpu_count 9 exceeds the 8 candidate GPUs")));

  // NVIDIA by name, enum or ID on an NVIDIA host.
  for (const char* v : {"nvidia", "NVIDIA", "10de"}) {
    req = Request(8);
    req.set_vendor(v);
    r = PlaceOn(Example("dgx-h100-ib"), req);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_THAT(r->placements(), SizeIs(1)) << v;
    EXPECT_THAT(r->notes(), IsEmpty()) << v;
  }

  for (const char* bad : {"acme", "0x10d", "10de0", "0xzzzz", "nvidia-ish"}) {
    req = Request(1);
    req.set_vendor(bad);
    r = Place(host, req, {});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr(absl::StrCat("\"", bad, "\"")));
  }
}

TEST(PlaceTest, CandidatesNarrowTheChoice) {
  const v1::Host& host = Example("roce-9port");
  v1::PlaceRequest req = Request(2, 100);
  // Long, short and nvidia-smi forms, one GPU twice.
  for (const char* c : {"9c:00.0", "0000:A0:00.0", "00000000:bc:00.0", "0000:9c:00.0"}) {
    req.add_candidates(c);
  }
  absl::StatusOr<v1::PlaceResponse> r = PlaceOn(host, req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(AllGpus(*r), ElementsAre(ElementsAre("0000:9c:00.0", "0000:a0:00.0"),
                                       ElementsAre("0000:9c:00.0", "0000:bc:00.0"),
                                       ElementsAre("0000:a0:00.0", "0000:bc:00.0")));

  req.set_gpu_count(4);
  r = PlaceOn(host, req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->placements(), IsEmpty());
  EXPECT_THAT(r->notes(), ElementsAre("gpu_count 4 exceeds the 3 candidate GPUs: 0000:9c:00.0, "
                                      "0000:a0:00.0, 0000:bc:00.0"));
}

TEST(PlaceTest, BadCandidates) {
  const v1::Host& host = Example("roce-9port");
  struct Case {
    std::string candidate;
    absl::StatusCode code;
    std::string message;
  };
  const Case cases[] = {
      {"0000:55:00.0", absl::StatusCode::kNotFound, "0000:55:00.0"},
      {"55:00.0", absl::StatusCode::kNotFound, "0000:55:00.0"},
      {"zz:00", absl::StatusCode::kInvalidArgument, "\"zz:00\""},
      {"", absl::StatusCode::kInvalidArgument, "\"\""},
      {"0000:1a:00.0.0", absl::StatusCode::kInvalidArgument, "\"0000:1a:00.0.0\""},
      // The BMC's VGA is an accelerator of the host but never a GPU.
      {"0000:03:00.0", absl::StatusCode::kInvalidArgument, "management display"},
      // A NIC is not an accelerator.
      {"0000:1b:00.0", absl::StatusCode::kNotFound, "0000:1b:00.0"},
      // Names are exact.
      {" 0000:1a:00.0", absl::StatusCode::kInvalidArgument, "candidate \" 0000:1a:00.0\""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.candidate);
    v1::PlaceRequest req = Request(1);
    req.add_candidates("0000:1a:00.0");
    req.add_candidates(c.candidate);
    absl::StatusOr<v1::PlaceResponse> r = Place(host, req, {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), c.code) << r.status();
    EXPECT_THAT(r.status().message(), HasSubstr(c.message));
  }
}

// Candidates take every GPU name form: PCI address, nvidia-smi index, UUID.
TEST(PlaceTest, CandidatesByIndexAndUuid) {
  const v1::Host& host = Example("dgx-h100-ib");
  v1::PlaceRequest req = Request(2);
  req.add_candidates("GPU-c15521b1-b3dc-a50a-9daa-37e51b591d75");  // GPU 0, 0000:19:00.0
  req.add_candidates("1");                                         // 0000:41:00.0
  absl::StatusOr<v1::PlaceResponse> r = Place(host, req, {});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_THAT(r->placements(), SizeIs(1));
  EXPECT_THAT(r->placements(0).gpus(), ElementsAre("0000:19:00.0", "0000:41:00.0"));

  req = Request(1);
  req.add_candidates("GPU-00000000-b3dc-a50a-9daa-37e51b591d75");
  r = Place(host, req, {});
  EXPECT_TRUE(absl::IsNotFound(r.status())) << r.status();
  req = Request(1);
  req.add_candidates("8");
  r = Place(host, req, {});
  EXPECT_TRUE(absl::IsNotFound(r.status())) << r.status();
  req = Request(1);
  req.add_candidates("GPU-1234");
  r = Place(host, req, {});
  EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
}

// ---------------------------------------------------------------------------------------------
// Request validation.

TEST(PlaceTest, BoundsTheCandidates) {
  const v1::Host& host = Example("roce-9port");
  v1::PlaceRequest req = Request(1);
  for (size_t i = 0; i <= kMaxGpusPerRequest; ++i) req.add_candidates("0000:1a:00.0");
  absl::StatusOr<v1::PlaceResponse> r = Place(host, req, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(r.status().message(), "candidates: 65 given; at most 64 per request");
  req.mutable_candidates()->RemoveLast();
  EXPECT_TRUE(Place(host, req, {}).ok()) << "duplicates count once";
}

TEST(PlaceTest, GpuCount) {
  const v1::Host& host = Example("roce-9port");
  absl::StatusOr<v1::PlaceResponse> r = Place(host, Request(0), {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "gpu_count must be at least 1");

  for (uint32_t count : {9u, 100u, 4000000000u}) {
    r = Place(host, Request(count), {});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_THAT(r->placements(), IsEmpty());
    EXPECT_THAT(r->notes(), ElementsAre(HasSubstr(absl::StrCat("gpu_count ", count,
                                                               " exceeds the 8 candidate "
                                                               "GPUs"))));
  }

  // A host without GPUs.
  ModelBuilder b;
  b.Nic("mlx5_1", "0000:19:00.0", 0, "eth1", "10.0.1.1");
  r = Place(b.Build(), Request(1), {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->notes(), ElementsAre("gpu_count 1 exceeds the 0 candidate GPUs"));
}

TEST(PlaceTest, MaxResults) {
  const v1::Host& host = Example("roce-9port");
  struct Case {
    uint32_t max_results;
    size_t placements;
  };
  for (const Case& c : {Case{0, 5}, Case{1, 1}, Case{3, 3}, Case{5, 5}, Case{27, 27}, Case{28, 28},
                        Case{100, 28}}) {
    absl::StatusOr<v1::PlaceResponse> r = PlaceOn(host, Request(2, c.max_results));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_THAT(r->placements(), SizeIs(c.placements)) << c.max_results;
  }
  absl::StatusOr<v1::PlaceResponse> r = Place(host, Request(2, 101), {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("max_results 101"));
}

TEST(PlaceTest, SelectionErrorsPropagate) {
  ModelBuilder none;
  none.Gpu("0000:18:00.0", 0);
  absl::StatusOr<v1::PlaceResponse> r = Place(none.Build(), Request(1), {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("no RDMA device"));

  ModelBuilder down;
  down.Gpu("0000:18:00.0", 0);
  down.Nic("mlx5_1", "0000:19:00.0", 0, "eth1", "10.0.1.1")
      ->mutable_ports(0)
      ->set_state(v1::PORT_STATE_DOWN);
  r = Place(down.Build(), Request(1), {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("no active RDMA port"));

  // A bad policy is refused as SelectNics refuses it, even when no selection would run.
  v1::SelectionPolicy bad;
  bad.add_deny("");
  for (uint32_t count : {1u, 9u}) {
    r = Place(Example("roce-9port"), Request(count), bad);
    ASSERT_FALSE(r.ok()) << count;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("deny[0] is empty"));
  }
}

// ---------------------------------------------------------------------------------------------
// The model against the real thing.

// Every set of k compute accelerators scored from its own SelectNics call, constraints applied,
// best first: what Place must return when it enumerates exhaustively.
std::vector<std::vector<std::string>> BruteForce(const v1::Host& host, int k, bool same_numa,
                                                 bool one_nic, size_t max_results) {
  std::vector<std::string> gpus;
  std::map<std::string, std::string> numa;
  for (const v1::Accelerator& a : host.accelerators()) {
    if (a.management_display()) continue;
    gpus.push_back(a.pci_address());
    numa[a.pci_address()] = a.pci().has_numa_node() ? absl::StrCat(a.pci().numa_node()) : "?";
  }
  std::sort(gpus.begin(), gpus.end());
  std::vector<std::tuple<int, int, int, int, std::vector<std::string>>> keys;
  std::vector<int> idx(k);
  for (int i = 0; i < k; ++i) idx[i] = i;
  const int n = static_cast<int>(gpus.size());
  while (k <= n) {
    std::vector<std::string> set;
    for (int i : idx) set.push_back(gpus[i]);
    absl::StatusOr<v1::Selection> s = SelectNics(host, set, {});
    EXPECT_TRUE(s.ok()) << s.status();
    if (!s.ok()) return {};
    int worst = 0, sum = 0, shared = 0;
    std::set<std::string> ports, nodes;
    for (const v1::GpuAssignment& a : s->assignments()) {
      worst = std::max(worst, Rank(a.distance()));
      sum += Rank(a.distance());
      nodes.insert(numa[a.gpu()]);
      if (!ports.insert(absl::StrCat(a.rdma_device(), ":", a.port())).second) shared++;
    }
    if (!(same_numa && nodes.size() > 1) && !(one_nic && shared > 0)) {
      keys.emplace_back(worst, sum, static_cast<int>(nodes.size()), shared, set);
    }
    int i = k - 1;
    while (i >= 0 && idx[i] == n - k + i) --i;
    if (i < 0) break;
    idx[i]++;
    for (int j = i + 1; j < k; ++j) idx[j] = idx[j - 1] + 1;
  }
  std::sort(keys.begin(), keys.end());
  std::vector<std::vector<std::string>> out;
  for (size_t i = 0; i < keys.size() && i < max_results; ++i) out.push_back(std::get<4>(keys[i]));
  return out;
}

TEST(PlaceTest, MatchesSelectNicsOnEverySet) {
  std::vector<std::pair<std::string, v1::Host>> hosts;
  for (const char* name : {"roce-9port", "dgx-h100-ib", "amd-mi300x-bnxt", "many-hcas"}) {
    hosts.emplace_back(name, Example(name));
  }
  hosts.emplace_back("two NICs, three GPUs", TwoNicsThreeGpus().Build());
  {
    // Four GPUs over three equal NICs (spreading decides), one GPU with a NIC of its own.
    ModelBuilder b;
    const std::vector<std::string> gpus = {"0000:18:00.0", "0000:28:00.0", "0000:38:00.0",
                                           "0000:48:00.0", "0000:58:00.0"};
    for (const std::string& g : gpus) b.Gpu(g, g < "0000:40" ? 0 : 1);
    b.Nic("mlx5_1", "0000:1a:00.0", 0, "eth1", "10.0.1.1");
    b.Nic("mlx5_2", "0000:2a:00.0", 0, "eth2", "10.0.2.1");
    b.Nic("mlx5_10", "0000:3a:00.0", 1, "eth10", "10.0.10.1");
    b.Nic("mlx5_3", "0000:5a:00.0", 1, "eth3", "10.0.3.1");
    for (const std::string& g : gpus) {
      const bool own = g == "0000:58:00.0";
      for (const char* nic : {"mlx5_1", "mlx5_2", "mlx5_10"}) {
        b.Distance(g, nic, own ? v1::DISTANCE_CLASS_SYS : v1::DISTANCE_CLASS_PHB);
      }
      b.Distance(g, "mlx5_3", own ? v1::DISTANCE_CLASS_PIX : v1::DISTANCE_CLASS_SYS);
    }
    hosts.emplace_back("spreading", b.Build());
  }
  for (const auto& [name, host] : hosts) {
    for (uint32_t k = 1; k <= 4; ++k) {
      for (int constraints = 0; constraints < 4; ++constraints) {
        SCOPED_TRACE(absl::StrCat(name, ", gpu_count ", k, ", constraints ", constraints));
        v1::PlaceRequest req = Request(k, 100);
        req.set_same_numa_node(constraints & 1);
        req.set_one_nic_per_gpu(constraints & 2);
        absl::StatusOr<v1::PlaceResponse> r = PlaceOn(host, req);
        ASSERT_TRUE(r.ok()) << r.status();
        EXPECT_EQ(AllGpus(*r), BruteForce(host, k, constraints & 1, constraints & 2, 100));
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Determinism.

TEST(PlaceTest, Deterministic) {
  for (const char* name : {"roce-9port", "dgx-h100-ib", "amd-mi300x-bnxt", "many-hcas"}) {
    SCOPED_TRACE(name);
    v1::Host host = Example(name);
    for (uint32_t k : {1u, 2u, 3u}) {
      absl::StatusOr<v1::PlaceResponse> a = PlaceOn(host, Request(k, 20));
      absl::StatusOr<v1::PlaceResponse> b = Place(host, Request(k, 20), {});
      ASSERT_TRUE(a.ok()) << a.status();
      ASSERT_TRUE(b.ok()) << b.status();
      ASSERT_FALSE(a->placements().empty());
      EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*a, *b));

      // The order the host lists its accelerators in changes nothing.
      v1::Host reversed = host;
      std::reverse(reversed.mutable_accelerators()->begin(),
                   reversed.mutable_accelerators()->end());
      absl::StatusOr<v1::PlaceResponse> c = Place(reversed, Request(k, 20), {});
      ASSERT_TRUE(c.ok()) << c.status();
      EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*a, *c)) << k;
    }
  }
}

// many-hcas: GPU3 (34:00.0) sits next to a DOWN port, so its best active port is farther.
TEST(PlaceTest, ManyHcasAvoidsTheGpuWithADownNic) {
  const v1::Host& host = Example("many-hcas");
  absl::StatusOr<v1::PlaceResponse> r = PlaceOn(host, Request(3));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_THAT(r->placements(), SizeIs(4));
  EXPECT_THAT(Gpus(r->placements(0)), ElementsAre("0000:24:00.0", "0000:b4:00.0", "0000:c4:00.0"));
  EXPECT_EQ(r->placements(0).worst_distance(), v1::DISTANCE_CLASS_PIX);
  for (int i = 1; i < 4; ++i) {
    EXPECT_THAT(Gpus(r->placements(i)), Contains("0000:34:00.0"));
    EXPECT_GT(r->placements(i).worst_distance(), v1::DISTANCE_CLASS_PIX);
  }
}

// ---------------------------------------------------------------------------------------------
// Large hosts: the search path.

// 64 GPUs, 16 NICs. NIC j serves GPUs 4j..4j+3 under its switch (PIX); the other NICs of its
// NUMA node (NICs 0-7 node 0, 8-15 node 1) are NODE, the rest SYS.
ModelBuilder SixtyFourGpus() {
  ModelBuilder b;
  auto gpu = [](int i) { return absl::StrFormat("0000:%02x:00.0", 0x10 + 3 * i); };
  for (int i = 0; i < 64; ++i) b.Gpu(gpu(i), i < 32 ? 0 : 1);
  for (int j = 0; j < 16; ++j) {
    const std::string name = absl::StrCat("mlx5_", j);
    b.Nic(name, absl::StrFormat("0001:%02x:00.0", j), j < 8 ? 0 : 1, absl::StrCat("eth", j),
          absl::StrFormat("10.0.%d.1", j));
    for (int i = 0; i < 64; ++i) {
      v1::DistanceClass d = i / 4 == j            ? v1::DISTANCE_CLASS_PIX
                            : (i < 32) == (j < 8) ? v1::DISTANCE_CLASS_NODE
                                                  : v1::DISTANCE_CLASS_SYS;
      b.Distance(gpu(i), name, d);
    }
  }
  return b;
}

TEST(PlaceTest, LargeHostUsesTheSearch) {
  ModelBuilder b = SixtyFourGpus();
  const v1::Host& host = b.Build();
  std::vector<std::string> all;
  for (const v1::Accelerator& a : host.accelerators()) all.push_back(a.pci_address());

  // C(64, 2) = 2016: exhaustive. Best: two GPUs on different NICs of node 0.
  absl::StatusOr<v1::PlaceResponse> r = PlaceOn(host, Request(2));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->notes(), IsEmpty());
  EXPECT_THAT(Gpus(r->placements(0)), ElementsAre(all[0], all[4]));

  // C(64, 3) = 41664: the search. Three GPUs on three NICs, nothing shared.
  r = PlaceOn(host, Request(3));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->notes(), ElementsAre(HasSubstr("beam search")));
  ASSERT_THAT(r->placements(), SizeIs(5));
  EXPECT_THAT(Gpus(r->placements(0)), ElementsAre(all[0], all[4], all[8]));
  EXPECT_EQ(r->placements(0).shared_ports(), 0u);
  EXPECT_EQ(r->placements(0).distance_sum(), 3u);

  // 32 of 64: all of node 0 is the only one-node set of PIX GPUs (8 NICs for 32 GPUs: 24
  // share).
  r = PlaceOn(host, Request(32));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->notes(), ElementsAre(HasSubstr("beam search")));
  ASSERT_THAT(r->placements(), SizeIs(5));
  EXPECT_THAT(Gpus(r->placements(0)), ElementsAreArray(all.begin(), all.begin() + 32));
  EXPECT_EQ(r->placements(0).worst_distance(), v1::DISTANCE_CLASS_PIX);
  EXPECT_EQ(r->placements(0).numa_nodes(), 1u);
  EXPECT_EQ(r->placements(0).shared_ports(), 24u);

  // With one_nic_per_gpu and one node: 8 GPUs, one per NIC of a node.
  v1::PlaceRequest req = Request(8);
  req.set_one_nic_per_gpu(true);
  req.set_same_numa_node(true);
  r = PlaceOn(host, req);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_FALSE(r->placements().empty());
  EXPECT_THAT(Gpus(r->placements(0)),
              ElementsAre(all[0], all[4], all[8], all[12], all[16], all[20], all[24], all[28]));
  for (const v1::Placement& p : r->placements()) {
    EXPECT_EQ(p.shared_ports(), 0u);
    EXPECT_EQ(p.numa_nodes(), 1u);
    EXPECT_EQ(p.worst_distance(), v1::DISTANCE_CLASS_PIX);
  }

  // Nine on one node with a NIC each cannot be.
  req.set_gpu_count(9);
  r = PlaceOn(host, req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->placements(), IsEmpty());
  EXPECT_THAT(r->notes(), Contains(HasSubstr("no set of 9 GPUs")));
}

}  // namespace
}  // namespace fabric
