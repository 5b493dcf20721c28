// What a probe is: the test, its parameters both sides must agree on, where it runs, and what it
// measured. Shared by the engine, the out-of-band codec and the fabric-probe CLI.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "agent/fabric/gpumem/gpu_request.h"
#include "agent/fabric/probes/numa.h"

namespace fabric::probes {

enum class TestKind : uint8_t {
  kWriteBw = 1,
  kWriteLat = 2,
  kSendBw = 3,
  kSendLat = 4,
  kReadBw = 5,
  kReadLat = 6,
};
enum class Verb { kWrite, kSend, kRead };
enum class Transport : uint8_t { kRdma = 1, kTcp = 2 };

std::string_view TestName(TestKind test);  // "write_bw", ...
std::optional<TestKind> ParseTestName(std::string_view name);
// Every test's name, in order: for flags' member checks, help and errors.
std::vector<std::string> TestNames();
std::string TestNamesText();                  // "write_bw, write_lat, ..."
std::string_view TransportName(Transport t);  // "rdma", "tcp"
Verb VerbOf(TestKind test);
bool IsLatency(TestKind test);

// How a client's transport is chosen, the one rule fabric-probe and the agent's RunProbe share.
// `asked` is "rdma", "tcp", "auto" or "" (auto). Auto is RDMA unless this host has no RDMA
// device (`have_rdma_device`, from HaveRdmaDevice()) and nothing asked for RDMA in particular
// (a device named, rdma_cm): then TCP, and `fallback` says so. A named device or rdma_cm still
// means RDMA, so that its absence is an error, not a silent change of what is measured.
// InvalidArgument for an unknown transport or tcp with rdma_cm; FailedPrecondition for "rdma"
// on a host without a device.
struct TransportChoice {
  Transport transport = Transport::kRdma;
  std::string fallback;  // Why auto chose TCP; empty when it did not fall back.
};
absl::StatusOr<TransportChoice> ChooseTransport(absl::string_view asked, bool device_named,
                                                bool rdma_cm, bool have_rdma_device);

// Bounds that keep a hostile or mistaken peer from making us allocate or loop without limit.
inline constexpr uint64_t kMaxSize = uint64_t{1} << 30;        // bytes per message
inline constexpr uint64_t kMaxIterations = uint64_t{1} << 32;  // bandwidth tests
inline constexpr uint64_t kMaxLatencyIterations = 10'000'000;  // one 8-byte sample each
inline constexpr uint32_t kMaxTxDepth = 16384;
inline constexpr uint32_t kMaxQps = 256;
inline constexpr uint32_t kMaxInline = 4096;
inline constexpr int64_t kMaxDurationMs = 24 * 3600 * 1000;
inline constexpr uint64_t kMaxTotalBuffer = uint64_t{4} << 30;  // all QPs' buffers together

// The parameters both sides must agree on; they travel in the out-of-band hello.
struct ProbeParams {
  TestKind test = TestKind::kWriteBw;
  Transport transport = Transport::kRdma;
  bool rdma_cm = false;
  uint64_t size = 65536;
  // Iterations mode when `duration` is zero; duration mode counts only what completes in the
  // `duration` window that starts after `margin` of warm-up (perftest's -D and --margin).
  uint64_t iterations = 5000;
  absl::Duration duration = absl::ZeroDuration();
  absl::Duration margin = absl::Seconds(2);
  uint32_t tx_depth = 128;
  uint32_t cq_mod = 100;
  uint32_t inline_size = 0;
  uint32_t post_list = 1;
  uint32_t num_qps = 1;
  // -T: the type of service of the rdma_cm connections (0..255; perftest's -T, with -R only);
  // -1: the kernel's default. The connecting side sets it.
  int tos = -1;
  // -a (perftest's RUN_ALL, bandwidth tests): each size from 2 B to 8 MiB in turn, `size` the
  // largest (the buffer's); perftest keeps its CQ moderation for all of them.
  bool all_sizes = false;

  bool duration_mode() const { return duration > absl::ZeroDuration(); }
  bool operator==(const ProbeParams&) const = default;
};

// perftest's defaults for `test`: bandwidth 64 KiB x 5000, tx depth 128, no inline; latency
// 2 B x 1000, tx depth 1, inline 220 for write/send.
ProbeParams DefaultParams(TestKind test);
// Where stock perftest's defaults differ from ours (--perftest), applied after the flags:
// without -Q, CQ moderation 100 but 1 above 8 KiB messages (MSG_SIZE_CQ_MOD_LIMIT), never above
// the tx depth; with -D, `duration` is perftest's whole run: a margin (without --margin a
// quarter of it, in whole seconds) either side of the measured window, which becomes
// p.duration. InvalidArgument when no window is left.
absl::Status ApplyPerftestRules(ProbeParams& p, bool cq_mod_given, bool margin_given);
// perftest's default CQ moderation for `p` (the first of the rules above; not with all_sizes).
uint32_t PerftestCqMod(const ProbeParams& p);
// The message sizes a run measures, in order: `size` alone, or with all_sizes every power of
// two from 2 B up to it (perftest's RUN_ALL).
std::vector<uint64_t> SizesToRun(const ProbeParams& p);

// Checks bounds and combinations; InvalidArgument names the offending parameter. Both the CLI
// (usage errors) and the server (a peer's hello) call it.
absl::Status ValidateParams(const ProbeParams& p);

// Bits naming the ProbeParams fields a server was told explicitly: only those must match a
// client's hello, the rest are taken from the client.
enum ParamField : uint32_t {
  kFieldSize = 1u << 0,
  kFieldIterations = 1u << 1,
  kFieldDuration = 1u << 2,
  kFieldMargin = 1u << 3,
  kFieldTxDepth = 1u << 4,
  kFieldCqMod = 1u << 5,
  kFieldInline = 1u << 6,
  kFieldPostList = 1u << 7,
  kFieldQps = 1u << 8,
  kFieldTransport = 1u << 9,
  kFieldRdmaCm = 1u << 10,
};

// OK when `client` may be served by a server configured with `server` and `explicit_fields`
// (the test itself must always match); else FailedPrecondition listing every mismatch.
absl::Status CheckParamsMatch(const ProbeParams& server, uint32_t explicit_fields,
                              const ProbeParams& client);

// One side's view of where the test runs.
struct Endpoint {
  std::string device;            // RDMA device; empty: the first one (as perftest)
  uint8_t ib_port = 1;           // -i
  std::optional<int> gid_index;  // -x; unset: chosen from the port's GID table
  std::string sysfs = "/sys";    // where the GID table is read (the agent runs with /host/sys)
  absl::Duration timeout = absl::Seconds(10);  // bound of every blocking step
  Placement placement;  // fabric-probe: perftest's NUMA placement once the device is known
  // The buffer in GPU memory (--use_cuda, --use_rocm, the schedule's `memory`): bandwidth tests
  // only, whose loops never touch the buffer from the CPU. Unset: host memory.
  std::optional<gpumem::GpuRequest> gpu;
};

// GPU memory (`local.gpu`) is for the RDMA bandwidth tests: the latency tests poll their buffer
// from the CPU, and the TCP transport moves host memory. InvalidArgument saying which, else OK.
absl::Status CheckGpuMemory(const ProbeParams& p, const Endpoint& local);

struct BandwidthResult {
  std::optional<double> peak_gbps;  // absent for TCP (socket buffers make it meaningless)
  double avg_gbps = 0;
  double msg_rate_mpps = 0;
};

struct LatencyResult {
  uint64_t samples = 0;  // after dropping the two largest
  double min_us = 0, max_us = 0, typical_us = 0, avg_us = 0, stdev_us = 0, p99_us = 0, p999_us = 0;
};

struct ProbeResult {
  ProbeParams params;
  std::string device;  // empty over TCP
  uint8_t ib_port = 0;
  int gid_index = -1;
  std::string peer;         // address the client connected to
  uint64_t iterations = 0;  // messages (bw) or round trips (lat) measured
  std::optional<BandwidthResult> bw;
  std::optional<LatencyResult> lat;
  // Where this side's buffer was: "host memory", or the GPU's name ("CUDA GPU 0000:3b:00.0
  // (dma-buf)"); empty over TCP.
  std::string memory;
  // How time was taken, printed with the results so figures are never compared blindly.
  std::string clock = "CLOCK_MONOTONIC_RAW";
  // Releasing verbs resources failed (e.g. EIO after the device was removed); the figures above
  // are still valid.
  std::string teardown_error;
};

}  // namespace fabric::probes
