// fabricctl exec and env --gpus=job as launchers run them: real processes, a clean environment
// (env -i) holding only what a launcher would set, example hosts discovered with --sysfs.
#include <gmock/gmock.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "fabric/v1/agent.pb.h"
#include "fabric/v1/select.pb.h"
#include "tests/hosts/hosts.h"
#include "tests/testing/binaries.h"
#include "tests/testing/subprocess.h"

namespace fabric {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::RunResult;

class ExecTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("fabricctl_exec");
    ASSERT_FALSE(dir_.empty());
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // The --sysfs/--procfs flags of example host `name`, written once.
  std::vector<std::string> Host(const std::string& name) {
    const std::string root = dir_ + "/" + name;
    if (!fs::exists(root)) {
      EXPECT_TRUE(testing::WriteExampleHost(name, root).ok());
    }
    return {"--sysfs=" + root + "/sys", "--procfs=" + root + "/proc"};
  }

  // fabricctl ARGS... in an environment holding only PATH and `env`.
  RunResult Ctl(const std::vector<std::string>& env, const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"/usr/bin/env", "-i", "PATH=/usr/bin:/bin"};
    argv.insert(argv.end(), env.begin(), env.end());
    argv.push_back(testing::kFabricctlBinary);
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = testing::Run(argv, absl::Seconds(30));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : RunResult{};
  }

  // exec on `host` with the launcher's `env`: the command's NAME=VALUE lines.
  std::map<std::string, std::string> ExecEnv(const std::string& host,
                                             const std::vector<std::string>& env) {
    std::vector<std::string> args = {"exec"};
    for (std::string& f : Host(host)) args.push_back(std::move(f));
    // Through two shells: what a child of a child sees.
    for (const char* w : {"--", "sh", "-c", "sh -c env"}) args.push_back(w);
    RunResult r = Ctl(env, args);
    EXPECT_EQ(r.status, 0) << r.err;
    std::map<std::string, std::string> vars;
    for (absl::string_view line : absl::StrSplit(r.out, '\n', absl::SkipEmpty())) {
      std::pair<std::string, std::string> kv = absl::StrSplit(line, absl::MaxSplits('=', 1));
      vars[kv.first] = kv.second;
    }
    return vars;
  }

  std::string dir_;
};

v1::Selection ParseSelection(const RunResult& r) {
  v1::Selection sel;
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(r.out, &sel).ok()) << r.out;
  return sel;
}

TEST_F(ExecTest, ShellsAndChildrenSeeTheJobEnvironmentAndTheCallersSettingsWin) {
  auto vars = ExecEnv("roce-9port", {"CUDA_VISIBLE_DEVICES=0,1,2,3", "LOCAL_RANK=2",
                                     "NCCL_IB_GID_INDEX=7", "UCX_IB_GID_INDEX="});
  EXPECT_EQ(vars["NCCL_IB_HCA"], "=mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1");
  EXPECT_EQ(vars["NCCL_IB_GID_INDEX"], "7");  // The caller's.
  EXPECT_EQ(vars["UCX_IB_GID_INDEX"], "");    // The caller's, though empty.
  EXPECT_EQ(vars["NVSHMEM_IB_GID_INDEX"], "3");
  // Rank 2's own GPU is the third visible one: GPU 2, whose port `select` gives.
  const std::vector<std::string> host = Host("roce-9port");
  RunResult sel = Ctl({}, {"select", "--gpus=2", "--json", host[0], host[1]});
  v1::Selection s = ParseSelection(sel);
  ASSERT_EQ(s.assignments_size(), 1);
  const std::string port =
      absl::StrCat(s.assignments(0).rdma_device(), ":", s.assignments(0).port());
  EXPECT_EQ(vars["UCX_NET_DEVICES"], port);
  EXPECT_EQ(vars["NVSHMEM_HCA_LIST"], port);
}

TEST_F(ExecTest, TheExitStatusSignalsAndProcessAreTheCommands) {
  std::vector<std::string> host = Host("roce-9port");
  auto exec = [&](const std::string& script) {
    std::vector<std::string> args = {"exec", host[0], host[1], "--", "sh", "-c", script};
    return Ctl({}, args);
  };
  EXPECT_EQ(exec("exit 7").status, 7);
  EXPECT_EQ(exec("kill -TERM $$").status, 128 + 15);  // Killed by the signal: sh is fabricctl.
  // execve, not fork: the command is the very process started (env -i and fabricctl exec'd too).
  auto p = testing::Subprocess::Start({"/usr/bin/env", "-i", "PATH=/usr/bin:/bin",
                                       testing::kFabricctlBinary, "exec", host[0], host[1], "--",
                                       "sh", "-c", "echo $$"});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ((*p)->Wait(absl::Seconds(30)), 0);
  EXPECT_EQ((*p)->Stdout(), absl::StrCat((*p)->pid(), "\n"));
}

TEST_F(ExecTest, WordsAfterTheSeparatorAreTheCommandsWhateverTheyLookLike) {
  std::vector<std::string> host = Host("roce-9port");
  RunResult r = Ctl({}, {"exec", host[0], host[1], "--", "printf", "%s|", "--gpus=1", "-x", "--",
                         "", "--timeout="});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "--gpus=1|-x|--||--timeout=|");
}

TEST_F(ExecTest, ErrorsBeforeTheCommandExitTwoWithOneLine) {
  std::vector<std::string> host = Host("roce-9port");
  struct Case {
    std::vector<std::string> env;
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{}, {"exec", host[0], host[1]}, "no command"},
      {{}, {"exec", host[0], host[1], "--", "/nonexistent/cmd"}, "cannot run"},
      {{"CUDA_VISIBLE_DEVICES=42"}, {"exec", host[0], host[1], "--", "true"}, "42"},
      {{"CUDA_VISIBLE_DEVICES="}, {"exec", host[0], host[1], "--", "true"}, "empty"},
      {{"LOCAL_RANK=two"}, {"exec", host[0], host[1], "--", "true"}, "LOCAL_RANK"},
      {{}, {"exec", "--consumers=mpi", host[0], host[1], "--", "true"}, "mpi"},
      {{},
       {"exec", "--target=unix://" + dir_ + "/none.sock", "--fallback-sysfs=" + dir_ + "/no", "--",
        "true"},
       "nor did discovery"},
  };
  for (const Case& c : cases) {
    RunResult r = Ctl(c.env, c.args);
    EXPECT_EQ(r.status, 2) << c.says << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr(c.says));
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
  // --best-effort runs the command anyway, after the line saying why.
  RunResult r = Ctl({"CUDA_VISIBLE_DEVICES=42"},
                    {"exec", "--best-effort", host[0], host[1], "--", "sh", "-c", "echo ran"});
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.out, "ran\n");
  EXPECT_THAT(r.err, HasSubstr("without fabric settings"));
}

TEST_F(ExecTest, DryRunSaysWhatAndWhy) {
  std::vector<std::string> host = Host("roce-9port");
  RunResult r = Ctl({"SLURM_STEP_GPUS=0,1", "CUDA_VISIBLE_DEVICES=1", "NCCL_IB_HCA=mine"},
                    {"exec", "--dry-run", host[0], host[1], "--", "python", "train.py"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("# would run: python train.py\n"));
  EXPECT_THAT(r.out, HasSubstr("# job scope: SLURM_STEP_GPUS=0,1\n"));
  EXPECT_THAT(r.out, HasSubstr("# rank GPU: CUDA_VISIBLE_DEVICES=1\n"));
  EXPECT_THAT(r.out, HasSubstr("# kept as you set it: NCCL_IB_HCA\n"));
  EXPECT_THAT(r.out, HasSubstr("UCX_NET_DEVICES=mlx5_2:1\n"));
}

// Every example host, a whole-host job, one process per GPU: the NCCL lines are the same bytes
// for every rank, and each rank's pin is its GPU's port in the host-wide pairing.
TEST_F(ExecTest, EveryRankOfAWholeHostJobGetsTheSameNcclLinesAndItsPairedPort) {
  int hosts_checked = 0;
  for (const std::string& name : testing::ExampleHostNames()) {
    SCOPED_TRACE(name);
    std::vector<std::string> host = Host(name);
    RunResult topo = Ctl({}, {"topo", "--json", host[0], host[1]});
    v1::Host model;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(topo.out, &model).ok()) << topo.out;
    RunResult all = Ctl({}, {"select", "--gpus=all", "--json", host[0], host[1]});
    if (all.status != 0) continue;  // No GPU or no usable port (broken hosts): nothing to hand out.
    v1::Selection sel = ParseSelection(all);
    std::map<std::string, std::string> paired;
    for (const v1::GpuPair& p : model.pairing().pairs()) {
      paired[p.gpu()] = absl::StrCat(p.rdma_device(), ":", p.port());
    }
    std::string nccl0;
    for (int k = 0; k < sel.assignments_size(); ++k) {
      RunResult r = Ctl({absl::StrCat("LOCAL_RANK=", k)},
                        {"env", "--gpus=job", "--rank-gpu=auto", host[0], host[1]});
      ASSERT_EQ(r.status, 0) << r.err;
      std::string nccl, ucx;
      for (absl::string_view line : absl::StrSplit(r.out, '\n', absl::SkipEmpty())) {
        if (absl::StartsWith(line, "NCCL_")) absl::StrAppend(&nccl, line, "\n");
        if (absl::StartsWith(line, "UCX_NET_DEVICES=")) ucx = std::string(line.substr(16));
      }
      if (k == 0) nccl0 = nccl;
      EXPECT_EQ(nccl, nccl0) << "rank " << k;
      if (absl::StrContains(r.out, "UCC_CL_BASIC_TLS=ucp")) {
        EXPECT_EQ(nccl, "") << "NVIDIA and AMD GPUs: no NCCL line (UCC over UCX)";
      } else {
        EXPECT_THAT(nccl, HasSubstr("NCCL_IB_HCA="));
      }
      const std::string& gpu = sel.assignments(k).gpu();
      if (paired.contains(gpu)) {
        EXPECT_EQ(ucx, paired[gpu]) << "rank " << k << " " << gpu;
      }
      EXPECT_EQ(ucx,
                absl::StrCat(sel.assignments(k).rdma_device(), ":", sel.assignments(k).port()));
    }
    ++hosts_checked;
  }
  EXPECT_GE(hosts_checked, 6);
}

}  // namespace
}  // namespace fabric
