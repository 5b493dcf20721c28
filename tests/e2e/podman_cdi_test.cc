// The CDI spec with a real runtime: Debian's podman 4.3 (runc) applies fabric-agent's spec for
// `--device fabric.io/rdma=gpu0`, for two GPU devices and for `=all`, on an image imported from a
// busybox rootfs (no registry). The agent runs on the roce-9port example host with
// --dev-root: the test makes the character devices the spec names (uverbsN, rdma_cm) under
// that root, and inside the container the environment and exactly those nodes are there. Then
// the agent's rescans leave the file alone while nothing changes, and replace it when a port the
// spec uses goes down. `fabricctl cdi` prints the agent's bytes.
//
// podman 4.3 reads specs only from /etc/cdi and /var/run/cdi (test-rigs, rig 7): the test copies
// the agent's spec there under a name of its own and removes it after; it skips when a real
// fabric.io-rdma.json is there (two specs of one kind and device name make both unresolvable).
// Needs root, podman and runc; skips with the reason otherwise.
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/podman_rig.h"
#include "tests/hosts/hosts.h"
#include "tests/testing/binaries.h"
#include "tests/testing/subprocess.h"

namespace fabric {
namespace {

namespace fs = std::filesystem;
using ::testing::Contains;
using ::testing::Not;

constexpr char kRunCdi[] = "/var/run/cdi";

std::string Slurp(const std::string& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class PodmanCdiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string why = testing::PodmanRig::Missing(); !why.empty()) GTEST_SKIP() << why;
    if (fs::exists(absl::StrCat(kRunCdi, "/fabric.io-rdma.json"))) {
      GTEST_SKIP() << "a fabric-agent's spec is in " << kRunCdi << ": the test's would clash";
    }
    tag_ = absl::StrCat(getpid());
    rig_ = std::make_unique<testing::PodmanRig>(absl::StrCat("/var/tmp/fabric-cdi-", tag_),
                                                std::vector<std::string>{"sh", "env", "ls"});
    ASSERT_TRUE(rig_->imported());
    dir_ = rig_->dir();
    fs::create_directories(dir_ + "/cdi");
    ASSERT_TRUE(testing::WriteExampleHost("roce-9port", dir_ + "/host").ok());
    created_run_cdi_ = !fs::exists(kRunCdi);
    fs::create_directories(kRunCdi);
    installed_ = absl::StrCat(kRunCdi, "/fabric.io-rdma-e2e-", tag_, ".json");
  }

  void TearDown() override {
    if (!rig_) return;
    agent_.reset();
    fs::remove(installed_);
    if (created_run_cdi_) fs::remove(kRunCdi);  // Only when empty, as we found it.
    rig_.reset();
  }

  absl::StatusOr<testing::RunResult> Podman(std::vector<std::string> args) {
    return rig_->Podman(std::move(args));
  }

  std::string Spec() const { return dir_ + "/cdi/fabric.io-rdma.json"; }

  void StartAgent() {
    auto agent = testing::Subprocess::Start(
        {testing::kAgentBinary, "--socket=" + dir_ + "/agent.sock", "--sysfs=" + dir_ + "/host/sys",
         "--procfs=" + dir_ + "/host/proc", "--cdi-dir=" + dir_ + "/cdi",
         "--dev-root=" + dir_ + "/devroot", "--rescan-interval=0.2", "--lldp=false",
         "--ib-neighbors=false", "--announce-socket=", "--log-level=debug"});
    ASSERT_TRUE(agent.ok()) << agent.status();
    agent_ = *std::move(agent);
    ASSERT_TRUE(testing::WaitFor([&] { return fs::exists(Spec()); }, absl::Seconds(20)))
        << agent_->Stderr();
  }

  // The character devices the spec names, made where its hostPaths point.
  void MakeNodes(const nlohmann::json& spec) {
    for (const auto& d : spec["devices"]) {
      for (const auto& n : d["containerEdits"]["deviceNodes"]) {
        const std::string path = n["path"].get<std::string>();
        const std::string host = n["hostPath"].get<std::string>();
        if (fs::exists(host)) continue;
        ASSERT_NO_FATAL_FAILURE(testing::MakeRdmaNode(host, fs::path(path).filename().string()));
      }
    }
  }

  struct Inside {
    std::set<std::string> env;    // NAME=VALUE lines.
    std::set<std::string> nodes;  // Names in /dev/infiniband.
  };
  Inside RunWith(const std::vector<std::string>& devices) {
    std::vector<std::string> args = {"run", "--rm", "--network=none"};
    for (const std::string& d : devices) {
      args.push_back("--device");
      args.push_back("fabric.io/rdma=" + d);
    }
    for (const char* a :
         {testing::PodmanRig::kImage, "sh", "-c", "env; echo --; ls /dev/infiniband"}) {
      args.push_back(a);
    }
    auto r = Podman(args);
    Inside in;
    EXPECT_TRUE(r.ok() && r->status == 0) << (r.ok() ? r->err : std::string(r.status().message()));
    if (!r.ok()) return in;
    bool nodes = false;
    for (absl::string_view line : absl::StrSplit(r->out, '\n', absl::SkipEmpty())) {
      if (line == "--") {
        nodes = true;
      } else {
        (nodes ? in.nodes : in.env).insert(std::string(line));
      }
    }
    return in;
  }

  std::unique_ptr<testing::PodmanRig> rig_;
  std::string tag_, dir_, installed_;
  bool created_run_cdi_ = false;
  std::unique_ptr<testing::Subprocess> agent_;
};

// The spec's env and node names of one device.
struct Want {
  std::set<std::string> env, nodes;
};
Want Of(const nlohmann::json& spec, const std::set<std::string>& names) {
  Want w;
  for (const auto& d : spec["devices"]) {
    if (!names.count(d["name"].get<std::string>())) continue;
    for (const auto& e : d["containerEdits"].value("env", nlohmann::json::array())) {
      w.env.insert(e.get<std::string>());
    }
    for (const auto& n : d["containerEdits"]["deviceNodes"]) {
      w.nodes.insert(fs::path(n["path"].get<std::string>()).filename().string());
    }
  }
  return w;
}

// gpu<K>'s uverbs node ("uverbs1"), beside rdma_cm.
std::string UverbsOf(const nlohmann::json& spec, const std::string& device) {
  for (const std::string& n : Of(spec, {device}).nodes) {
    if (absl::StartsWith(n, "uverbs")) return n;
  }
  return "";
}

TEST_F(PodmanCdiTest, DevicesEnvironmentAndRewrites) {
  StartAgent();
  const std::string bytes = Slurp(Spec());
  const nlohmann::json spec = nlohmann::json::parse(bytes);
  MakeNodes(spec);
  fs::copy_file(Spec(), installed_);

  // fabricctl on the same host prints the same bytes.
  auto ctl = testing::Run({testing::kFabricctlBinary, "cdi", "--sysfs=" + dir_ + "/host/sys",
                           "--procfs=" + dir_ + "/host/proc", "--dev-root=" + dir_ + "/devroot"});
  ASSERT_TRUE(ctl.ok() && ctl->status == 0) << (ctl.ok() ? ctl->err : "");
  EXPECT_EQ(ctl->out, bytes);

  for (const std::set<std::string>& devices :
       std::vector<std::set<std::string>>{{"gpu0"}, {"gpu0", "gpu1"}, {"all"}}) {
    SCOPED_TRACE(absl::StrCat("--device ", *devices.begin(), devices.size() > 1 ? " ..." : ""));
    const Want want = Of(spec, devices);
    ASSERT_FALSE(want.env.empty());
    const Inside in = RunWith({devices.begin(), devices.end()});
    for (const std::string& e : want.env) EXPECT_THAT(in.env, Contains(e));
    EXPECT_EQ(in.nodes, want.nodes);
    if (devices.count("all")) {
      EXPECT_THAT(in.env, Contains(::testing::StartsWith("NCCL_IB_HCA==")));
    } else {
      // No device list: libibverbs lists the nodes the container has, and that is the pin.
      EXPECT_THAT(in.env, Not(Contains(::testing::StartsWith("NCCL_IB_HCA="))));
      EXPECT_EQ(in.nodes.size(), devices.size() + 1);  // One NIC per GPU, and rdma_cm.
    }
  }

  // Rescans every 0.2 s that find the same host: the file stays (inode, mtime).
  struct stat before, after;
  ASSERT_EQ(::stat(Spec().c_str(), &before), 0);
  absl::SleepFor(absl::Seconds(1.5));
  ASSERT_EQ(::stat(Spec().c_str(), &after), 0);
  EXPECT_EQ(before.st_ino, after.st_ino);
  EXPECT_EQ(before.st_mtim.tv_nsec, after.st_mtim.tv_nsec);
  EXPECT_EQ(Slurp(Spec()), bytes);

  // gpu0's NIC goes down: the next rescan replaces the spec, gpu0 on another NIC.
  const std::string gpu0_node = UverbsOf(spec, "gpu0");
  ASSERT_FALSE(gpu0_node.empty());
  std::string nic;  // The per-NIC device holding the same node.
  for (const auto& d : spec["devices"]) {
    const std::string name = d["name"].get<std::string>();
    if (name != "all" && !absl::StartsWith(name, "gpu") &&
        Of(spec, {name}).nodes.count(gpu0_node)) {
      nic = name;
    }
  }
  ASSERT_FALSE(nic.empty()) << "no RDMA device has " << gpu0_node;
  std::ofstream(dir_ + "/host/sys/class/infiniband/" + nic + "/ports/1/state") << "1: DOWN\n";
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        struct stat st;
        return ::stat(Spec().c_str(), &st) == 0 && st.st_ino != before.st_ino;
      },
      absl::Seconds(10)))
      << agent_->Stderr();
  const nlohmann::json changed = nlohmann::json::parse(Slurp(Spec()));
  EXPECT_NE(UverbsOf(changed, "gpu0"), gpu0_node);
  EXPECT_FALSE(UverbsOf(changed, "gpu0").empty());
}

}  // namespace
}  // namespace fabric
