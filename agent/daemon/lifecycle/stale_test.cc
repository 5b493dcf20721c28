// The real fabric-agent, run as nobody on an example tree, when a rescan cannot read part of it
// (a directory made unreadable stands in for EMFILE, EIO and friends): it keeps serving the last
// good inventory with the same generation, says so in health (`inventory_stale`), retries on its
// own with a backoff, and recovers without publishing a change that never happened.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>

#include "absl/strings/match.h"
#include "fabric/v1/agent.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "tests/hosts/hosts.h"
#include "tests/testing/binaries.h"
#include "tests/testing/subprocess.h"

namespace fabric {
namespace {

namespace fs = std::filesystem;
using testing::Subprocess;

const std::string kAgent = testing::kAgentBinary;
constexpr uid_t kNobody = 65534;

std::unique_ptr<grpc::ClientContext> Ctx() {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  return ctx;
}

class StaleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Root reads through any mode bits: only an unprivileged agent sees a chmod 000 directory.
    if (geteuid() != 0) GTEST_SKIP() << "needs root to run the agent as nobody";
    if (access("/usr/bin/setpriv", X_OK) != 0) GTEST_SKIP() << "needs setpriv (util-linux)";
    dir_ = testing::MakeTempDir("stale_test");
    ASSERT_FALSE(dir_.empty());
    ASSERT_TRUE(testing::WriteExampleHost("roce-9port", dir_ + "/host").ok());
    for (fs::path p = dir_; p != p.root_path(); p = p.parent_path()) {
      fs::permissions(p, fs::perms::others_exec, fs::perm_options::add);
    }
    fs::create_directories(dir_ + "/run");
    ASSERT_EQ(chown((dir_ + "/run").c_str(), kNobody, kNobody), 0);
    socket_ = dir_ + "/run/agent.sock";
  }
  void TearDown() override {
    agent_.reset();
    std::error_code ec;
    if (!dir_.empty()) {
      fs::permissions(Ib(),
                      fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                          fs::perms::others_read | fs::perms::others_exec,
                      ec);
      fs::remove_all(dir_, ec);
    }
  }

  std::string Ib() const { return dir_ + "/host/sys/class/infiniband"; }
  void LockIb() { fs::permissions(Ib(), fs::perms::none); }
  void UnlockIb() {
    fs::permissions(Ib(), fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                              fs::perms::others_read | fs::perms::others_exec);
  }

  // The agent as nobody, with the periodic rescan an hour away: only SIGHUP and its own retries
  // rescan.
  void StartAgent() {
    auto p = Subprocess::Start({"/usr/bin/setpriv", "--reuid=65534", "--regid=65534",
                                "--clear-groups", kAgent, "--socket=" + socket_,
                                "--sysfs=" + dir_ + "/host/sys", "--procfs=" + dir_ + "/host/proc",
                                "--rescan-interval=3600", "--log-level=debug"});
    ASSERT_TRUE(p.ok()) << p.status();
    agent_ = *std::move(p);
    ASSERT_TRUE(testing::WaitForSocket(*agent_, socket_)) << "exited: " << agent_->Stderr();
    stub_ = v1::FabricAgent::NewStub(
        grpc::CreateChannel("unix:" + socket_, grpc::InsecureChannelCredentials()));
  }

  v1::Inventory Inventory() {
    v1::Inventory inv;
    auto ctx = Ctx();
    grpc::Status s = stub_->GetInventory(ctx.get(), {}, &inv);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return inv;
  }
  // The inventory_stale finding, or nullopt.
  std::optional<v1::Finding> Stale() {
    v1::Health health;
    auto ctx = Ctx();
    grpc::Status s = stub_->GetHealth(ctx.get(), {}, &health);
    EXPECT_TRUE(s.ok()) << s.error_message();
    for (const v1::Finding& f : health.findings()) {
      if (f.check() == "inventory_stale") return f;
    }
    return std::nullopt;
  }

  std::string dir_;
  std::string socket_;
  std::unique_ptr<Subprocess> agent_;
  std::unique_ptr<v1::FabricAgent::Stub> stub_;
};

TEST_F(StaleTest, UnreadableDeviceListKeepsTheLastGoodInventoryUntilItReadsAgain) {
  StartAgent();
  ASSERT_FALSE(HasFatalFailure());
  const v1::Inventory first = Inventory();
  ASSERT_EQ(first.host().rdma_devices_size(), 9);
  ASSERT_EQ(first.generation(), 1u);
  EXPECT_EQ(Stale(), std::nullopt);

  LockIb();
  agent_->Signal(SIGHUP);
  std::optional<v1::Finding> stale;
  ASSERT_TRUE(testing::WaitFor([&] { return (stale = Stale()).has_value(); }, absl::Seconds(10)))
      << agent_->Stderr();
  EXPECT_EQ(stale->severity(), v1::SEVERITY_WARNING);
  EXPECT_TRUE(absl::StartsWith(stale->message(), "inventory stale since 20")) << stale->message();
  EXPECT_TRUE(absl::StrContains(stale->message(), "class/infiniband: ")) << stale->message();
  EXPECT_TRUE(absl::StrContains(stale->message(), "Permission denied")) << stale->message();
  EXPECT_TRUE(absl::EndsWith(stale->message(), "(1 failed read); serving the last good inventory"))
      << stale->message();
  // Every device still served, as it was: no generation for a lie.
  v1::Inventory during = Inventory();
  EXPECT_EQ(during.generation(), 1u);
  EXPECT_EQ(during.host().SerializeAsString(), first.host().SerializeAsString());
  // It retries on its own (0.5 s, then 1 s, ...), without a signal, and stays stale meanwhile.
  EXPECT_TRUE(
      testing::WaitForLogged(*agent_, "rescan (retry of a stale inventory)", absl::Seconds(10))
          .has_value())
      << agent_->Stderr();
  EXPECT_EQ(Inventory().generation(), 1u);
  ASSERT_TRUE(Stale().has_value());

  // Readable again: the next retry (no SIGHUP) clears it, and nothing changed, so the generation
  // stays.
  UnlockIb();
  EXPECT_TRUE(testing::WaitFor([&] { return !Stale().has_value(); }, absl::Seconds(40)))
      << agent_->Stderr();
  const v1::Inventory after = Inventory();
  EXPECT_EQ(after.generation(), 1u);
  EXPECT_EQ(after.host().rdma_devices_size(), 9);
  EXPECT_TRUE(absl::StrContains(agent_->Stderr(), "inventory no longer stale")) << agent_->Stderr();

  // A device really gone (its class/infiniband entry removed) is evidence, published at once.
  fs::remove(Ib() + "/mlx5_3");
  agent_->Signal(SIGHUP);
  EXPECT_TRUE(testing::WaitFor([&] { return Inventory().generation() == 2; }, absl::Seconds(10)));
  EXPECT_EQ(Inventory().host().rdma_devices_size(), 8);
  EXPECT_EQ(Stale(), std::nullopt);
}

// There is no last good inventory at start-up: the first one is served as discovered, with the
// transient problem in it, and the first readable rescan replaces it.
TEST_F(StaleTest, FirstInventoryIsServedAsDiscovered) {
  LockIb();
  StartAgent();
  ASSERT_FALSE(HasFatalFailure());
  v1::Inventory first;
  ASSERT_TRUE(
      testing::WaitFor([&] { return (first = Inventory()).generation() == 1; }, absl::Seconds(10)));
  EXPECT_EQ(first.host().rdma_devices_size(), 0);
  bool transient = false;
  for (const v1::FieldProblem& p : first.host().problems()) {
    transient |= p.path() == "class/infiniband" && p.transient();
  }
  EXPECT_TRUE(transient) << first.host().ShortDebugString().substr(0, 2000);
  EXPECT_EQ(Stale(), std::nullopt);
  // The same failure again is nothing new: published as usual, no stale finding, no retry.
  agent_->Signal(SIGHUP);
  EXPECT_TRUE(testing::WaitForLogged(*agent_, "rescan (SIGHUP)", absl::Seconds(10)).has_value());
  EXPECT_EQ(Stale(), std::nullopt);

  UnlockIb();
  agent_->Signal(SIGHUP);
  EXPECT_TRUE(testing::WaitFor([&] { return Inventory().generation() == 2; }, absl::Seconds(10)))
      << agent_->Stderr();
  EXPECT_EQ(Inventory().host().rdma_devices_size(), 9);
  EXPECT_EQ(Stale(), std::nullopt);
}

}  // namespace
}  // namespace fabric
