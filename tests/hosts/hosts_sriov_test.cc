// sriov-512vf in detail (the every-example-host checks are in builder_test.cc): 8 PFs x 64 VFs;
// VFs 0-15 of each PF are in pods, so the host has their RDMA devices and GIDs but no netdev.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>

#include "gtest/gtest.h"
#include "tests/hosts/hosts.h"
#include "tests/testing/subprocess.h"

namespace fabric::testing {
namespace {

namespace fs = std::filesystem;

class SriovHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // About 95,000 files: tmpfs when it has room.
    tmp_ = MakeTempDir("sriov_host_test");
    ASSERT_FALSE(tmp_.empty());
    dir_ = tmp_ / "host";
    absl::Status st = WriteExampleHost("sriov-512vf", dir_);
    ASSERT_TRUE(st.ok()) << st;
  }
  void TearDown() override {
    std::error_code ec;
    if (!tmp_.empty()) fs::remove_all(tmp_, ec);
  }
  fs::path Sys(const std::string& rel) const { return dir_ / "sys" / rel; }
  std::string ReadSys(const std::string& rel) const {
    std::ifstream in(Sys(rel));
    if (!in) return "<unreadable>";
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  fs::path tmp_, dir_;
};

TEST_F(SriovHostTest, PodVfsHaveGidsButNoHostNetdev) {
  size_t devices = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(Sys("class/infiniband"))) ++devices;
  EXPECT_EQ(devices, 8u + 8u * 64u);
  const std::string pf = "bus/pci/devices/0000:18:00.0";  // mlx5_0, PF 0.
  EXPECT_EQ(ReadSys(pf + "/sriov_numvfs"), "64\n");
  EXPECT_EQ(fs::read_symlink(Sys(pf + "/virtfn63")), "../0000:18:08.0");  // ARI: routing ID 64.
  EXPECT_EQ(fs::canonical(Sys("class/infiniband/mlx5_8/device")),
            fs::canonical(Sys("bus/pci/devices/0000:18:00.1")));
  // VF 0 of PF 0 (mlx5_8) is in a pod: the pod's IPv4 GID without an ndevs entry.
  EXPECT_FALSE(fs::exists(Sys("class/net/enp24s0f0v0")));
  EXPECT_FALSE(fs::exists(Sys("bus/pci/devices/0000:18:00.1/net/enp24s0f0v0")));
  const std::string pod = "class/infiniband/mlx5_8/ports/1";
  EXPECT_EQ(ReadSys(pod + "/gids/3"), "0000:0000:0000:0000:0000:ffff:0a80:0002\n");
  EXPECT_EQ(ReadSys(pod + "/gid_attrs/types/3"), "RoCE v2\n");
  EXPECT_FALSE(fs::exists(Sys(pod + "/gid_attrs/ndevs/3")));
  EXPECT_TRUE(fs::exists(Sys(pod + "/gids/15")));
  EXPECT_FALSE(fs::exists(Sys(pod + "/gids/16")));
  // VF 16 (mlx5_24) stays on the host: its netdev and link-local GIDs only.
  EXPECT_EQ(ReadSys("class/infiniband/mlx5_24/ports/1/gid_attrs/ndevs/1"), "enp24s0f0v16\n");
  EXPECT_FALSE(fs::exists(Sys("class/infiniband/mlx5_24/ports/1/gid_attrs/types/2")));
  EXPECT_EQ(ReadSys("class/net/enp24s0f0v16/device/physfn/device"), "0x1021\n");
}

}  // namespace
}  // namespace fabric::testing
