#include "agent/launch/job_scope.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fabric::launch {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

GetEnv From(const std::map<std::string, std::string>& vars) {
  return [vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

std::vector<std::string> Gpus(const v1::SelectNicsRequest& r) {
  return {r.gpus().begin(), r.gpus().end()};
}

TEST(JobScopeTest, WhereTheScopeAndRankComeFrom) {
  struct Case {
    const char* what;
    std::map<std::string, std::string> env;
    std::vector<std::string> gpus;  // Named GPUs; empty: visible or all (below).
    bool visible;
    bool all;
    std::string rank_gpu;
    int rank_position;  // -1: none.
  };
  const Case cases[] = {
      {"bare host: every GPU, no rank", {}, {}, false, true, "", -1},
      {"torchrun on a bare host", {{"LOCAL_RANK", "3"}}, {}, false, true, "", 3},
      {"container's GPUs, local rank",
       {{"NVIDIA_VISIBLE_DEVICES", "GPU-a,GPU-b"}, {"LOCAL_RANK", "1"}},
       {},
       true,
       false,
       "",
       1},
      {"one visible GPU is the rank's", {{"CUDA_VISIBLE_DEVICES", "5"}}, {}, true, false, "", 0},
      {"Slurm: the step's GPUs, the task's bound one",
       {{"SLURM_STEP_GPUS", "0,1"}, {"CUDA_VISIBLE_DEVICES", "1"}, {"SLURM_LOCALID", "0"}},
       {"0", "1"},
       false,
       false,
       "1",
       -1},
      {"SPANK's step scope for NCCL's plugin: the task is bound to one GPU",
       {{"FABRIC_JOB_GPUS", "0,1"},
        {"SLURM_STEP_GPUS", "1"},
        {"CUDA_VISIBLE_DEVICES", "1"},
        {"SLURM_LOCALID", "1"}},
       {"0", "1"},
       false,
       false,
       "1",
       -1},
      {"Slurm job GPUs with ranges",
       {{"SLURM_JOB_GPUS", "0-2,5"}, {"SLURM_LOCALID", "2"}},
       {"0", "1", "2", "5"},
       false,
       false,
       "",
       2},
      {"Slurm, all GPUs per task: local rank",
       {{"SLURM_STEP_GPUS", "2,3"}, {"CUDA_VISIBLE_DEVICES", "2,3"}, {"SLURM_LOCALID", "1"}},
       {"2", "3"},
       false,
       false,
       "",
       1},
      {"Open MPI",
       {{"CUDA_VISIBLE_DEVICES", "0,1"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}},
       {},
       true,
       false,
       "",
       1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    auto r = ReadJobRequest("job", "auto", "default", From(c.env));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(Gpus(r->req), c.gpus);
    EXPECT_EQ(r->req.has_visible(), c.visible);
    EXPECT_EQ(r->req.all(), c.all);
    EXPECT_EQ(r->req.rank_gpu(), c.rank_gpu);
    if (c.rank_position < 0) {
      EXPECT_NE(r->req.rank_case(), v1::SelectNicsRequest::kRankPosition);
    } else {
      EXPECT_EQ(r->req.rank_position(), static_cast<uint32_t>(c.rank_position));
    }
    EXPECT_FALSE(r->req.include_rejected());
  }
}

TEST(JobScopeTest, ExplicitScopeRankAndConsumers) {
  auto r = ReadJobRequest("0,3", "3", "+vllm", From({{"LOCAL_RANK", "0"}}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(Gpus(r->req), ElementsAre("0", "3"));
  EXPECT_EQ(r->req.rank_gpu(), "3");
  EXPECT_EQ(r->req.consumers(), "+vllm");
  auto none = ReadJobRequest("all", "none", "", From({{"LOCAL_RANK", "0"}}));
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->req.rank_case(), v1::SelectNicsRequest::RANK_NOT_SET);
}

TEST(JobScopeTest, BadInputIsRefused) {
  for (const char* bad : {"LOCAL_RANK=x", "LOCAL_RANK=-1", "SLURM_STEP_GPUS=0,a",
                          "SLURM_STEP_GPUS=3-1", "SLURM_STEP_GPUS=0-99999"}) {
    std::string s(bad);
    const size_t eq = s.find('=');
    auto r = ReadJobRequest("job", "auto", "", From({{s.substr(0, eq), s.substr(eq + 1)}}));
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(s.substr(0, eq))) << bad;
  }
  // Set but empty names no GPU: it is the scope (the agent refuses it), not "every GPU".
  auto empty = ReadJobRequest("job", "auto", "", From({{"CUDA_VISIBLE_DEVICES", ""}}));
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->req.has_visible());
  EXPECT_FALSE(empty->req.all());
}

// A local rank past the scope and a scope past the selection's bound are bad requests
// (InvalidArgument: fabricctl's and fabric-env's exit 2) however the scope was found: known here
// (visible devices, Slurm, named GPUs) they are refused before anyone is asked.
TEST(JobScopeTest, OutOfBoundScopeAndRankAreRefused) {
  std::string gpus65;
  for (int i = 0; i < 65; ++i) absl::StrAppend(&gpus65, i == 0 ? "" : ",", i);
  struct Case {
    const char* what;
    std::string gpus;
    std::map<std::string, std::string> env;
    const char* message;
  };
  const Case cases[] = {
      {"rank past the visible GPUs",
       "job",
       {{"CUDA_VISIBLE_DEVICES", "0,1,2,3,4,5,6,7"}, {"LOCAL_RANK", "8"}},
       "LOCAL_RANK=8: rank position 8 is outside the job's 8 GPUs"},
      {"rank past Slurm's GPUs",
       "job",
       {{"SLURM_STEP_GPUS", "0,1"}, {"SLURM_LOCALID", "2"}},
       "SLURM_LOCALID=2: rank position 2 is outside the job's 2 GPUs"},
      {"rank past named GPUs", "0,1", {{"LOCAL_RANK", "2"}}, "outside the job's 2 GPUs"},
      {"65 named GPUs", gpus65, {}, "--gpus names 65 GPUs; at most 64 per request"},
      {"65 visible GPUs",
       "job",
       {{"CUDA_VISIBLE_DEVICES", gpus65}},
       "the job names 65 GPUs; at most 64 per request"},
      {"65 Slurm GPUs",
       "job",
       {{"SLURM_STEP_GPUS", "0-64"}},
       "the job names 65 GPUs; at most 64 per request"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    auto r = ReadJobRequest(c.gpus, "auto", "default", From(c.env));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.message));
  }
  // At the bounds: the last position and 64 GPUs are asked.
  auto last = ReadJobRequest("job", "auto", "default",
                             From({{"CUDA_VISIBLE_DEVICES", "0,1"}, {"LOCAL_RANK", "1"}}));
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(last->req.rank_position(), 1u);
  EXPECT_TRUE(ReadJobRequest("job", "none", "default", From({{"SLURM_STEP_GPUS", "0-63"}})).ok());
}

TEST(JobScopeTest, ExpandIndexList) {
  EXPECT_THAT(*ExpandIndexList("0"), ElementsAre("0"));
  EXPECT_THAT(*ExpandIndexList("1,4-6"), ElementsAre("1", "4", "5", "6"));
  for (const char* bad : {"", ",", "1,", "a", "-1", "2-", "5-3", "0-5000"}) {
    EXPECT_FALSE(ExpandIndexList(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace fabric::launch
