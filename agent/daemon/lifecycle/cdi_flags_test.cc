// fabric-agent's CDI flags with the real binary on an example host: --cdi-dir keeps the spec
// there; --no-cdi and an empty --cdi-dir turn it off; an example host's sysfs root without an
// explicit --cdi-dir writes none (the default /var/run/cdi would get devices this host lacks).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/hosts/hosts.h"
#include "tests/testing/binaries.h"
#include "tests/testing/subprocess.h"

namespace fabric {
namespace {

namespace fs = std::filesystem;
constexpr char kKeeping[] = "keeping the CDI spec ";

class CdiFlagsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("cdi-flags");
    ASSERT_TRUE(testing::WriteExampleHost("roce-9port", dir_ + "/host").ok());
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The agent's log up to serving, with `flags` added.
  std::string StartedWith(const std::vector<std::string>& flags) {
    std::vector<std::string> argv = {testing::kAgentBinary,
                                     "--socket=" + dir_ + "/agent.sock",
                                     "--sysfs=" + dir_ + "/host/sys",
                                     "--procfs=" + dir_ + "/host/proc",
                                     "--lldp=false",
                                     "--ib-neighbors=false",
                                     "--announce-socket="};
    argv.insert(argv.end(), flags.begin(), flags.end());
    auto agent = testing::Subprocess::Start(argv);
    EXPECT_TRUE(agent.ok()) << agent.status();
    if (!agent.ok()) return "";
    EXPECT_TRUE(testing::WaitForSocket(**agent, dir_ + "/agent.sock")) << (*agent)->Stderr();
    return (*agent)->Stderr();
  }

  std::string dir_;
};

TEST_F(CdiFlagsTest, OnlyWhereAskedAndNotWhenTurnedOff) {
  const std::string cdi = dir_ + "/cdi";
  std::string log = StartedWith({"--cdi-dir=" + cdi});
  EXPECT_TRUE(absl::StrContains(log, absl::StrCat(kKeeping, cdi, "/fabric.io-rdma.json"))) << log;
  EXPECT_TRUE(fs::exists(cdi + "/fabric.io-rdma.json")) << "created with its directory";

  for (const std::vector<std::string>& off : std::vector<std::vector<std::string>>{
           {"--cdi-dir=" + dir_ + "/off1", "--no-cdi"}, {"--cdi-dir="}, {}}) {
    log = StartedWith(off);
    EXPECT_FALSE(absl::StrContains(log, kKeeping)) << log;
    EXPECT_FALSE(fs::exists(dir_ + "/off1"));
  }
}

}  // namespace
}  // namespace fabric
