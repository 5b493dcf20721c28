#include "agent/policy/doctor/rank_envs.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace fabric::doctor {
namespace {

DoctorFacts WithGpus(int n) {
  DoctorFacts f;
  for (int i = 0; i < n; ++i) f.gpus.push_back(absl::StrCat("0000:", 10 + i, ":00.0"));
  return f;
}

TEST(AddRankEnvs, OneGpuHasNoRanksToCompare) {
  DoctorFacts f = WithGpus(1);
  int asked = 0;
  auto ask = [&](const std::string&) -> absl::StatusOr<std::map<std::string, std::string>> {
    ++asked;
    return std::map<std::string, std::string>{};
  };
  ASSERT_TRUE(AddRankEnvs(ask, nullptr, &f).ok());
  EXPECT_EQ(asked, 0);
  EXPECT_TRUE(f.rank_envs.empty());
}

TEST(AddRankEnvs, AsksTheFirstRanksUpToTheBoundAndLeavesOutThoseWithoutAnAnswer) {
  DoctorFacts f = WithGpus(kMaxRanks + 4);
  std::vector<std::string> asked;
  auto ask = [&](const std::string& gpu) -> absl::StatusOr<std::map<std::string, std::string>> {
    asked.push_back(gpu);
    if (asked.size() == 2) return absl::UnavailableError("no answer");
    return std::map<std::string, std::string>{{"NCCL_IB_HCA", "=mlx5_" + gpu.substr(5, 2)}};
  };
  ASSERT_TRUE(AddRankEnvs(ask, nullptr, &f).ok());
  ASSERT_EQ(asked.size(), kMaxRanks);
  EXPECT_EQ(asked.front(), f.gpus.front());
  EXPECT_EQ(asked.back(), f.gpus[kMaxRanks - 1]);
  EXPECT_EQ(f.rank_envs.size(), kMaxRanks - 1);
  EXPECT_FALSE(f.rank_envs.count(f.gpus[1]));
  EXPECT_EQ(f.rank_envs.at(f.gpus[0]).at("NCCL_IB_HCA"), "=mlx5_10");
}

TEST(AddRankEnvs, StopsWhenTheClientGaveUp) {
  DoctorFacts f = WithGpus(8);
  int asked = 0;
  auto ask = [&](const std::string&) -> absl::StatusOr<std::map<std::string, std::string>> {
    ++asked;
    return std::map<std::string, std::string>{};
  };
  absl::Status s = AddRankEnvs(
      ask, [&] { return asked == 3; }, &f);
  EXPECT_TRUE(absl::IsCancelled(s)) << s;
  EXPECT_EQ(asked, 3);
  EXPECT_EQ(s.message(), JudgementCancelled().message());
}

}  // namespace
}  // namespace fabric::doctor
