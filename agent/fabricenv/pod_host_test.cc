#include "agent/fabricenv/pod_host.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "absl/strings/str_cat.h"
#include "agent/fabricenv/pod_view.h"
#include "agent/launch/job_scope.h"
#include "tests/hosts/discovered.h"
#include "tests/testing/subprocess.h"

namespace fabric::podenv {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr uint32_t kPodGid = 200;

// The amd-mi300x-bnxt host as the agent publishes it, with another pod's macvlan GID on
// bnxt_re0 in the pod's subnet, named net1 in that pod's namespace as ours is in ours.
v1::PublishedHost Published() {
  v1::PublishedHost p;
  p.set_format(1);
  p.set_netns_inode(1000);
  *p.mutable_host() = testing::DiscoveredExampleHost("amd-mi300x-bnxt");
  for (v1::RdmaDevice& d : *p.mutable_host()->mutable_rdma_devices()) {
    if (d.name() != "bnxt_re0") continue;
    v1::Gid* g = d.mutable_ports(0)->add_gids();
    g->set_index(kPodGid + 1);
    g->set_type(v1::GID_TYPE_ROCE_V2);
    g->set_netdev("net1");
    g->set_ipv4("10.50.0.99");
  }
  return p;
}

jobenv::Pick PodPort(const std::string& dev, const std::string& ifname, const std::string& ip) {
  jobenv::Pick p;
  p.device = dev;
  p.port = 1;
  p.netdev = ifname;
  p.roce = true;
  p.gid_index = kPodGid;
  p.ipv4 = ip;
  return p;
}

// A pod with net1 on bnxt_re0 and net2 on bnxt_re4 (two rails, one subnet).
std::vector<podrecord::PodRecord> TwoRails() {
  podrecord::PodRecord r;
  r.container_id = "c1";
  r.ifname = "net1";
  r.netns_inode = 77;
  r.interfaces = {{"net1", {"10.50.0.11/24"}, ""}, {"net2", {"10.50.0.12/24"}, ""}};
  r.ports = {PodPort("bnxt_re0", "net1", "10.50.0.11"), PodPort("bnxt_re4", "net2", "10.50.0.12")};
  return {r};
}

absl::StatusOr<v1::Selection> Select(const v1::PublishedHost& p, const std::string& gpus,
                                     std::optional<uint32_t> rank = std::nullopt) {
  absl::StatusOr<v1::SelectNicsRequest> req = launch::GpuRequest(gpus);
  if (!req.ok()) return req.status();
  if (rank) req->set_rank_position(*rank);
  return launch::SelectOnHost(p.host(), p.policy(), *req, "in the test");
}

TEST(NarrowToPod, EveryGpuGetsAPodPortWithThePodsGid) {
  absl::StatusOr<v1::PublishedHost> pod = NarrowToPod(Published(), TwoRails());
  ASSERT_TRUE(pod.ok()) << pod.status();
  absl::StatusOr<v1::Selection> sel = Select(*pod, "all");
  ASSERT_TRUE(sel.ok()) << sel.status();
  ASSERT_EQ(sel->assignments_size(), 8);
  for (const v1::GpuAssignment& a : sel->assignments()) {
    EXPECT_THAT(a.rdma_device(), ::testing::AnyOf("bnxt_re0", "bnxt_re4")) << a.gpu();
    EXPECT_EQ(a.gid_index(), kPodGid) << a.gpu();
    EXPECT_EQ(a.ipv4(), a.rdma_device() == "bnxt_re0" ? "10.50.0.11" : "10.50.0.12");
    EXPECT_EQ(a.ipv4_subnet(), "10.50.0.0/24");
  }
  const auto& job = sel->job_env();
  EXPECT_EQ(job.at("NCCL_IB_HCA"), "=bnxt_re0:1,bnxt_re4:1");
  // One index on both ports: the pod's own, never the neighbour's 10.50.0.99 (GID 201).
  EXPECT_EQ(job.at("NCCL_IB_GID_INDEX"), absl::StrCat(kPodGid));
  EXPECT_EQ(job.at("UCX_IB_GID_INDEX"), absl::StrCat(kPodGid));
  EXPECT_EQ(job.at("NCCL_SOCKET_IFNAME"), "=net1,net2");
}

TEST(NarrowToPod, RankPinsAPodPort) {
  absl::StatusOr<v1::PublishedHost> pod = NarrowToPod(Published(), TwoRails());
  ASSERT_TRUE(pod.ok()) << pod.status();
  std::set<std::string> pinned;
  for (uint32_t rank = 0; rank < 8; ++rank) {
    absl::StatusOr<v1::Selection> sel = Select(*pod, "all", rank);
    ASSERT_TRUE(sel.ok()) << sel.status();
    pinned.insert(sel->pins().at("UCX_NET_DEVICES"));
    // Every rank of the pod sees the same NCCL lines.
    EXPECT_EQ(sel->job_env().at("NCCL_IB_HCA"), "=bnxt_re0:1,bnxt_re4:1");
  }
  EXPECT_EQ(pinned, (std::set<std::string>{"bnxt_re0:1", "bnxt_re4:1"}));
}

TEST(NarrowToPod, AddsThePodsGidWhenTheHostIsOlder) {
  std::vector<podrecord::PodRecord> recs = TwoRails();
  recs[0].ports[0].gid_index = 4000;  // not in the published table
  recs[0].ports[1].gid_index = 4000;
  absl::StatusOr<v1::PublishedHost> pod = NarrowToPod(Published(), recs);
  ASSERT_TRUE(pod.ok()) << pod.status();
  absl::StatusOr<v1::Selection> sel = Select(*pod, "0");
  ASSERT_TRUE(sel.ok()) << sel.status();
  EXPECT_EQ(sel->assignments(0).gid_index(), 4000u);
}

TEST(NarrowToPod, Refusals) {
  std::vector<podrecord::PodRecord> none = TwoRails();
  none[0].ports.clear();
  absl::StatusOr<v1::PublishedHost> a = NarrowToPod(Published(), none);
  EXPECT_TRUE(absl::IsFailedPrecondition(a.status()));
  EXPECT_THAT(std::string(a.status().message()), HasSubstr("(net1, net2) carry no RDMA device"));
  std::vector<podrecord::PodRecord> unknown = TwoRails();
  unknown[0].ports[1].device = "mlx5_9";
  absl::StatusOr<v1::PublishedHost> b = NarrowToPod(Published(), unknown);
  EXPECT_TRUE(absl::IsFailedPrecondition(b.status()));
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("mlx5_9 is not in the published"));
}

TEST(SelectPodPorts, APodWithoutGpusGetsItsPorts) {
  absl::StatusOr<v1::PublishedHost> pod = NarrowToPod(Published(), TwoRails());
  ASSERT_TRUE(pod.ok()) << pod.status();
  v1::SelectNicsRequest req;
  req.set_all(true);
  req.set_consumers("nccl,ucx");
  absl::StatusOr<v1::Selection> sel = SelectPodPorts(*pod, req);
  ASSERT_TRUE(sel.ok()) << sel.status();
  EXPECT_EQ(sel->job_env().at("NCCL_IB_HCA"), "=bnxt_re0:1,bnxt_re4:1");
  EXPECT_EQ(sel->job_env().at("NCCL_IB_GID_INDEX"), absl::StrCat(kPodGid));
  EXPECT_EQ(sel->job_env().at("UCX_NET_DEVICES"), "bnxt_re0:1,bnxt_re4:1");
  EXPECT_FALSE(sel->job_env().contains("MC_TE_FILTERS"));  // consumers as asked
  EXPECT_TRUE(sel->pins().empty());
  EXPECT_EQ(sel->consumers(), "nccl,ucx");
  req.set_consumers("nosuch");
  EXPECT_TRUE(absl::IsInvalidArgument(SelectPodPorts(*pod, req).status()));
}

TEST(NarrowToDevices, KeepsOnlyTheGivenNics) {
  absl::StatusOr<v1::PublishedHost> p = NarrowToDevices(Published(), "bnxt_re2,bnxt_re3");
  ASSERT_TRUE(p.ok()) << p.status();
  absl::StatusOr<v1::Selection> sel = Select(*p, "all");
  ASSERT_TRUE(sel.ok()) << sel.status();
  EXPECT_EQ(sel->job_env().at("NCCL_IB_HCA"), "=bnxt_re2:1,bnxt_re3:1");
  // The host's own GIDs and interface stay.
  EXPECT_EQ(sel->job_env().at("NCCL_SOCKET_IFNAME"), "=eno8303");
  EXPECT_TRUE(absl::IsInvalidArgument(NarrowToDevices(Published(), "bnxt_re2,mlx5_0").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(NarrowToDevices(Published(), " , ").status()));
}

class ViewForTest : public ::testing::Test {
 protected:
  void Write(const podrecord::PodRecord& r) {
    std::ofstream(
        absl::StrCat(dir_, "/", podrecord::FileName(r.netns_inode, r.container_id, r.ifname)))
        << podrecord::RecordJson(r);
  }
  hostfile::HostFile File() { return {Published(), absl::Now()}; }
  const std::string dir_ = testing::MakeTempDir("podview");
  Here pod_{
      .netns_inode = 77,
      .interfaces = {{"lo", {"127.0.0.1"}}, {"net1", {"10.50.0.11"}}, {"net2", {"10.50.0.12"}}},
      .devices = ""};
};

TEST_F(ViewForTest, OnTheHostTheFileIsAsPublished) {
  Here host = pod_;
  host.netns_inode = 1000;
  absl::StatusOr<View> v = ViewFor(File(), dir_, host);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->file.published.host().rdma_devices_size(), 8);
  EXPECT_TRUE(v->provenance.empty());
  host.devices = "bnxt_re1";
  v = ViewFor(File(), dir_, host);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->file.published.host().rdma_devices_size(), 1);
  EXPECT_THAT(v->provenance.at(0), HasSubstr("FABRIC_RDMA_DEVICES=bnxt_re1"));
}

TEST_F(ViewForTest, APodReadsTheRecordsOfItsNamespace) {
  for (podrecord::PodRecord r : TwoRails()) Write(r);
  podrecord::PodRecord other = TwoRails()[0];
  other.netns_inode = 78;  // another pod's
  other.container_id = "c2";
  other.ports.resize(1);
  Write(other);
  absl::StatusOr<View> v = ViewFor(File(), dir_, pod_);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->file.published.host().rdma_devices_size(), 2);
  EXPECT_THAT(v->provenance.at(0), HasSubstr("net1: bnxt_re0:1 GID 200, net2: bnxt_re4:1 GID 200"));
  EXPECT_TRUE(v->notes.empty());
}

TEST_F(ViewForTest, APodWithoutAValidRecordHasNoAnswer) {
  absl::StatusOr<View> none = ViewFor(File(), dir_, pod_);
  EXPECT_TRUE(absl::IsFailedPrecondition(none.status()));
  EXPECT_THAT(std::string(none.status().message()), HasSubstr("inode 77, not the host's"));
  // A dead pod's record under a reused inode: its addresses are not ours.
  podrecord::PodRecord stale = TwoRails()[0];
  stale.interfaces = {{"net1", {"10.50.0.200/24"}, ""}};
  Write(stale);
  std::ofstream(absl::StrCat(dir_, "/77-junk-net9.json")) << "{not json";
  absl::StatusOr<View> v = ViewFor(File(), dir_, pod_);
  EXPECT_TRUE(absl::IsFailedPrecondition(v.status()));
  EXPECT_THAT(std::string(v.status().message()), HasSubstr("holds none of the record's"));
  EXPECT_THAT(std::string(v.status().message()), HasSubstr("77-junk-net9.json skipped"));
  // No directory at all is the same answer, not a crash.
  EXPECT_TRUE(
      absl::IsFailedPrecondition(ViewFor(File(), absl::StrCat(dir_, "/absent"), pod_).status()));
}

TEST(RecordsDir, BesideTheHostFile) {
  EXPECT_EQ(RecordsDirOf("/run/fabric-env/host.pb"), "/run/fabric-env/pods");
  EXPECT_EQ(RecordsDirOf("host.pb"), "./pods");
  EXPECT_EQ(RecordsDirOf("/host.pb"), "/pods");
}

}  // namespace
}  // namespace fabric::podenv
