#include "agent/fabric/probe_schedule/schedule.h"

#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "agent/policy/select/pairing.h"
#include "tests/hosts/discovered.h"

namespace fabric::probes {
namespace {

using testing::DiscoveredExampleHost;

TEST(Schedule, NextRoundDelayStaysWithinTheJitter) {
  v1::ProbeSchedule s;
  s.set_interval_seconds(100);
  s.set_jitter(0.2);
  EXPECT_EQ(NextRoundDelay(s, 0), absl::Seconds(80));
  EXPECT_EQ(NextRoundDelay(s, 0.5), absl::Seconds(100));
  EXPECT_EQ(NextRoundDelay(s, 1), absl::Seconds(120));
  EXPECT_EQ(NextRoundDelay(s, 7), absl::Seconds(120));  // clamped
  s.set_jitter(0);
  EXPECT_EQ(NextRoundDelay(s, 0.9), absl::Seconds(100));
}

TEST(Schedule, SourcesAreTheBackEndPortsOfTheHost) {
  const v1::Host& host = DiscoveredExampleHost("roce-9port");
  ASSERT_GT(host.rdma_devices_size(), 0);
  v1::SelectionPolicy policy;
  v1::ProbeSchedule s;
  std::vector<ProbeSource> src = ProbeSources(host, policy, s);
  // mlx5_0 carries the default route (front-end): mlx5_1..mlx5_8, in natural order.
  ASSERT_EQ(src.size(), 8u);
  for (size_t i = 0; i < src.size(); ++i) {
    EXPECT_EQ(src[i].device, "mlx5_" + std::to_string(i + 1));
    EXPECT_EQ(src[i].port, 1u);
  }
  policy.add_deny("mlx5_2");
  policy.add_deny("eth8");  // mlx5_8's netdev
  src = ProbeSources(host, policy, s);
  EXPECT_EQ(src.size(), 6u);
  for (const ProbeSource& p : src) {
    EXPECT_NE(p.device, "mlx5_2");
    EXPECT_NE(p.device, "mlx5_8");
  }
  s.add_devices("mlx5_0");
  s.add_devices("mlx5_99");  // not on this host: the test then says so
  src = ProbeSources(host, policy, s);
  EXPECT_EQ(src, (std::vector<ProbeSource>{{"mlx5_0", 1}, {"mlx5_99", 1}}));

  v1::Host none;
  EXPECT_EQ(ProbeSources(none, policy, s), std::vector<ProbeSource>{ProbeSource{}});
}

TEST(Schedule, SourcesLeaveOutVfs) {
  const v1::Host& host = DiscoveredExampleHost("dgx-h100-ib");
  std::vector<ProbeSource> src = ProbeSources(host, {}, {});
  ASSERT_FALSE(src.empty());
  for (const ProbeSource& p : src) {
    for (const v1::RdmaDevice& d : host.rdma_devices()) {
      if (d.name() == p.device) {
        EXPECT_NE(d.pci().sriov().role(), v1::SRIOV_ROLE_VF) << p.device;
      }
    }
  }
}

// The schedule's GPU memory: each NIC's paired GPU (PairingOf), by PCI address, of its vendor;
// host memory, and why, where there is none.
TEST(Schedule, GpuMemoryIsThePairedGpus) {
  for (const char* name : {"dgx-h100-ib", "amd-mi300x-bnxt"}) {
    SCOPED_TRACE(name);
    const v1::Host& host = DiscoveredExampleHost(name);
    const v1::SelectionPolicy policy;
    v1::ProbeSchedule s;
    s.set_memory("gpu-dmabuf");
    const v1::GpuPairing pairing = PairingOf(host, policy);
    ASSERT_GT(pairing.pairs_size(), 0);
    std::set<std::string> checked;
    for (const v1::GpuPair& pair : pairing.pairs()) {
      if (!checked.insert(pair.rdma_device()).second) continue;  // the first GPU in PCI order
      std::string why = "stale";
      std::optional<gpumem::GpuRequest> r = ScheduledGpu(
          host, policy, s, pair.rdma_device(), TestKind::kWriteBw, Transport::kRdma, &why);
      ASSERT_TRUE(r.has_value()) << pair.rdma_device();
      EXPECT_EQ(why, "");
      EXPECT_EQ(r->device, pair.gpu());
      EXPECT_EQ(r->vendor, std::string(name) == "dgx-h100-ib" ? gpumem::GpuVendor::kCuda
                                                              : gpumem::GpuVendor::kRocm);
      EXPECT_TRUE(r->dmabuf);
      EXPECT_EQ(r->host_root,
                std::string(absl::StripSuffix(host.sysfs_root(), "/sys")));  // its /proc too
    }
    const std::string device = pairing.pairs(0).rdma_device();
    std::string why;
    s.set_memory("gpu-peermem");
    std::optional<gpumem::GpuRequest> peer =
        ScheduledGpu(host, policy, s, device, TestKind::kReadBw, Transport::kRdma, &why);
    ASSERT_TRUE(peer.has_value());
    EXPECT_FALSE(peer->dmabuf);
    // Latency tests poll their buffer from the CPU: host memory, nothing to explain.
    EXPECT_FALSE(
        ScheduledGpu(host, policy, s, device, TestKind::kWriteLat, Transport::kRdma, &why));
    EXPECT_EQ(why, "");
    EXPECT_FALSE(ScheduledGpu(host, policy, s, "", TestKind::kWriteBw, Transport::kTcp, &why));
    EXPECT_EQ(why, "no RDMA device: the test runs over TCP");
    // Host memory asked (explicitly or by default): nothing paired is looked at.
    for (const char* memory : {"host", ""}) {
      s.set_memory(memory);
      EXPECT_FALSE(
          ScheduledGpu(host, policy, s, device, TestKind::kWriteBw, Transport::kRdma, &why));
      EXPECT_EQ(why, "");
    }
  }
  // A NIC no GPU is paired with: roce-9port's front-end mlx5_0, or a name not on the host.
  const v1::Host& amd = DiscoveredExampleHost("amd-mi300x-bnxt");
  v1::ProbeSchedule s;
  s.set_memory("gpu-dmabuf");
  std::string why;
  EXPECT_FALSE(ScheduledGpu(amd, {}, s, "mlx5_99", TestKind::kWriteBw, Transport::kRdma, &why));
  EXPECT_EQ(why, "no GPU is paired with mlx5_99");
  // A GPU of another vendor paired with the NIC: no memory path here.
  v1::Host other = amd;
  for (v1::Accelerator& a : *other.mutable_accelerators()) {
    a.set_vendor(v1::ACCELERATOR_VENDOR_INTEL);
    a.set_vendor_name("Intel");
  }
  const v1::GpuPairing pairing = PairingOf(amd, {});
  ASSERT_GT(pairing.pairs_size(), 0);
  *other.mutable_pairing() = pairing;
  EXPECT_FALSE(ScheduledGpu(other, {}, s, pairing.pairs(0).rdma_device(), TestKind::kWriteBw,
                            Transport::kRdma, &why));
  EXPECT_EQ(why, absl::StrCat(pairing.pairs(0).rdma_device(), "'s GPU ", pairing.pairs(0).gpu(),
                              " (Intel) has no GPU memory path here (CUDA and ROCm only)"));
}

TEST(Schedule, RemoteDevice) {
  v1::ProbeSchedule s;
  EXPECT_EQ(RemoteDevice(s, "mlx5_3"), "mlx5_3");
  s.set_remote_device("any");
  EXPECT_EQ(RemoteDevice(s, "mlx5_3"), "");
  s.set_remote_device("");
  EXPECT_EQ(RemoteDevice(s, "mlx5_3"), "");
  s.set_remote_device("mlx5_1");
  EXPECT_EQ(RemoteDevice(s, "mlx5_3"), "mlx5_1");
}

ProbeResult BwResult(double avg) {
  ProbeResult r;
  r.params = DefaultParams(TestKind::kWriteBw);
  r.device = "mlx5_1";
  r.ib_port = 1;
  r.gid_index = 3;
  r.peer = "10.0.0.2";
  r.iterations = 5000;
  r.bw = BandwidthResult{std::optional<double>(avg + 1), avg, avg / 0.524288};
  return r;
}

TEST(Schedule, ResultProtoRoundTrips) {
  ProbeResult bw = BwResult(350);
  v1::ProbeResult p = ResultProto(bw);
  EXPECT_TRUE(p.ok());
  EXPECT_EQ(p.test(), "write_bw");
  EXPECT_EQ(p.transport(), "rdma");
  EXPECT_EQ(p.gid_index(), 3u);
  EXPECT_EQ(p.bw_avg_gbps(), 350);
  EXPECT_FALSE(p.has_t_typical_us());
  ProbeResult back = ResultFromProto(p);
  EXPECT_EQ(back.params.test, bw.params.test);
  EXPECT_EQ(back.params.size, bw.params.size);
  EXPECT_EQ(back.device, "mlx5_1");
  EXPECT_EQ(back.gid_index, 3);
  ASSERT_TRUE(back.bw.has_value());
  EXPECT_EQ(*back.bw->peak_gbps, 351);
  EXPECT_FALSE(back.lat.has_value());

  ProbeResult lat;
  lat.params = DefaultParams(TestKind::kReadLat);
  lat.params.transport = Transport::kTcp;
  lat.peer = "10.0.0.3";
  lat.iterations = 998;
  lat.lat = LatencyResult{998, 1, 9, 2, 2.5, 0.75, 8, 9};
  p = ResultProto(lat);
  EXPECT_EQ(p.transport(), "tcp");
  EXPECT_FALSE(p.has_gid_index());  // no GID over TCP
  EXPECT_FALSE(p.has_bw_avg_gbps());
  back = ResultFromProto(p);
  ASSERT_TRUE(back.lat.has_value());
  EXPECT_EQ(back.lat->typical_us, 2);
  EXPECT_EQ(back.lat->stdev_us, 0.75);
  EXPECT_EQ(back.params.transport, Transport::kTcp);

  v1::ProbeResult failed =
      FailedResultProto(DefaultParams(TestKind::kSendBw), absl::UnavailableError("peer closed"));
  EXPECT_FALSE(failed.ok());
  EXPECT_EQ(failed.error_code(), "UNAVAILABLE");
  EXPECT_EQ(failed.error(), "peer closed");
  EXPECT_EQ(failed.test(), "send_bw");
}

TEST(Schedule, RateShareAndDegradedFindings) {
  const v1::Host& host = DiscoveredExampleHost("roce-9port");  // 400 Gb/s back-end ports
  auto result = [&](const std::string& dev, const std::string& peer, double avg, double fraction) {
    ProbeResult r = BwResult(avg);
    r.device = dev;
    v1::ProbeResult p = ResultProto(r);
    p.set_peer(peer);
    RateShare(host, fraction, &p);
    return p;
  };
  v1::ProbeResult good = result("mlx5_1", "b", 380, 0.9);
  EXPECT_EQ(good.port_rate_gbps(), 400);
  EXPECT_DOUBLE_EQ(good.fraction_of_rate(), 0.95);
  EXPECT_FALSE(good.degraded());
  v1::ProbeResult bad = result("mlx5_1", "c", 200, 0.9);
  EXPECT_TRUE(bad.degraded());
  EXPECT_FALSE(result("mlx5_1", "c", 200, 0).degraded());  // 0: never degraded

  // TCP and latency results have no share of the rate.
  ProbeResult tcp = BwResult(1);
  tcp.params.transport = Transport::kTcp;
  v1::ProbeResult t = ResultProto(tcp);
  RateShare(host, 0.9, &t);
  EXPECT_FALSE(t.has_fraction_of_rate());

  // Newest first: mlx5_1's latest result for c is bad, mlx5_2's bad one was followed by a good.
  std::vector<v1::ProbeResult> newest_first = {
      bad, good, result("mlx5_2", "b", 390, 0.9), result("mlx5_2", "b", 100, 0.9),
      FailedResultProto(DefaultParams(TestKind::kWriteBw), absl::UnavailableError("x"))};
  std::vector<v1::Finding> f = DegradedFindings(newest_first);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].check(), "probe");
  EXPECT_EQ(f[0].severity(), v1::SEVERITY_WARNING);
  EXPECT_EQ(f[0].subject(), "mlx5_1:1");
  EXPECT_NE(f[0].message().find("write_bw to c: 200 Gb/s, 50% of the port's 400 Gb/s"),
            std::string::npos)
      << f[0].message();
  // The good result is newer now: no finding.
  std::swap(newest_first[0], newest_first[1]);
  newest_first[0].set_peer("c");
  EXPECT_TRUE(DegradedFindings(newest_first).empty());
}

TEST(Schedule, HistoryIsBoundedNewestFirstAndFiltered) {
  ResultHistory h(3);
  for (int i = 0; i < 5; ++i) {
    v1::ProbeResult r;
    r.set_peer(i % 2 == 0 ? "a" : "b");
    r.set_test("write_bw");
    r.set_device("mlx5_1");
    EXPECT_EQ(h.Add(r).id(), static_cast<uint64_t>(i + 1));
  }
  std::vector<v1::ProbeResult> all = h.List();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].id(), 5u);
  EXPECT_EQ(all[2].id(), 3u);
  EXPECT_EQ(h.List("a").size(), 2u);
  EXPECT_EQ(h.List("", "mlx5_2").size(), 0u);
  EXPECT_EQ(h.List("", "", "write_bw", 1).size(), 1u);
  h.SetCapacity(1);
  ASSERT_EQ(h.List().size(), 1u);
  EXPECT_EQ(h.List()[0].id(), 5u);

  // Concurrent writers and readers: ids stay unique and the bound holds.
  ResultHistory c(100);
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        c.Add({});
        (void)c.List();
      }
    });
  }
  for (auto& t : ts) t.join();
  std::vector<v1::ProbeResult> l = c.List();
  ASSERT_EQ(l.size(), 100u);
  EXPECT_EQ(l[0].id(), 800u);
}

}  // namespace
}  // namespace fabric::probes
