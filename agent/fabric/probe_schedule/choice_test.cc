// The choices fabric-probe and fabricctl share: how "auto" picks the transport, and how
// fabricctl probes reads its filters.
#include <gtest/gtest.h>

#include <string>

#include "agent/fabric/probe_schedule/filter.h"
#include "agent/fabric/probes/params.h"

namespace fabric::probes {
namespace {

// The one rule the CLI, RunProbe and the perftest peer share: GPU memory for RDMA bandwidth
// tests only.
TEST(CheckGpuMemory, OnlyRdmaBandwidthTestsTakeAGpuBuffer) {
  struct Case {
    TestKind test;
    Transport transport;
    bool gpu;
    std::string error;  // empty: OK
  };
  const Case cases[] = {
      {TestKind::kWriteBw, Transport::kRdma, true, ""},
      {TestKind::kReadBw, Transport::kRdma, true, ""},
      {TestKind::kSendBw, Transport::kRdma, true, ""},
      {TestKind::kWriteLat, Transport::kRdma, true, "the latency tests poll their buffer"},
      {TestKind::kReadLat, Transport::kRdma, true, "the latency tests poll their buffer"},
      {TestKind::kWriteBw, Transport::kTcp, true, "GPU memory needs the rdma transport"},
      // Host memory is always fine.
      {TestKind::kWriteLat, Transport::kTcp, false, ""},
  };
  for (const Case& c : cases) {
    ProbeParams p;
    p.test = c.test;
    p.transport = c.transport;
    Endpoint local;
    if (c.gpu) local.gpu = gpumem::GpuRequest{};
    SCOPED_TRACE(std::string(TestName(c.test)) + (c.gpu ? " gpu" : " host"));
    absl::Status s = CheckGpuMemory(p, local);
    if (c.error.empty()) {
      EXPECT_TRUE(s.ok()) << s;
    } else {
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
      EXPECT_NE(s.message().find(c.error), absl::string_view::npos) << s;
    }
  }
}

TEST(ChooseTransport, FallsBackToTcpOnlyWhenNothingAskedForRdma) {
  struct Case {
    std::string asked;
    bool device_named, rdma_cm, have_device;
    absl::StatusCode code;
    Transport transport;
    bool fell_back;
  };
  const Case cases[] = {
      {"auto", false, false, true, absl::StatusCode::kOk, Transport::kRdma, false},
      {"", false, false, true, absl::StatusCode::kOk, Transport::kRdma, false},
      {"auto", false, false, false, absl::StatusCode::kOk, Transport::kTcp, true},
      {"", false, false, false, absl::StatusCode::kOk, Transport::kTcp, true},
      // A named device or rdma_cm means RDMA: its absence fails later, visibly.
      {"auto", true, false, false, absl::StatusCode::kOk, Transport::kRdma, false},
      {"auto", false, true, false, absl::StatusCode::kOk, Transport::kRdma, false},
      {"tcp", false, false, true, absl::StatusCode::kOk, Transport::kTcp, false},
      {"tcp", false, false, false, absl::StatusCode::kOk, Transport::kTcp, false},
      {"tcp", false, true, true, absl::StatusCode::kInvalidArgument, Transport::kTcp, false},
      {"rdma", false, false, true, absl::StatusCode::kOk, Transport::kRdma, false},
      {"rdma", false, false, false, absl::StatusCode::kFailedPrecondition, Transport::kRdma, false},
      {"ib", false, false, true, absl::StatusCode::kInvalidArgument, Transport::kRdma, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.asked + (c.device_named ? " device" : "") + (c.rdma_cm ? " rdma_cm" : "") +
                 (c.have_device ? " have" : " none"));
    absl::StatusOr<TransportChoice> t =
        ChooseTransport(c.asked, c.device_named, c.rdma_cm, c.have_device);
    ASSERT_EQ(t.status().code(), c.code) << t.status();
    if (!t.ok()) continue;
    EXPECT_EQ(t->transport, c.transport);
    EXPECT_EQ(!t->fallback.empty(), c.fell_back) << t->fallback;
  }
}

TEST(ParseResultFilter, AcceptsWhatTheTablePrints) {
  struct Case {
    std::string peer, device, test;
    std::string want_peer, want_device;
    uint32_t want_port;
    std::string want_test;
  };
  const Case cases[] = {
      {"", "", "", "", "", 0, ""},
      {"10.0.0.2", "", "", "10.0.0.2", "", 0, ""},
      {"node-b:18515", "", "", "node-b:18515", "", 0, ""},
      {"", "mlx5_1:1", "", "", "mlx5_1", 1, ""},
      {"", "mlx5_1", "", "", "mlx5_1", 0, ""},
      {"", "rxe0:254", "", "", "rxe0", 254, ""},
      {"", "", "write_bw", "", "", 0, "write_bw"},
      {"", "", "read_lat", "", "", 0, "read_lat"},
      {"127.0.0.1:9", "mlx5_0:2", "send_bw", "127.0.0.1:9", "mlx5_0", 2, "send_bw"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.peer + " | " + c.device + " | " + c.test);
    absl::StatusOr<v1::ListProbeResultsRequest> r = ParseResultFilter(c.peer, c.device, c.test);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->peer(), c.want_peer);
    EXPECT_EQ(r->device(), c.want_device);
    EXPECT_EQ(r->port(), c.want_port);
    EXPECT_EQ(r->test(), c.want_test);
  }
}

TEST(ParseResultFilter, RejectsWhatNoRowCanMatch) {
  struct Case {
    std::string peer, device, test;
    std::string message;  // the whole message, or its start
  };
  const Case cases[] = {
      {"", "", "bogus",
       "--test: unknown test \"bogus\" (write_bw, write_lat, send_bw, send_lat, read_bw, "
       "read_lat)"},
      {"", "", "atomic_bw", "--test: unknown test \"atomic_bw\""},
      {"", "mlx5_1:0", "", "--device: \"mlx5_1:0\" is not DEVICE or DEVICE:PORT"},
      {"", "mlx5_1:255", "", "--device: \"mlx5_1:255\""},
      {"", "mlx5_1:x", "", "--device: \"mlx5_1:x\""},
      {"", "mlx5_1:", "", "--device: \"mlx5_1:\""},
      {"", ":1", "", "--device: \":1\""},
      {"", "-", "", "--device: \"-\""},
      {"", "../x", "", "--device: \"../x\""},
      {"a b", "", "", "--peer: "},
      {"h:0", "", "", "--peer: "},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.peer + " | " + c.device + " | " + c.test);
    absl::StatusOr<v1::ListProbeResultsRequest> r = ParseResultFilter(c.peer, c.device, c.test);
    ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    EXPECT_EQ(r.status().message().substr(0, c.message.size()), c.message) << r.status();
  }
}

TEST(TestNames, ListsEveryTestOnce) {
  const std::vector<std::string> names = TestNames();
  ASSERT_EQ(names.size(), 6u);
  for (const std::string& n : names) EXPECT_TRUE(ParseTestName(n).has_value()) << n;
  EXPECT_EQ(TestNamesText(), "write_bw, write_lat, send_bw, send_lat, read_bw, read_lat");
}

}  // namespace
}  // namespace fabric::probes
