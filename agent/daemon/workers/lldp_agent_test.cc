// The agent hears its neighbours for real: Debian's lldpd plays the switch in a throwaway network
// namespace at the far end of a veth named like a port's netdev of the example host, and the
// agent, in the near namespace, must show it in the inventory and the watch stream: appeared,
// kept across a full rescan, renamed, gone on the shutdown LLDPDU, and expired on its TTL when
// the switch dies without one. Root only; skipped without lldpd.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "fabric/v1/agent.grpc.pb.h"
#include "tests/hosts/builder.h"
#include "tests/hosts/hosts.h"
#include "tests/testing/binaries.h"
#include "tests/testing/netns.h"
#include "tests/testing/subprocess.h"

namespace fabric {
namespace {

namespace fs = std::filesystem;
using testing::Subprocess;

constexpr char kIp[] = "/usr/sbin/ip";
constexpr char kLldpd[] = "/usr/sbin/lldpd";
constexpr char kLldpcli[] = "/usr/sbin/lldpcli";
constexpr char kSwitchMac[] = "02:00:00:00:0b:07";

class LldpAgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root for network namespaces";
    if (access(kLldpd, X_OK) != 0 || access(kLldpcli, X_OK) != 0) {
      GTEST_SKIP() << "lldpd is not installed";
    }
    dir_ = testing::MakeTempDir("lldp_agent");
    ASSERT_FALSE(dir_.empty());
    // lldpd runs lldpcli for its config as its own user: it must reach the control socket.
    fs::permissions(dir_, fs::perms::others_exec | fs::perms::group_exec, fs::perm_options::add);
    ASSERT_TRUE(testing::WriteExampleHost("roce-9port", dir_ + "/host").ok());
    // eth1 is mlx5_1's port netdev on roce-9port.
    testing::VethPairSpec spec;
    spec.prefix = "fablldpa";
    spec.pod_if = "eth1";
    spec.peer_if = "swp1";
    spec.pod_cidr = "10.78.0.2/24";
    spec.peer_cidr = "10.78.0.1/24";
    auto pair = testing::VethPair::Create(spec);
    ASSERT_TRUE(pair.ok()) << pair.status();
    pair_ = std::move(*pair);
    auto r = testing::Run({kIp, "-n", pair_->peer(), "link", "set", "swp1", "address", kSwitchMac});
    fs::create_directories(dir_ + "/nfd");
    ASSERT_TRUE(r.ok() && r->status == 0);
    socket_ = dir_ + "/agent.sock";
    std::ofstream(dir_ + "/config.json") << "{}\n";  // No rails until the test adds them.
    auto p = Subprocess::Start({kIp, "netns", "exec", pair_->pod(), testing::kAgentBinary,
                                "--socket=" + socket_, "--config=" + dir_ + "/config.json",
                                "--sysfs=" + dir_ + "/host/sys", "--procfs=" + dir_ + "/host/proc",
                                "--rescan-interval=3600", "--log-level=debug",
                                "--nfd-features-dir=" + dir_ + "/nfd"});
    ASSERT_TRUE(p.ok()) << p.status();
    agent_ = std::move(*p);
    ASSERT_TRUE(testing::WaitForSocket(*agent_, socket_)) << agent_->Stderr();
    stub_ = v1::FabricAgent::NewStub(
        grpc::CreateChannel("unix:" + socket_, grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (lldpd_ != nullptr) lldpd_->Signal(SIGKILL);
    lldpd_.reset();
    agent_.reset();
    pair_.reset();
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  void StartLldpd(const std::string& name) {
    fs::create_directories("/run/lldpd");  // Its privilege-separation chroot.
    ctl_ = dir_ + "/lldpd.ctl";
    std::ofstream(dir_ + "/lldpd.conf") << "configure system hostname " << name << "\n"
                                        << "configure lldp tx-interval 1\n"
                                           "configure ports swp1 lldp portdescription "
                                           "\"to gpu-node eth1\"\n";
    auto p = Subprocess::Start({kIp, "netns", "exec", pair_->peer(), kLldpd, "-d", "-u", ctl_, "-I",
                                "swp1", "-O", dir_ + "/lldpd.conf", "-m", "10.78.0.1"});
    ASSERT_TRUE(p.ok()) << p.status();
    lldpd_ = std::move(*p);
  }

  // Reads the watch stream until a KIND_NEIGHBOR change of eth1 whose new value starts with
  // `want` ("" for a neighbour lost); the event, or nullopt.
  std::optional<v1::InventoryEvent> AwaitNeighbor(grpc::ClientReader<v1::InventoryEvent>* reader,
                                                  const std::string& want) {
    v1::InventoryEvent ev;
    while (reader->Read(&ev)) {
      for (const v1::InventoryChange& c : ev.changes()) {
        if (c.kind() != v1::InventoryChange::KIND_NEIGHBOR || c.subject() != "eth1") continue;
        if (want.empty() ? c.new_value().empty() : absl::StartsWith(c.new_value(), want)) {
          return ev;
        }
      }
    }
    return std::nullopt;
  }
  static const v1::Netdev* Eth1(const v1::Host& h) {
    for (const v1::Netdev& n : h.netdevs()) {
      if (n.name() == "eth1") return &n;
    }
    return nullptr;
  }

  std::string dir_, socket_, ctl_;
  std::unique_ptr<testing::VethPair> pair_;
  std::unique_ptr<Subprocess> agent_, lldpd_;
  std::unique_ptr<v1::FabricAgent::Stub> stub_;
};

TEST_F(LldpAgentTest, NeighbourAppearsIsRenamedAndGoes) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(90));
  auto reader = stub_->WatchInventory(&ctx, {});
  v1::InventoryEvent first;
  ASSERT_TRUE(reader->Read(&first)) << agent_->Stderr();
  ASSERT_NE(Eth1(first.inventory().host()), nullptr);
  EXPECT_FALSE(Eth1(first.inventory().host())->has_neighbor());

  ASSERT_NO_FATAL_FAILURE(StartLldpd("leaf-07"));
  auto ev = AwaitNeighbor(reader.get(), "leaf-07 ");
  ASSERT_TRUE(ev.has_value()) << agent_->Stderr() << lldpd_->Stderr();
  const v1::Netdev* eth1 = Eth1(ev->inventory().host());
  ASSERT_NE(eth1, nullptr);
  ASSERT_TRUE(eth1->has_neighbor());
  const v1::Neighbor& n = eth1->neighbor();
  EXPECT_EQ(n.source(), v1::Neighbor::SOURCE_LLDP);
  EXPECT_EQ(n.system_name(), "leaf-07");
  EXPECT_EQ(n.switch_label(), "leaf-07");
  EXPECT_EQ(n.chassis_id(), kSwitchMac);
  EXPECT_EQ(n.port_description(), "to gpu-node eth1");
  EXPECT_EQ(n.management_address(), "10.78.0.1");
  EXPECT_EQ(n.ttl_seconds(), 4u);  // tx-interval 1 x tx-hold 4.
  EXPECT_GT(n.first_seen_unix_ms(), 0);
  // No other netdev heard anything (they do not exist in this namespace).
  for (const v1::Netdev& other : ev->inventory().host().netdevs()) {
    if (other.name() != "eth1") {
      EXPECT_FALSE(other.has_neighbor()) << other.name();
    }
  }

  // The scheduler labels: mlx5_1 (eth1) is the one back-end port that hears a switch.
  std::string labels;
  auto wait_for_label = [&](const std::string& line) {
    EXPECT_TRUE(testing::WaitFor(
        [&] {
          std::ifstream in(dir_ + "/nfd/fabric-agent");
          labels.assign(std::istreambuf_iterator<char>(in), {});
          return absl::StrContains(labels, line);
        },
        absl::Seconds(10)))
        << labels;
  };
  wait_for_label("rdma.fabric.io/leaf.backend=leaf-07\n");
  EXPECT_THAT(labels, ::testing::HasSubstr("rdma.fabric.io/backend-leaves=1\n"));
  EXPECT_THAT(labels, ::testing::HasSubstr("rdma.fabric.io/leaf-group=g-"));

  // fabricctl neighbors, against this agent: the table and the JSON.
  auto ctl = testing::Run({testing::kFabricctlBinary, "neighbors", "--target=" + socket_});
  ASSERT_TRUE(ctl.ok() && ctl->status == 0) << (ctl.ok() ? ctl->err : ctl.status().ToString());
  EXPECT_THAT(ctl->out, ::testing::ContainsRegex("\neth1 +mlx5_1:1 +leaf-07 +02:00:00:00:0b:07 +"
                                                 "to gpu-node eth1 +- +4s +[0-9]+s ago\n"))
      << ctl->out;
  EXPECT_THAT(ctl->out, ::testing::ContainsRegex("\neth2 +mlx5_2:1 +- +-")) << ctl->out;
  ctl = testing::Run({testing::kFabricctlBinary, "neighbors", "--json", "--target=" + socket_});
  ASSERT_TRUE(ctl.ok() && ctl->status == 0);
  EXPECT_THAT(ctl->out, ::testing::HasSubstr("\"switch_label\": \"leaf-07\""));

  // Rails configured (the file reloaded): the neighbour names the rail its switch serves.
  std::ofstream(dir_ + "/config.json")
      << R"({"selection": {"rails": [{"name": "r1", "switchPattern": "leaf-0*", "ports": ["mlx5_1"]}]}})"
      << "\n";
  agent_->Signal(SIGHUP);
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        ctl = testing::Run({testing::kFabricctlBinary, "neighbors", "--target=" + socket_});
        return ctl.ok() && ctl->status == 0 &&
               absl::StrContains(ctl->out, "to gpu-node eth1  r1  ");
      },
      absl::Seconds(10)))
      << (ctl.ok() ? ctl->out + ctl->err : ctl.status().ToString()) << agent_->Stderr();
  wait_for_label("rdma.fabric.io/leaf.r1=leaf-07\n");

  // A full rescan (SIGHUP) reads sysfs, which knows nothing of neighbours: it stays.
  agent_->Signal(SIGHUP);
  absl::SleepFor(absl::Seconds(1));
  v1::Inventory inv;
  grpc::ClientContext get;
  ASSERT_TRUE(stub_->GetInventory(&get, {}, &inv).ok());
  ASSERT_NE(Eth1(inv.host()), nullptr);
  EXPECT_EQ(Eth1(inv.host())->neighbor().system_name(), "leaf-07");

  // Renamed while the link stays up.
  auto r = testing::Run({kIp, "netns", "exec", pair_->peer(), kLldpcli, "-u", ctl_, "configure",
                         "system", "hostname", "leaf-08"});
  ASSERT_TRUE(r.ok() && r->status == 0) << (r.ok() ? r->err : r.status().ToString());
  ev = AwaitNeighbor(reader.get(), "leaf-08 ");
  ASSERT_TRUE(ev.has_value()) << agent_->Stderr();

  // Stopped: its shutdown LLDPDU removes the neighbour at once.
  lldpd_->Signal(SIGTERM);
  ASSERT_TRUE(lldpd_->Wait(absl::Seconds(5)).has_value());
  lldpd_.reset();
  ev = AwaitNeighbor(reader.get(), "");
  ASSERT_TRUE(ev.has_value()) << agent_->Stderr();
  EXPECT_FALSE(Eth1(ev->inventory().host())->has_neighbor());

  // Killed: no shutdown LLDPDU; the neighbour expires on its TTL (4 s) instead.
  ASSERT_NO_FATAL_FAILURE(StartLldpd("leaf-09"));
  ASSERT_TRUE(AwaitNeighbor(reader.get(), "leaf-09 ").has_value()) << agent_->Stderr();
  // Every lldpd process, stopped before any is killed: its unprivileged half sends the shutdown
  // LLDPDU when it sees the monitor die, even in the microseconds before its own SIGKILL lands.
  auto pids = testing::Run({kIp, "netns", "pids", pair_->peer()});
  ASSERT_TRUE(pids.ok() && pids->status == 0);
  std::vector<int> lldpd_pids;
  for (absl::string_view pid : absl::StrSplit(pids->out, '\n', absl::SkipWhitespace())) {
    int p = 0;
    if (absl::SimpleAtoi(pid, &p) && p > 1) lldpd_pids.push_back(p);
  }
  ASSERT_FALSE(lldpd_pids.empty());
  for (int p : lldpd_pids) kill(p, SIGSTOP);
  for (int p : lldpd_pids) kill(p, SIGKILL);
  (void)lldpd_->Wait(absl::Seconds(5));
  lldpd_.reset();
  const absl::Time killed = absl::Now();
  ev = AwaitNeighbor(reader.get(), "");
  ASSERT_TRUE(ev.has_value()) << agent_->Stderr();
  EXPECT_GE(absl::Now() - killed, absl::Seconds(2)) << "lost before its TTL ran out";
  EXPECT_LE(absl::Now() - killed, absl::Seconds(8));
}

}  // namespace
}  // namespace fabric
