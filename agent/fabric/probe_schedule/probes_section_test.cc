#include "agent/fabric/probe_schedule/probes_section.h"

#include <gtest/gtest.h>

#include <functional>
#include <limits>

#include "agent/config/config.h"

namespace fabric::probes {
namespace {

TEST(ProbesSection, ParsePeer) {
  struct Case {
    std::string text;
    bool ok;
    std::string host;
    uint16_t port;
    bool perftest = false;
  };
  const Case cases[] = {
      {"perftest:10.0.0.2", true, "10.0.0.2", 18515, true},
      {"perftest:node-b:18516", true, "node-b", 18516, true},
      {"perftest:[fd00::2]:9000", true, "fd00::2", 9000, true},
      {"perftest:", false, "", 0},
      {"perftest:perftest:h", false, "", 0},
      {"10.0.0.2", true, "10.0.0.2", 18515},
      {"10.0.0.2:7000", true, "10.0.0.2", 7000},
      {"node-b.example", true, "node-b.example", 18515},
      {"node-b:1", true, "node-b", 1},
      {"[fd00::2]:9000", true, "fd00::2", 9000},
      {"[fd00::2]", true, "fd00::2", 18515},
      {"fd00::2", true, "fd00::2", 18515},  // a bare IPv6 address: no port
      {"fe80::1%eth0", true, "fe80::1%eth0", 18515},
      {"", false, "", 0},
      {":7000", false, "", 0},
      {"host:", false, "", 0},
      {"host:0", false, "", 0},
      {"host:65536", false, "", 0},
      {"host:http", false, "", 0},
      {"[fd00::2", false, "", 0},
      {"[fd00::2]x", false, "", 0},
      {"[fd00::2]:", false, "", 0},
      {"a b", false, "", 0},
      {"host/24", false, "", 0},
      {std::string(254, 'a'), false, "", 0},
  };
  for (const Case& c : cases) {
    absl::StatusOr<Peer> p = ParsePeer(c.text, 18515);
    ASSERT_EQ(p.ok(), c.ok) << "\"" << c.text << "\": " << p.status();
    if (!c.ok) continue;
    EXPECT_EQ(p->host, c.host) << c.text;
    EXPECT_EQ(p->port, c.port) << c.text;
    EXPECT_EQ(p->perftest, c.perftest) << c.text;
    EXPECT_EQ(p->name, c.text);
  }
}

TEST(ProbesSection, Validation) {
  struct Case {
    std::string what;
    std::function<void(v1::ProbeSchedule*)> set;
    std::string error;  // Empty: valid.
  };
  const Case cases[] = {
      {"empty", [](v1::ProbeSchedule*) {}, ""},
      {"peers", [](v1::ProbeSchedule* s) { s->add_peers("10.0.0.2:7000"); }, ""},
      {"bad peer", [](v1::ProbeSchedule* s) { s->add_peers("x:y"); }, "probes.peers[0]"},
      {"dns", [](v1::ProbeSchedule* s) { s->set_peer_dns("agents.fabric.svc"); }, ""},
      {"dns with port", [](v1::ProbeSchedule* s) { s->set_peer_dns("agents:80"); },
       "probes.peerDns"},
      {"perftest peer", [](v1::ProbeSchedule* s) { s->add_peers("perftest:10.0.0.2"); }, ""},
      {"perftest dns", [](v1::ProbeSchedule* s) { s->set_peer_dns("perftest:agents"); },
       "probes.peerDns"},
      {"perftest latency by duration",
       [](v1::ProbeSchedule* s) {
         s->add_peers("perftest:10.0.0.2");
         s->add_tests("write_lat");
         s->set_duration_seconds(5);
       },
       "probes.peers[0]"},
      {"perftest bandwidth by duration",
       [](v1::ProbeSchedule* s) {
         s->add_peers("perftest:10.0.0.2");
         s->add_tests("write_bw");
         s->set_duration_seconds(5);
       },
       ""},
      {"port", [](v1::ProbeSchedule* s) { s->set_port(70000); }, "probes.port"},
      {"test", [](v1::ProbeSchedule* s) { s->add_tests("write_lat"); }, ""},
      {"unknown test",
       [](v1::ProbeSchedule* s) {
         s->add_tests("read_lat");
         s->add_tests("atomic_bw");
       },
       "probes.tests[1]"},
      {"interval", [](v1::ProbeSchedule* s) { s->set_interval_seconds(8 * 24 * 3600); },
       "probes.intervalSeconds"},
      {"jitter 0", [](v1::ProbeSchedule* s) { s->set_jitter(0); }, ""},
      {"jitter", [](v1::ProbeSchedule* s) { s->set_jitter(0.95); }, "probes.jitter"},
      {"negative jitter", [](v1::ProbeSchedule* s) { s->set_jitter(-0.1); }, "probes.jitter"},
      {"devices", [](v1::ProbeSchedule* s) { s->add_devices("mlx5_1"); }, ""},
      {"bad device", [](v1::ProbeSchedule* s) { s->add_devices("../mlx5"); }, "probes.devices[0]"},
      {"remote same", [](v1::ProbeSchedule* s) { s->set_remote_device("same"); }, ""},
      {"remote any", [](v1::ProbeSchedule* s) { s->set_remote_device("any"); }, ""},
      {"remote name", [](v1::ProbeSchedule* s) { s->set_remote_device("mlx5_3"); }, ""},
      {"remote bad", [](v1::ProbeSchedule* s) { s->set_remote_device("mlx5 3"); },
       "probes.remoteDevice"},
      {"both counts",
       [](v1::ProbeSchedule* s) {
         s->set_iterations(10);
         s->set_duration_seconds(1);
       },
       "probes.iterations"},
      {"size 0 is the default", [](v1::ProbeSchedule* s) { s->set_size(0); }, ""},
      {"huge size", [](v1::ProbeSchedule* s) { s->set_size(uint64_t{1} << 40); },
       "probes.write_bw"},
      {"timeout", [](v1::ProbeSchedule* s) { s->set_timeout_seconds(301); },
       "probes.timeoutSeconds"},
      {"fraction", [](v1::ProbeSchedule* s) { s->set_degraded_fraction(0.9); }, ""},
      {"fraction > 1", [](v1::ProbeSchedule* s) { s->set_degraded_fraction(1.5); },
       "probes.degradedFraction"},
      {"fraction NaN",
       [](v1::ProbeSchedule* s) {
         s->set_degraded_fraction(std::numeric_limits<double>::quiet_NaN());
       },
       "probes.degradedFraction"},
      {"history", [](v1::ProbeSchedule* s) { s->set_history(kMaxHistory + 1); }, "probes.history"},
      {"memory host", [](v1::ProbeSchedule* s) { s->set_memory("host"); }, ""},
      {"memory dma-buf", [](v1::ProbeSchedule* s) { s->set_memory("gpu-dmabuf"); }, ""},
      {"memory peermem", [](v1::ProbeSchedule* s) { s->set_memory("gpu-peermem"); }, ""},
      {"memory unknown", [](v1::ProbeSchedule* s) { s->set_memory("gpu"); },
       "probes.memory: \"gpu\": host, gpu-dmabuf or gpu-peermem"},
  };
  for (const Case& c : cases) {
    v1::ProbeSchedule s;
    c.set(&s);
    absl::Status st = ValidateSchedule(s);
    if (c.error.empty()) {
      EXPECT_TRUE(st.ok()) << c.what << ": " << st;
    } else {
      EXPECT_FALSE(st.ok()) << c.what;
      EXPECT_NE(st.message().find(c.error), std::string::npos) << c.what << ": " << st;
    }
  }
}

TEST(ProbesSection, Defaults) {
  v1::ProbeSchedule s;
  EXPECT_FALSE(ScheduleEnabled(s));
  EXPECT_EQ(PeerPort(s), 18515);
  EXPECT_EQ(Interval(s), absl::Seconds(300));
  EXPECT_EQ(Jitter(s), 0.1);
  EXPECT_EQ(StepTimeout(s), absl::Seconds(10));
  EXPECT_EQ(HistorySize(s), kDefaultHistory);
  EXPECT_EQ(Tests(s), (std::vector<TestKind>{TestKind::kWriteBw, TestKind::kWriteLat}));
  s.set_peer_dns("agents");
  EXPECT_TRUE(ScheduleEnabled(s));
  s.set_jitter(0);
  EXPECT_EQ(Jitter(s), 0);  // explicitly none, not the default
  s.add_tests("read_lat");
  EXPECT_EQ(Tests(s), std::vector<TestKind>{TestKind::kReadLat});
}

TEST(ProbesSection, ScheduledParamsAreBoundedAndOverridable) {
  v1::ProbeSchedule s;
  ProbeParams bw = ScheduledParams(s, TestKind::kWriteBw, Transport::kRdma);
  EXPECT_EQ(bw.size, 65536u);
  EXPECT_EQ(bw.iterations, 1000u);  // not perftest's 5000 in the background
  ProbeParams lat = ScheduledParams(s, TestKind::kSendLat, Transport::kTcp);
  EXPECT_EQ(lat.size, 2u);
  EXPECT_EQ(lat.iterations, 1000u);
  EXPECT_EQ(lat.transport, Transport::kTcp);
  EXPECT_LE(lat.inline_size, lat.size);
  EXPECT_TRUE(ValidateParams(lat).ok());
  s.set_size(4096);
  s.set_duration_seconds(3);
  s.set_rdma_cm(true);
  ProbeParams d = ScheduledParams(s, TestKind::kReadBw, Transport::kRdma);
  EXPECT_EQ(d.size, 4096u);
  EXPECT_EQ(d.iterations, 0u);
  EXPECT_EQ(d.duration, absl::Seconds(3));
  EXPECT_TRUE(d.rdma_cm);
  EXPECT_FALSE(ScheduledParams(s, TestKind::kReadBw, Transport::kTcp).rdma_cm);
}

TEST(ProbesSection, ParseConfigChecksTheSection) {
  // The one loader checks the probes section too: a config with a bad one is refused whole.
  absl::StatusOr<v1::AgentConfig> ok = ParseConfig(R"({"probes": {"peers": ["10.0.0.2:7000"]}})");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->probes().peers(0), "10.0.0.2:7000");
  absl::StatusOr<v1::AgentConfig> bad = ParseConfig(R"({"probes": {"tests": ["atomic_bw"]}})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("config: probes.tests[0]"), std::string::npos)
      << bad.status();
}

}  // namespace
}  // namespace fabric::probes
