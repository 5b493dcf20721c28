// libnccl-env-fabric.so loaded as NCCL loads it (dlopen, the versioned struct), on every example
// host's published host and for several ranks: every variable fabric-env would give the process
// is getEnv's answer, a variable the process has is its own, others are NULL; no published host,
// a corrupt one, no fabric-env: getenv's answers and one line on stderr; 64 threads at once. And
// what lets it load in any container: the libc versions it needs and the symbols it shows.
#include <dlfcn.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/ncclenv/nccl_env_api.h"
#include "agent/publish/hostfile/host_file.h"
#include "tests/hosts/discovered.h"
#include "tests/hosts/hosts.h"
#include "tests/testing/binaries.h"
#include "tests/testing/subprocess.h"

namespace fabric {
namespace {

// The launchers' variables fabric-env reads: none may leak in from the test's own environment.
constexpr const char* kLauncherVars[] = {
    "LOCAL_RANK",           "SLURM_LOCALID",          "OMPI_COMM_WORLD_LOCAL_RANK",
    "MPI_LOCALRANKID",      "PMI_LOCAL_RANK",         "SLURM_STEP_GPUS",
    "SLURM_JOB_GPUS",       "CUDA_VISIBLE_DEVICES",   "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL",
    "FABRIC_RDMA_DEVICES"};

class PluginTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    lib_ = dlopen(FABRIC_NCCL_ENV_PLUGIN, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(lib_, nullptr) << dlerror();
    v1_ = static_cast<const ncclEnv_v1_t*>(dlsym(lib_, "ncclEnvPlugin_v1"));
    v2_ = static_cast<const ncclEnv_v2_t*>(dlsym(lib_, "ncclEnvPlugin_v2"));
    ASSERT_NE(v1_, nullptr);
    ASSERT_NE(v2_, nullptr);
  }
  void SetUp() override {
    dir_ = testing::MakeTempDir("nccl-env");
    for (const char* v : kLauncherVars) unsetenv(v);
    for (const char* v :
         {"NCCL_IB_HCA", "NCCL_SOCKET_IFNAME", "FABRIC_ENV_BIN", "FABRIC_HOST_FILE"}) {
      unsetenv(v);
    }
    setenv("FABRIC_ENV_BIN", testing::kFabricEnvBinary, 1);
  }
  void TearDown() override { v1_->finalize(); }

  // The published host of example host `name`, as the agent writes it.
  std::string Publish(const std::string& name, const v1::SelectionPolicy& policy = {}) {
    const std::string path = absl::StrCat(dir_, "/", name, ".pb");
    std::ofstream(path) << hostfile::HostFileBytes(testing::DiscoveredExampleHost(name), policy,
                                                   hostfile::OwnNetnsInode());
    return path;
  }

  // What `fabric-env env` gives this process (the reference): NAME -> VALUE.
  std::map<std::string, std::string> FabricEnvAnswer(const std::string& host_file) {
    // The version Init's NCCL says it is.
    auto r =
        testing::Run({testing::kFabricEnvBinary, "--host-file=" + host_file, "env", "--gpus=job",
                      "--rank-gpu=auto", "--format=nul", "--nccl-version=2.30.7"});
    EXPECT_TRUE(r.ok()) << r.status();
    std::map<std::string, std::string> out;
    if (!r.ok() || r->status != 0) return out;
    for (absl::string_view rec : absl::StrSplit(r->out, '\0', absl::SkipEmpty())) {
      const size_t eq = rec.find('=');
      out.emplace(std::string(rec.substr(0, eq)), std::string(rec.substr(eq + 1)));
    }
    return out;
  }

  // Runs init with stderr captured; returns what it printed.
  static std::string Init(bool v2 = false) {
    char path[] = "/tmp/nccl-env-stderr.XXXXXX";
    const int fd = mkstemp(path);
    const int saved = dup(STDERR_FILENO);
    dup2(fd, STDERR_FILENO);
    const int rc = v2 ? v2_->init(2, 30, 7, "", nullptr) : v1_->init(2, 30, 7, "");
    dup2(saved, STDERR_FILENO);
    close(saved);
    EXPECT_EQ(rc, FABRIC_NCCL_SUCCESS);  // NCCL never falls back: the plugin is getenv then.
    std::ifstream in(path);
    std::string text((std::istreambuf_iterator<char>(in)), {});
    close(fd);
    unlink(path);
    return text;
  }

  static std::string Get(const char* name) {
    const char* v = v1_->getEnv(name);
    return v == nullptr ? "<null>" : v;
  }

  static inline void* lib_ = nullptr;
  static inline const ncclEnv_v1_t* v1_ = nullptr;
  static inline const ncclEnv_v2_t* v2_ = nullptr;
  std::string dir_;
};

TEST_F(PluginTest, LoadsAsNcclDoes) {
  EXPECT_STREQ(v1_->name, "fabric");
  EXPECT_STREQ(v2_->name, "fabric");
  // v2 is v1 with NCCL's logger: the same functions behind it.
  EXPECT_EQ(v1_->getEnv, v2_->getEnv);
  EXPECT_EQ(v1_->finalize, v2_->finalize);
}

TEST_F(PluginTest, EveryExampleHostAndRankAnswersAsFabricEnv) {
  size_t answered = 0, variables = 0;
  for (const std::string& name : testing::ExampleHostNames()) {
    const std::string host_file = Publish(name);
    setenv("FABRIC_HOST_FILE", host_file.c_str(), 1);
    for (const char* rank : {"", "0", "1", "3"}) {
      if (*rank) {
        setenv("LOCAL_RANK", rank, 1);
      } else {
        unsetenv("LOCAL_RANK");
      }
      const std::map<std::string, std::string> want = FabricEnvAnswer(host_file);
      const std::string said = Init(/*v2=*/*rank == '1');
      for (const auto& [k, v] : want) {
        EXPECT_EQ(Get(k.c_str()), v) << name << " rank '" << rank << "' " << k;
      }
      if (!want.empty()) {
        EXPECT_EQ(said, "") << name;
        ++answered;
        variables += want.size();
      } else {
        EXPECT_NE(said.find("fabric NCCL env plugin: no job environment"), std::string::npos)
            << name << ": " << said;
      }
      EXPECT_EQ(Get("FABRIC_NO_SUCH_VARIABLE"), "<null>");
      EXPECT_EQ(Get("PATH"), std::getenv("PATH"));  // not ours: the real environment's
      v1_->finalize();
    }
  }
  unsetenv("LOCAL_RANK");
  EXPECT_GE(answered, 24u);  // The hosts with RDMA ports answer, and each rank of them.
  EXPECT_GT(variables, 200u);
}

// The NCCL that loads the plugin says its version at init: 2.30.7 reads rails in NCCL_IB_HCA,
// 2.28.7 does not (nor does it sort by PCI path, so the list is in name order).
TEST_F(PluginTest, TheRailsFollowTheVersionNcclGives) {
  v1::SelectionPolicy policy;
  for (const char* dev :
       {"mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"}) {
    v1::Rail* r = policy.add_rails();
    r->set_name(absl::StrCat("rail-", policy.rails_size() - 1));
    r->set_switch_pattern(absl::StrCat("leaf-", policy.rails_size() - 1, "-*"));
    r->add_ports(dev);
  }
  setenv("FABRIC_HOST_FILE", Publish("dgx-h100-ib", policy).c_str(), 1);
  EXPECT_EQ(v1_->init(2, 30, 7, ""), FABRIC_NCCL_SUCCESS);
  EXPECT_THAT(Get("NCCL_IB_HCA"), ::testing::StartsWith("=mlx5_0:1:0,mlx5_3:1:1,"));
  v1_->finalize();
  EXPECT_EQ(v1_->init(2, 28, 7, ""), FABRIC_NCCL_SUCCESS);
  EXPECT_EQ(Get("NCCL_IB_HCA"),
            "=mlx5_0:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_9:1,mlx5_10:1,"
            "mlx5_11:1");
  v1_->finalize();
}

TEST_F(PluginTest, TheUsersVariablesAreTheirs) {
  const std::string host_file = Publish("dgx-h100-ib");
  setenv("FABRIC_HOST_FILE", host_file.c_str(), 1);
  setenv("LOCAL_RANK", "2", 1);
  const std::map<std::string, std::string> want = FabricEnvAnswer(host_file);
  ASSERT_TRUE(want.contains("NCCL_IB_HCA"));
  setenv("NCCL_IB_HCA", "=mine", 1);
  setenv("NCCL_SOCKET_IFNAME", "", 1);  // Set empty is set.
  EXPECT_EQ(Init(), "");
  EXPECT_EQ(v1_->getEnv("NCCL_IB_HCA"), std::getenv("NCCL_IB_HCA"));  // the very pointer
  EXPECT_EQ(Get("NCCL_IB_HCA"), "=mine");
  EXPECT_EQ(Get("NCCL_SOCKET_IFNAME"), "");
  // Unset again: the plugin's answer.
  unsetenv("NCCL_IB_HCA");
  EXPECT_EQ(Get("NCCL_IB_HCA"), want.at("NCCL_IB_HCA"));
  unsetenv("NCCL_SOCKET_IFNAME");
  unsetenv("LOCAL_RANK");
}

TEST_F(PluginTest, NoAnswerIsGetenvAfterOneLine) {
  const std::string corrupt = dir_ + "/corrupt.pb";
  std::ofstream(corrupt) << "not a published host";
  const struct {
    const char* host_file;
    const char* bin;
    const char* said;
  } cases[] = {
      {"/nonexistent/host.pb", nullptr, "no job environment"},
      {nullptr, nullptr, "no job environment"},  // the corrupt file
      {"/nonexistent/host.pb", "/nonexistent/fabric-env", "FABRIC_ENV_BIN=/nonexistent"},
      {"/nonexistent/host.pb", "/bin/false", "exited with 1"},
  };
  for (const auto& c : cases) {
    setenv("FABRIC_HOST_FILE", c.host_file != nullptr ? c.host_file : corrupt.c_str(), 1);
    setenv("FABRIC_ENV_BIN", c.bin != nullptr ? c.bin : testing::kFabricEnvBinary, 1);
    const std::string said = Init();
    EXPECT_NE(said.find(c.said), std::string::npos) << said;
    EXPECT_EQ(std::count(said.begin(), said.end(), '\n'), 1) << said;
    EXPECT_EQ(Get("NCCL_IB_HCA"), "<null>");
    EXPECT_EQ(Get("PATH"), std::getenv("PATH"));
    v1_->finalize();
  }
}

TEST_F(PluginTest, SixtyFourThreadsAtOnce) {
  const std::string host_file = Publish("dgx-h100-ib");
  setenv("FABRIC_HOST_FILE", host_file.c_str(), 1);
  const std::map<std::string, std::string> want = FabricEnvAnswer(host_file);
  ASSERT_GT(want.size(), 5u);
  ASSERT_EQ(Init(), "");
  std::atomic<size_t> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 64; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        for (const auto& [k, v] : want) {
          const char* got = v1_->getEnv(k.c_str());
          if (got == nullptr || v != got) wrong.fetch_add(1);
        }
        if (v1_->getEnv("FABRIC_NO_SUCH_VARIABLE") != nullptr) wrong.fetch_add(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0u);
}

// What the library asks of the system it is loaded into: glibc 2.17's symbols at most (no C++
// runtime, no libdl), and it shows nothing but NCCL's two structs.
TEST_F(PluginTest, LoadsInAnyContainer) {
  auto needed = testing::Run({"/usr/bin/objdump", "-p", FABRIC_NCCL_ENV_PLUGIN});
  ASSERT_TRUE(needed.ok() && needed->status == 0);
  std::vector<std::string> libs;
  for (absl::string_view line : absl::StrSplit(needed->out, '\n')) {
    if (absl::StrContains(line, "NEEDED")) libs.emplace_back(absl::StripAsciiWhitespace(line));
  }
  EXPECT_EQ(libs, std::vector<std::string>{"NEEDED               libc.so.6"});
  auto dynsym = testing::Run({"/usr/bin/objdump", "-T", FABRIC_NCCL_ENV_PLUGIN});
  ASSERT_TRUE(dynsym.ok() && dynsym->status == 0);
  const std::regex glibc(R"(GLIBC_2\.(\d+))");
  int newest = 0;
  std::vector<std::string> exported;
  for (absl::string_view line : absl::StrSplit(dynsym->out, '\n')) {
    std::match_results<absl::string_view::const_iterator> m;
    if (std::regex_search(line.begin(), line.end(), m, glibc)) {
      newest = std::max(newest, std::stoi(m[1].str()));
    }
    if (absl::StrContains(line, ".data.rel.ro") || absl::StrContains(line, ".text")) {
      exported.emplace_back(line.substr(line.rfind(' ') + 1));
    }
  }
  EXPECT_LE(newest, 17) << dynsym->out;
  std::sort(exported.begin(), exported.end());
  EXPECT_EQ(exported, (std::vector<std::string>{"ncclEnvPlugin_v1", "ncclEnvPlugin_v2"}))
      << dynsym->out;
}

}  // namespace
}  // namespace fabric
