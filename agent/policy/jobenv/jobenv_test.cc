#include "agent/policy/jobenv/jobenv.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/policy/jobenv/format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fabric::jobenv {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Key;
using ::testing::Not;

// GPU i on mlx5_<i+1> port 1, RoCE v2 IPv4 GID `gid` holding 10.0.<i>.1 in 10.0.<i>.0/24.
Pick Roce(int i, uint32_t gid = 3) {
  Pick p;
  p.gpu = absl::StrCat("0000:", 0x10 + i, ":00.0");
  p.device = absl::StrCat("mlx5_", i + 1);
  p.device_pci = absl::StrCat("0000:", 0x90 + i, ":00.0");
  p.netdev = absl::StrCat("eth", i + 1);
  p.roce = true;
  p.gid_index = gid;
  p.ipv4 = absl::StrCat("10.0.", i, ".1");
  p.ipv4_subnet = absl::StrCat("10.0.", i, ".0/24");
  return p;
}

Request Host(int gpus, uint32_t gid = 3) {
  Request r;
  for (int i = 0; i < gpus; ++i) r.scope.push_back(Roce(i, gid));
  r.default_route_netdevs = {"eth0"};
  return r;
}

Result Must(const Request& r) {
  absl::StatusOr<Result> out = Render(r);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : Result{};
}

TEST(JobEnvTest, EveryRankGetsTheSameJobLinesAndItsOwnPins) {
  Request r = Host(4);
  std::vector<Result> ranks;
  for (size_t k = 0; k < 4; ++k) {
    r.rank = k;
    ranks.push_back(Must(r));
  }
  for (size_t k = 0; k < 4; ++k) {
    EXPECT_EQ(ranks[k].job, ranks[0].job) << "rank " << k;
    EXPECT_EQ(ranks[k].pins.at("UCX_NET_DEVICES"), r.scope[k].Port());
    EXPECT_EQ(ranks[k].pins.at("NVSHMEM_HCA_LIST"), r.scope[k].Port());
    EXPECT_EQ(ranks[k].pins.at("UCCL_P2P_RDMA_DEV"), r.scope[k].device);
    for (const auto& [name, value] : ranks[k].pins) {
      EXPECT_THAT(ranks[k].job, Not(Contains(Key(name)))) << name << " is in both";
    }
  }
  const EnvMap& job = ranks[0].job;
  EXPECT_EQ(job.at("NCCL_IB_HCA"), "=mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1");
  EXPECT_EQ(job.at("NCCL_IB_GID_INDEX"), "3");
  EXPECT_EQ(job.at("NCCL_SOCKET_IFNAME"), "=eth0");
  EXPECT_EQ(job.at("UCX_IB_GID_INDEX"), "3");
  EXPECT_EQ(job.at("NVSHMEM_IB_GID_INDEX"), "3");
  EXPECT_EQ(job.at("MC_GID_INDEX"), "3");
  EXPECT_EQ(job.at("MC_IB_PORT"), "1");
  EXPECT_EQ(job.at("MC_TE_FILTERS"), "mlx5_1,mlx5_2,mlx5_3,mlx5_4");
  EXPECT_EQ(job.at("UCCL_IB_GID_INDEX"), "3");
  EXPECT_EQ(job.at("UCCL_P2P_RDMA_GID_INDEX"), "3");
  EXPECT_EQ(job.at("FABRIC_SGLANG_IB_DEVICE"),
            R"({"0":"mlx5_1","1":"mlx5_2","2":"mlx5_3","3":"mlx5_4"})");
  EXPECT_THAT(job, Not(Contains(Key("UCX_NET_DEVICES"))));
}

TEST(JobEnvTest, NcclLinesDoNotFollowTheScopesOrder) {
  Request r = Host(12);
  Request reversed = r;
  std::reverse(reversed.scope.begin(), reversed.scope.end());
  Result a = Must(r), b = Must(reversed);
  for (const char* name : {"NCCL_IB_HCA", "UCX_NET_DEVICES", "NVSHMEM_HCA_LIST", "MC_TE_FILTERS"}) {
    EXPECT_EQ(a.job.at(name), b.job.at(name)) << name;
  }
  // Natural order and exact names: mlx5_2 before mlx5_10, and "=" so mlx5_1 is not a prefix.
  EXPECT_THAT(a.job.at("NCCL_IB_HCA"), HasSubstr("=mlx5_1:1,mlx5_2:1,"));
  EXPECT_THAT(a.job.at("NCCL_IB_HCA"), HasSubstr(",mlx5_9:1,mlx5_10:1,mlx5_11:1,mlx5_12:1"));
  // SGLang's keys are the scope's CUDA ordinals, so its map follows the order.
  EXPECT_THAT(b.job.at("FABRIC_SGLANG_IB_DEVICE"), HasSubstr(R"("0":"mlx5_12")"));
}

TEST(JobEnvTest, TwoGpusOnOnePortAreOneEntry) {
  Request r = Host(2);
  r.scope[1].device = "mlx5_1";
  r.scope[1].device_pci = r.scope[0].device_pci;
  r.rank = 1;
  Result out = Must(r);
  EXPECT_EQ(out.job.at("NCCL_IB_HCA"), "=mlx5_1:1");
  EXPECT_EQ(out.pins.at("UCX_NET_DEVICES"), "mlx5_1:1");
}

TEST(JobEnvTest, DifferentIndicesGiveNcclsRuleFormAndNoSingleIndexElsewhere) {
  Request r = Host(2);
  r.scope[1].gid_index = 5;
  r.scope[0].ipv4_subnet = r.scope[1].ipv4_subnet = "";
  r.scope[1].ipv4 = "10.0.0.2";
  Result out = Must(r);
  EXPECT_EQ(out.job.at("NCCL_IB_GID_INDEX"), "-1");
  EXPECT_EQ(out.job.at("NCCL_IB_ADDR_FAMILY"), "AF_INET");
  EXPECT_EQ(out.job.at("NCCL_IB_ROCE_VERSION_NUM"), "2");
  EXPECT_EQ(out.job.at("NCCL_IB_ADDR_RANGE"), "10.0.0.0/30");
  EXPECT_EQ(out.job.at("NVSHMEM_IB_GID_INDEX"), "-1");
  EXPECT_EQ(out.job.at("NVSHMEM_IB_ADDR_RANGE"), "10.0.0.0/30");
  EXPECT_EQ(out.job.at("UCCL_IB_ADDR_FAMILY"), "AF_INET");
  for (const char* single : {"UCX_IB_GID_INDEX", "MC_GID_INDEX", "UCCL_P2P_RDMA_GID_INDEX"}) {
    EXPECT_THAT(out.job, Not(Contains(Key(single)))) << single;
  }
  // A range that would also hold another RoCE v2 GID of a port is left out.
  r.scope[0].other_ipv4_gids.push_back({7, "10.0.0.3", true, "RoCE v2 on macvlan0"});
  out = Must(r);
  EXPECT_THAT(out.job, Not(Contains(Key("NCCL_IB_ADDR_RANGE"))));
  EXPECT_EQ(out.job.at("NVSHMEM_IB_ADDR_RANGE"), "0.0.0.0/0");
  EXPECT_THAT(out.notes, Contains(HasSubstr("also holds GID 7 = 10.0.0.3")));
}

TEST(JobEnvTest, InfinibandHasNoGidVariables) {
  Request r = Host(2);
  for (Pick& p : r.scope) {
    p.roce = false;
    p.gid_index.reset();
  }
  Result out = Must(r);
  for (const auto& [name, value] : out.job) {
    EXPECT_THAT(name, Not(HasSubstr("GID_INDEX"))) << name << "=" << value;
  }
  EXPECT_EQ(out.job.at("NCCL_IB_HCA"), "=mlx5_1:1,mlx5_2:1");
}

TEST(JobEnvTest, ConsumersSelectTheirVariables) {
  Request r = Host(2);
  r.consumers = *ParseConsumers("nccl");
  r.rank = 0;
  Result out = Must(r);
  for (const auto& [name, value] : out.job) EXPECT_EQ(name.rfind("NCCL_", 0), 0u) << name;
  EXPECT_TRUE(out.pins.empty());

  r.consumers = *ParseConsumers("+vllm");
  out = Must(r);
  EXPECT_EQ(out.job.at("VLLM_GPU_NIC_PCIE_MAPPING"), "0000:16:00.0=0000:144:00.0,0000:17:00.0=0000:145:00.0");
  EXPECT_EQ(out.job.at("VLLM_NIC_SELECTION_VARS"), "UCX_NET_DEVICES:1,NVSHMEM_HCA_LIST:1");
  // vLLM prepends to what it pins: those are left to it.
  EXPECT_THAT(out.pins, Not(Contains(Key("UCX_NET_DEVICES"))));
  EXPECT_THAT(out.job, Not(Contains(Key("UCX_NET_DEVICES"))));
}

TEST(JobEnvTest, ParseConsumers) {
  EXPECT_EQ(*ParseConsumers(""), Consumers{});
  EXPECT_EQ(*ParseConsumers("default"), Consumers{});
  EXPECT_TRUE(ParseConsumers("all")->vllm);
  Consumers only = *ParseConsumers("ucx,nccl");
  EXPECT_EQ(ConsumersText(only), "nccl,ucx");
  Consumers changed = *ParseConsumers("+vllm,-uccl");
  EXPECT_TRUE(changed.vllm);
  EXPECT_FALSE(changed.uccl);
  EXPECT_TRUE(changed.nccl);
  EXPECT_EQ(*ParseConsumers(ConsumersText(changed)), changed);
  for (const char* bad : {"nccl,+vllm", "+vllm,uccl", "mpi", "nccl,", ",", "+"}) {
    EXPECT_FALSE(ParseConsumers(bad).ok()) << bad;
  }
}

TEST(JobEnvTest, StaticEnvWinsOverJobAndPins) {
  Request r = Host(2);
  r.rank = 1;
  r.static_env = {{"NCCL_IB_GID_INDEX", "5"}, {"UCX_NET_DEVICES", "all"}, {"NCCL_IB_QPS", "4"}};
  Result out = Must(r);
  EXPECT_EQ(out.job.at("NCCL_IB_GID_INDEX"), "5");
  EXPECT_EQ(out.job.at("UCX_NET_DEVICES"), "all");
  EXPECT_EQ(out.job.at("NCCL_IB_QPS"), "4");
  EXPECT_THAT(out.pins, Not(Contains(Key("UCX_NET_DEVICES"))));
  EXPECT_EQ(out.Merged().at("UCX_NET_DEVICES"), "all");
}

TEST(JobEnvTest, SubsetInvariantNamesNoDevice) {
  Request r = Host(3);
  EnvMap whole = Must(r).job;
  EnvMap invariant = SubsetInvariant(whole);
  for (size_t k = 0; k < 3; ++k) {
    Request one = r;
    one.scope = {r.scope[k]};
    EnvMap part = Must(one).job;
    for (const auto& [name, value] : invariant) EXPECT_EQ(part.at(name), value) << name;
  }
  for (const auto& [name, value] : invariant) {
    EXPECT_THAT(value, Not(HasSubstr("mlx5_"))) << name;
  }
}

TEST(JobEnvTest, Errors) {
  EXPECT_FALSE(Render(Request{}).ok());
  Request r = Host(2);
  r.rank = 2;
  EXPECT_FALSE(Render(r).ok());
  r.rank.reset();
  r.scope[0].device.clear();
  EXPECT_FALSE(Render(r).ok());
}

TEST(FormatTest, NulRecordsAndUserWins) {
  EnvMap env = {{"A", "x y"}, {"B", ""}, {"bad name", "1"}, {"C", std::string("a\0b", 3)}};
  EXPECT_EQ(FormatNul(env), std::string("A=x y\0B=\0", 9));
  auto getenv = [](const char* name) -> const char* {
    return std::string(name) == "B" ? "" : nullptr;
  };
  EnvMap kept = DropAlreadySet({{"A", "1"}, {"B", "2"}}, getenv);
  EXPECT_EQ(kept, (EnvMap{{"A", "1"}}));
}

}  // namespace
}  // namespace fabric::jobenv
