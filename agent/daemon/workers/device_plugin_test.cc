// The device plugins over real gRPC on real Unix sockets in a temporary directory, with this test
// as the kubelet (the same generated API): registration, registering again after the kubelet
// wiped the directory, ListAndWatch following health, Allocate and GetPreferredAllocation, and
// the findings of a failed registration and of two resources on one NIC. Waits are for events
// (a registration, a stream message) with a generous deadline; nothing is timed.
#include "agent/daemon/workers/device_plugin.h"

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <mutex>

#include "google/protobuf/text_format.h"
#include "k8s/deviceplugin/v1beta1/api.grpc.pb.h"
#include "tests/hosts/discovered.h"
#include "tests/testing/fake_kubelet.h"
#include "tests/testing/subprocess.h"

namespace fabric {
namespace {

using ::testing::HasSubstr;

using testing::FakeKubelet;

class DevicePluginWorkerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/fabric-dp-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    plugins_.reset();
    std::filesystem::remove_all(dir_);
  }

  void Start(const std::string& resources,
             const std::function<void(DevicePluginOptions&)>& more = nullptr) {
    DevicePluginOptions o;
    o.dir = dir_;
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(resources, &o.config));
    o.allocate.host_file_dir = "/run/fabric-env";
    o.allocate.pod_helper = "/usr/bin/fabric-env";
    o.backoff_min = absl::Milliseconds(20);  // Tries come quickly; the test waits for events.
    o.backoff_max = absl::Milliseconds(200);
    if (more) more(o);
    auto p = DevicePlugins::Start(std::move(o));
    ASSERT_TRUE(p.ok()) << p.status();
    plugins_ = *std::move(p);
  }

  void Publish(const v1::Host& host, v1::Health health = {}) {
    Snapshot s;
    s.generation = ++generation_;
    s.host = std::make_shared<const v1::Host>(host);
    s.health = std::move(health);
    Built built;
    plugins_->Publish({s, nullptr, built, absl::Now()});
  }

  std::unique_ptr<v1beta1::DevicePlugin::Stub> Plugin(const std::string& resource) {
    return v1beta1::DevicePlugin::NewStub(grpc::CreateChannel(
        "unix:" + plugins_->SocketPath(resource), grpc::InsecureChannelCredentials()));
  }

  static std::string Health(const v1beta1::ListAndWatchResponse& r, const std::string& id) {
    for (const auto& d : r.devices()) {
      if (d.id() == id) return d.health();
    }
    return "absent";
  }

  std::string dir_;
  uint64_t generation_ = 0;
  std::unique_ptr<DevicePlugins> plugins_;
};

constexpr char kIb[] =
    "resources { name: \"rdma/ib\" mode: EXCLUSIVE selectors { link_types: \"infiniband\" } }";

TEST_F(DevicePluginWorkerTest, RegistersAndAgainAfterTheKubeletWipesItsDirectory) {
  auto kubelet = std::make_unique<FakeKubelet>(dir_ + "/kubelet.sock");
  Start(kIb);
  Publish(testing::DiscoveredExampleHost("dgx-h100-ib"));
  auto reqs = kubelet->WaitFor(1);
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].version(), "v1beta1");
  EXPECT_EQ(reqs[0].endpoint(), "fabric-rdma-ib.sock");
  EXPECT_EQ(reqs[0].resource_name(), "rdma/ib");
  EXPECT_TRUE(reqs[0].options().get_preferred_allocation_available());
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/fabric-rdma-ib.sock"));

  // A kubelet restart: it goes, the directory's contents go, a new one creates kubelet.sock.
  kubelet.reset();
  for (const auto& e : std::filesystem::directory_iterator(dir_)) std::filesystem::remove_all(e);
  kubelet = std::make_unique<FakeKubelet>(dir_ + "/kubelet.sock");
  reqs = kubelet->WaitFor(1);
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].endpoint(), "fabric-rdma-ib.sock");
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/fabric-rdma-ib.sock"));
  // And the new socket serves.
  grpc::ClientContext ctx;
  v1beta1::DevicePluginOptions opts;
  ASSERT_TRUE(Plugin("rdma/ib")->GetDevicePluginOptions(&ctx, {}, &opts).ok());
  EXPECT_TRUE(opts.get_preferred_allocation_available());
  plugins_.reset();
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/fabric-rdma-ib.sock")) << "teardown removes it";
}

TEST_F(DevicePluginWorkerTest, ListAndWatchFollowsPortState) {
  Start(kIb);
  const v1::Host& host = testing::DiscoveredExampleHost("dgx-h100-ib");
  Publish(host);
  grpc::ClientContext ctx;
  auto stream = Plugin("rdma/ib")->ListAndWatch(&ctx, {});
  v1beta1::ListAndWatchResponse r;
  ASSERT_TRUE(stream->Read(&r));
  ASSERT_EQ(r.devices_size(), 8);
  for (const auto& d : r.devices()) {
    EXPECT_EQ(d.health(), "Healthy") << d.id();
    ASSERT_EQ(d.topology().nodes_size(), 1) << d.id();
  }
  EXPECT_EQ(r.devices(0).id(), "mlx5_0");
  EXPECT_EQ(r.devices(0).topology().nodes(0).id(), 0);
  EXPECT_EQ(r.devices(7).id(), "mlx5_11");
  EXPECT_EQ(r.devices(7).topology().nodes(0).id(), 1);

  v1::Host down = host;
  for (auto& d : *down.mutable_rdma_devices()) {
    if (d.name() == "mlx5_9") d.mutable_ports(0)->set_state(v1::PORT_STATE_DOWN);
  }
  Publish(down);
  ASSERT_TRUE(stream->Read(&r));
  EXPECT_EQ(Health(r, "mlx5_9"), "Unhealthy");
  EXPECT_EQ(Health(r, "mlx5_10"), "Healthy");
  Publish(host);
  ASSERT_TRUE(stream->Read(&r));
  EXPECT_EQ(Health(r, "mlx5_9"), "Healthy");
  // Gone: still listed, Unhealthy.
  v1::Host gone = host;
  auto* devs = gone.mutable_rdma_devices();
  devs->erase(std::remove_if(devs->begin(), devs->end(),
                             [](const v1::RdmaDevice& d) { return d.name() == "mlx5_0"; }),
              devs->end());
  Publish(gone);
  ASSERT_TRUE(stream->Read(&r));
  EXPECT_EQ(Health(r, "mlx5_0"), "Unhealthy");
  ctx.TryCancel();
}

TEST_F(DevicePluginWorkerTest, AllocateAndPreferredAllocation) {
  Start(kIb);
  Publish(testing::DiscoveredExampleHost("dgx-h100-ib"));
  auto stub = Plugin("rdma/ib");
  v1beta1::AllocateRequest req;
  req.add_container_requests()->add_devices_ids("mlx5_6");
  v1beta1::AllocateResponse resp;
  {
    grpc::ClientContext ctx;
    grpc::Status s = stub->Allocate(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  ASSERT_EQ(resp.container_responses_size(), 1);
  const auto& c = resp.container_responses(0);
  ASSERT_EQ(c.devices_size(), 2);
  EXPECT_EQ(c.devices(0).host_path(), "/dev/infiniband/uverbs6");
  EXPECT_EQ(c.devices(1).host_path(), "/dev/infiniband/rdma_cm");
  ASSERT_EQ(c.mounts_size(), 2);
  EXPECT_EQ(c.mounts(1).container_path(), "/usr/local/bin/fabric-env");
  EXPECT_EQ(c.envs().at("FABRIC_RDMA_RESOURCE"), "rdma/ib");
  EXPECT_EQ(c.envs().at("FABRIC_RDMA_DEVICES"), "mlx5_6");
  {
    grpc::ClientContext ctx;
    v1beta1::AllocateRequest bad;
    bad.add_container_requests()->add_devices_ids("mlx5_77");
    grpc::Status s = stub->Allocate(&ctx, bad, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(s.error_message(), HasSubstr("mlx5_77"));
  }
  v1beta1::PreferredAllocationRequest pr;
  auto* cr = pr.add_container_requests();
  for (const char* id :
       {"mlx5_11", "mlx5_0", "mlx5_10", "mlx5_3", "mlx5_9", "mlx5_4", "mlx5_6", "mlx5_5"}) {
    cr->add_available_deviceids(id);
  }
  cr->add_must_include_deviceids("mlx5_10");
  cr->set_allocation_size(4);
  v1beta1::PreferredAllocationResponse pa;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub->GetPreferredAllocation(&ctx, pr, &pa).ok());
  ASSERT_EQ(pa.container_responses_size(), 1);
  EXPECT_THAT(pa.container_responses(0).deviceids(),
              ::testing::UnorderedElementsAre("mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"));
}

TEST_F(DevicePluginWorkerTest, FailedRegistrationAndSharedNicsAreFindings) {
  Start(std::string(kIb) +
        " resources { name: \"rdma/storage\" mode: SHARED selectors { rdma_devices: \"mlx5_0\" "
        "rdma_devices: \"mlx5_1\" } }");
  Publish(testing::DiscoveredExampleHost("dgx-h100-ib"));
  // No kubelet.sock: each try fails; the error is kept once the first has.
  std::vector<v1::Finding> findings;
  for (int i = 0; i < 6000; ++i) {
    findings.clear();
    plugins_->Findings(absl::Now(), &findings);
    if (findings.size() >= 3) break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  std::vector<std::string> messages;
  for (const auto& f : findings) messages.push_back(f.subject() + ": " + f.message());
  EXPECT_THAT(messages, ::testing::Contains(HasSubstr("rdma/ib: device plugin rdma/ib is not "
                                                      "registered")));
  EXPECT_THAT(messages, ::testing::Contains(HasSubstr("rdma/storage: device plugin")));
  EXPECT_THAT(messages,
              ::testing::Contains(HasSubstr("mlx5_0: resources rdma/ib and rdma/storage")));
  EXPECT_EQ(plugins_->registrations(), 0u);
}

// A kubelet that accepts connections (the kernel's backlog) and never answers.
class SilentKubelet {
 public:
  explicit SilentKubelet(const std::string& path) : fd_(socket(AF_UNIX, SOCK_STREAM, 0)) {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path, path.data(), path.size());
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    EXPECT_EQ(listen(fd_, 1024), 0);
  }
  ~SilentKubelet() { close(fd_); }
  // A connection is waiting (a Register is under way).
  bool Connected() {
    pollfd p{fd_, POLLIN, 0};
    return poll(&p, 1, 0) == 1;
  }

 private:
  int fd_;
};

std::string Resources(int n) {
  std::string out;
  for (int i = 0; i < n; ++i) {
    out += "resources { name: \"fabric.io/r" + std::to_string(i) +
           "\" mode: SHARED shared_count: 1 selectors { vendors: \"15b3\" } }";
  }
  return out;
}

// Issue 51: with a kubelet that never answers, a Register in flight held the teardown for its
// deadline, and each of 64 resources waited in turn. Here the deadline is an hour: only the
// cancel ends it.
TEST_F(DevicePluginWorkerTest, TeardownCancelsARegistrationTheKubeletNeverAnswers) {
  SilentKubelet kubelet(dir_ + "/kubelet.sock");
  Start(Resources(64), [](DevicePluginOptions& o) { o.register_timeout = absl::Hours(1); });
  ASSERT_TRUE(testing::WaitFor([&] { return kubelet.Connected(); }, absl::Seconds(60)));
  absl::SleepFor(absl::Milliseconds(100));  // Not an assertion: the call is well under way.
  const absl::Time t0 = absl::Now();
  plugins_.reset();
  const absl::Duration took = absl::Now() - t0;
  EXPECT_LT(took, absl::Minutes(1)) << "the teardown waited for the Register deadline";
  std::cout << "teardown with a silent kubelet and 64 resources: " << took << "\n";
}

TEST_F(DevicePluginWorkerTest, ANewStreamEvictsTheOldest) {
  Start(
      "resources { name: \"rdma/s\" mode: SHARED shared_count: 10000 selectors { link_types: "
      "\"infiniband\" } }",
      [](DevicePluginOptions& o) {
        o.max_streams = 2;
        o.stream_write_timeout = absl::Milliseconds(200);
        o.recheck = absl::Milliseconds(50);
      });
  v1::Host host = testing::DiscoveredExampleHost("dgx-h100-ib");
  Publish(host);
  auto stub = Plugin("rdma/s");
  std::vector<std::unique_ptr<grpc::ClientContext>> ctx;
  std::vector<std::unique_ptr<grpc::ClientReader<v1beta1::ListAndWatchResponse>>> streams;
  v1beta1::ListAndWatchResponse r;
  for (int i = 0; i < 3; ++i) {
    ctx.push_back(std::make_unique<grpc::ClientContext>());
    streams.push_back(stub->ListAndWatch(ctx.back().get(), {}));
    ASSERT_TRUE(streams.back()->Read(&r)) << i;  // Each is served.
  }
  // The first was evicted by the third: its stream ends.
  while (streams[0]->Read(&r)) {
  }
  EXPECT_EQ(plugins_->counts().streams_evicted, 1u);
  // And the kubelet's next stream is served.
  grpc::ClientContext fresh;
  auto s = stub->ListAndWatch(&fresh, {});
  EXPECT_TRUE(s->Read(&r));
  fresh.TryCancel();
  for (auto& c : ctx) c->TryCancel();
}

// The kubelet's restart seen by its socket's creation whatever its inode (here the same file
// moved away and back), and after the directory was removed and created again.
TEST_F(DevicePluginWorkerTest, RegistersAgainOnEveryKubeletSocketAndAfterTheDirectoryReturns) {
  auto kubelet = std::make_unique<FakeKubelet>(dir_ + "/kubelet.sock");
  // Only inotify can make it quick: no recheck, no retry within the test's wait.
  Start(kIb, [](DevicePluginOptions& o) {
    o.recheck = absl::Hours(1);
    o.backoff_min = absl::Hours(1);
    o.backoff_max = absl::Hours(1);
  });
  Publish(testing::DiscoveredExampleHost("dgx-h100-ib"));
  ASSERT_EQ(kubelet->WaitFor(1).size(), 1u);
  ASSERT_EQ(rename((dir_ + "/kubelet.sock").c_str(), (dir_ + "/../kubelet-away.sock").c_str()), 0);
  ASSERT_EQ(rename((dir_ + "/../kubelet-away.sock").c_str(), (dir_ + "/kubelet.sock").c_str()), 0);
  ASSERT_EQ(kubelet->WaitFor(2).size(), 2u);

  kubelet.reset();
  std::filesystem::remove_all(dir_);
  std::filesystem::create_directories(dir_);
  kubelet = std::make_unique<FakeKubelet>(dir_ + "/kubelet.sock");
  auto reqs = kubelet->WaitFor(1);
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/fabric-rdma-ib.sock"));
}

TEST_F(DevicePluginWorkerTest, SocketsAreMode0600WhateverTheUmask) {
  const mode_t old = umask(0);
  Start(kIb);
  umask(old);
  struct stat st {};
  ASSERT_EQ(lstat(plugins_->SocketPath("rdma/ib").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
}

// Bytes that are not UTF-8 in an ID: INVALID_ARGUMENT naming the field, counted.
TEST_F(DevicePluginWorkerTest, ANonUtf8IdIsInvalidArgumentNamingTheField) {
  Start(kIb);
  Publish(testing::DiscoveredExampleHost("dgx-h100-ib"));
  const std::string bytes = testing::AllocateBytes("mlx5_\xff");
  for (int i = 0; i < 3; ++i) {
    grpc::Status s = testing::RawAllocate(plugins_->SocketPath("rdma/ib"), bytes);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(s.error_message(),
                HasSubstr("AllocateRequest.container_requests[0].devices_ids[0] is not UTF-8: "
                          "\"mlx5_\\xff\""));
  }
  EXPECT_EQ(plugins_->counts().refused_parse, 3u);
}

}  // namespace
}  // namespace fabric
