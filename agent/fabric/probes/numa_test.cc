// Placement: perftest's rules against a fake NumaOs over a sysfs tree (the NIC's node, a device
// without one, CPUs narrowed already, explicit node and CPUs, failures), and libnuma's pinning
// for real on a thread of its own.
#include "agent/fabric/probes/numa.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sched.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/testing/subprocess.h"

namespace fabric::probes {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

Placement P(Placement::Mode mode, int node = -1, std::string cpus = "") {
  Placement p;
  p.mode = mode;
  p.node = node;
  p.cpus = std::move(cpus);
  return p;
}

class FakeNumaOs : public NumaOs {
 public:
  bool Available() const override { return available; }
  int MaxNode() const override { return max_node; }
  int OnlineCpus() const override { return 8; }
  int AllowedCpus() const override { return allowed; }
  absl::Status RunOnNode(int node) override {
    ran_on = node;
    return run_status;
  }
  absl::Status PinCpus(const std::string& cpus) override {
    pinned = cpus;
    return absl::OkStatus();
  }
  bool available = true;
  int max_node = 1;
  int allowed = 8;
  absl::Status run_status;
  int ran_on = -1;
  std::string pinned;
};

class PlaceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("numa");
    ASSERT_FALSE(dir_.empty());
    Node("mlx5_0", "1\n");
    Node("mlx5_1", "-1\n");  // the kernel does not know
    Node("mlx5_2", "7\n");   // not a node of this host
    Node("mlx5_3", "one\n");
    fs::create_directories(dir_ + "/class/infiniband/rxe0/device");  // no numa_node file
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Node(const std::string& dev, const std::string& text) {
    fs::create_directories(dir_ + "/class/infiniband/" + dev + "/device");
    std::ofstream(dir_ + "/class/infiniband/" + dev + "/device/numa_node") << text;
  }
  absl::StatusOr<std::string> Run(Placement p, const std::string& dev) {
    return Place(p, HostFsImpl(dir_), dev, os_);
  }
  std::string dir_;
  FakeNumaOs os_;
};

TEST_F(PlaceTest, ByDefaultTheNicsNode) {
  const Placement p = P(Placement::Mode::kAuto);
  absl::StatusOr<std::string> r = Run(p, "mlx5_0");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, "NUMA node 1, mlx5_0's");
  EXPECT_EQ(os_.ran_on, 1);
  for (const char* dev : {"mlx5_1", "mlx5_2", "mlx5_3", "rxe0", "gone0"}) {
    os_.ran_on = -1;
    r = Run(p, dev);
    ASSERT_TRUE(r.ok()) << dev;
    EXPECT_EQ(*r, "") << dev;
    EXPECT_EQ(os_.ran_on, -1) << dev;
  }
}

TEST_F(PlaceTest, NarrowedCpusOrNoNumaOrOffLeaveItAlone) {
  os_.allowed = 4;  // taskset, a cpuset, Slurm's binding
  EXPECT_EQ(*Run(P(Placement::Mode::kAuto), "mlx5_0"), "");
  os_.allowed = 8;
  os_.available = false;
  EXPECT_EQ(*Run(P(Placement::Mode::kAuto), "mlx5_0"), "");
  os_.available = true;
  EXPECT_EQ(*Run(P(Placement::Mode::kOff), "mlx5_0"), "");
  EXPECT_EQ(*Run(P(Placement::Mode::kNone), "mlx5_0"), "");
  EXPECT_EQ(os_.ran_on, -1);
}

TEST_F(PlaceTest, AutomaticFailureIsSaidAndTheTestGoesOn) {
  os_.run_status = absl::UnavailableError("cannot run on NUMA node 1: Invalid argument");
  absl::StatusOr<std::string> r = Run(P(Placement::Mode::kAuto), "mlx5_0");
  ASSERT_TRUE(r.ok());
  EXPECT_THAT(*r, HasSubstr("not bound to mlx5_0's NUMA node (cannot run on NUMA node 1"));
}

TEST_F(PlaceTest, ExplicitNodeAndCpus) {
  EXPECT_EQ(*Run(P(Placement::Mode::kNode, 0), "rxe0"), "NUMA node 0");
  EXPECT_EQ(os_.ran_on, 0);
  absl::StatusOr<std::string> r = Run(P(Placement::Mode::kNode, 2), "rxe0");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("--numa_node=2 is not a node of this host (0..1)"));
  os_.run_status = absl::UnavailableError("cannot run on NUMA node 1");
  EXPECT_FALSE(Run(P(Placement::Mode::kNode, 1), "rxe0").ok());
  os_.available = false;
  EXPECT_EQ(Run(P(Placement::Mode::kNode, 0), "rxe0").status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(*Run(P(Placement::Mode::kCpus, -1, "0-1,3"), "rxe0"), "CPUs 0-1,3");
  EXPECT_EQ(os_.pinned, "0-1,3");
}

// libnuma for real, on a thread of its own (the affinity is the thread's).
TEST(NumaOsImpl, PinsTheCallingThread) {
  std::unique_ptr<NumaOs> os = MakeNumaOs();
  cpu_set_t before;
  ASSERT_EQ(sched_getaffinity(0, sizeof before, &before), 0);
  int first = -1;
  for (int c = 0; c < CPU_SETSIZE && first < 0; ++c) {
    if (CPU_ISSET(c, &before)) first = c;
  }
  ASSERT_GE(first, 0);
  absl::Status pinned;
  int count = 0;
  bool on_first = false;
  std::thread([&] {
    pinned = os->PinCpus(std::to_string(first));
    cpu_set_t now;
    if (sched_getaffinity(0, sizeof now, &now) == 0) {
      count = CPU_COUNT(&now);
      on_first = CPU_ISSET(first, &now);
    }
  }).join();
  ASSERT_TRUE(pinned.ok()) << pinned;
  EXPECT_EQ(count, 1);
  EXPECT_TRUE(on_first);
  EXPECT_THAT(std::string(os->PinCpus("3-x").message()), HasSubstr("is not a CPU list"));
  cpu_set_t after;
  ASSERT_EQ(sched_getaffinity(0, sizeof after, &after), 0);
  EXPECT_EQ(CPU_COUNT(&after), CPU_COUNT(&before));  // this thread untouched
}

}  // namespace
}  // namespace fabric::probes
