#include "agent/fabric/probes/params.h"

#include <array>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/common/strings.h"

namespace fabric::probes {
namespace {

constexpr std::array<std::pair<TestKind, std::string_view>, 6> kTests = {{
    {TestKind::kWriteBw, "write_bw"},
    {TestKind::kWriteLat, "write_lat"},
    {TestKind::kSendBw, "send_bw"},
    {TestKind::kSendLat, "send_lat"},
    {TestKind::kReadBw, "read_bw"},
    {TestKind::kReadLat, "read_lat"},
}};

template <typename T>
std::string Text(const T& v) {
  if constexpr (std::is_convertible_v<T, std::string_view>) {
    return std::string(std::string_view(v));
  } else {
    return absl::StrCat(v);
  }
}

std::string Ms(absl::Duration d) { return absl::StrCat(absl::ToInt64Milliseconds(d), " ms"); }

}  // namespace

std::string_view TestName(TestKind test) {
  for (const auto& [k, name] : kTests) {
    if (k == test) return name;
  }
  return "unknown";
}

std::optional<TestKind> ParseTestName(std::string_view name) {
  for (const auto& [k, n] : kTests) {
    if (n == name) return k;
  }
  return std::nullopt;
}

std::vector<std::string> TestNames() {
  std::vector<std::string> out;
  for (const auto& [k, name] : kTests) out.emplace_back(name);
  return out;
}

std::string TestNamesText() { return absl::StrJoin(TestNames(), ", "); }

absl::StatusOr<TransportChoice> ChooseTransport(absl::string_view asked, bool device_named,
                                                bool rdma_cm, bool have_rdma_device) {
  TransportChoice c;
  if (asked == "tcp") {
    if (rdma_cm) return absl::InvalidArgumentError("rdma_cm (-R) needs the rdma transport");
    c.transport = Transport::kTcp;
  } else if (asked == "rdma") {
    if (!have_rdma_device) {
      return absl::FailedPreconditionError(
          "no RDMA device on this host; transport \"tcp\" runs the test over TCP");
    }
  } else if (asked == "auto" || asked.empty()) {
    if (!have_rdma_device && !device_named && !rdma_cm) {
      c.transport = Transport::kTcp;
      c.fallback = "no RDMA device on this host: running over TCP (results are labelled tcp)";
    }
  } else {
    return absl::InvalidArgumentError(absl::StrCat("transport \"", asked, "\": rdma, tcp or auto"));
  }
  return c;
}

std::string_view TransportName(Transport t) { return t == Transport::kTcp ? "tcp" : "rdma"; }

Verb VerbOf(TestKind test) {
  switch (test) {
    case TestKind::kWriteBw:
    case TestKind::kWriteLat:
      return Verb::kWrite;
    case TestKind::kSendBw:
    case TestKind::kSendLat:
      return Verb::kSend;
    case TestKind::kReadBw:
    case TestKind::kReadLat:
      return Verb::kRead;
  }
  return Verb::kWrite;
}

bool IsLatency(TestKind test) {
  return test == TestKind::kWriteLat || test == TestKind::kSendLat || test == TestKind::kReadLat;
}

ProbeParams DefaultParams(TestKind test) {
  ProbeParams p;
  p.test = test;
  if (IsLatency(test)) {
    p.size = 2;
    p.iterations = 1000;
    p.tx_depth = 1;
    p.cq_mod = 1;
    // perftest inlines small write/send latency messages by default (DEF_INLINE_WRITE); reads
    // cannot be inlined.
    p.inline_size = VerbOf(test) == Verb::kRead ? 0 : 220;
  }
  return p;
}

std::vector<uint64_t> SizesToRun(const ProbeParams& p) {
  if (!p.all_sizes) return {p.size};
  std::vector<uint64_t> out;
  for (uint64_t size = 2; size <= p.size; size *= 2) out.push_back(size);
  return out;
}

uint32_t PerftestCqMod(const ProbeParams& p) {
  return std::min<uint32_t>(p.size > 8192 && !p.all_sizes ? 1 : 100, p.tx_depth);
}

absl::Status ApplyPerftestRules(ProbeParams& p, bool cq_mod_given, bool margin_given) {
  if (!cq_mod_given) p.cq_mod = PerftestCqMod(p);
  if (!p.duration_mode()) return absl::OkStatus();
  const absl::Duration whole = p.duration;
  if (!margin_given) p.margin = absl::Seconds(absl::ToInt64Seconds(whole) / 4);
  if (whole <= 2 * p.margin) {
    return absl::InvalidArgumentError(absl::StrCat(
        "perftest's -D ", absl::FormatDuration(whole), " leaves no window between its margins of ",
        absl::FormatDuration(p.margin), " (-D must be more than twice the margin)"));
  }
  p.duration = whole - 2 * p.margin;
  return absl::OkStatus();
}

absl::Status CheckGpuMemory(const ProbeParams& p, const Endpoint& local) {
  if (!local.gpu) return absl::OkStatus();
  if (IsLatency(p.test)) {
    return absl::InvalidArgumentError(
        "GPU memory is for the bandwidth tests (the latency tests poll their buffer from the CPU)");
  }
  if (p.transport == Transport::kTcp) {
    return absl::InvalidArgumentError("GPU memory needs the rdma transport");
  }
  return absl::OkStatus();
}

absl::Status ValidateParams(const ProbeParams& p) {
  if (TestName(p.test) == "unknown") return absl::InvalidArgumentError("unknown test");
  if (p.transport != Transport::kRdma && p.transport != Transport::kTcp) {
    return absl::InvalidArgumentError("unknown transport");
  }
  if (p.rdma_cm && p.transport != Transport::kRdma) {
    return absl::InvalidArgumentError("rdma_cm (-R) needs the rdma transport");
  }
  if (p.size < 1 || p.size > kMaxSize) {
    return absl::InvalidArgumentError(absl::StrCat("size ", p.size, " is outside 1..", kMaxSize));
  }
  const bool lat = IsLatency(p.test);
  if (p.duration_mode()) {
    if (p.iterations != 0) {
      return absl::InvalidArgumentError("iterations (-n) and duration (-D) exclude each other");
    }
    if (p.duration > absl::Milliseconds(kMaxDurationMs)) {
      return absl::InvalidArgumentError(absl::StrCat("duration ", Ms(p.duration), " too long"));
    }
  } else {
    if (p.duration < absl::ZeroDuration()) {
      return absl::InvalidArgumentError("duration must be positive");
    }
    const uint64_t max_iters = lat ? kMaxLatencyIterations : kMaxIterations;
    // A latency sample is the time between two successive posts: two iterations give one.
    const uint64_t min_iters = lat ? 5 : 1;
    if (p.iterations < min_iters || p.iterations > max_iters) {
      return absl::InvalidArgumentError(
          absl::StrCat("iterations ", p.iterations, " outside ", min_iters, "..", max_iters));
    }
  }
  if (p.margin < absl::ZeroDuration() || p.margin > absl::Seconds(600)) {
    return absl::InvalidArgumentError("margin must be within 0..600 s");
  }
  if (p.tx_depth < 1 || p.tx_depth > kMaxTxDepth) {
    return absl::InvalidArgumentError(
        absl::StrCat("tx depth ", p.tx_depth, " outside 1..", kMaxTxDepth));
  }
  if (p.cq_mod < 1 || p.cq_mod > p.tx_depth) {
    return absl::InvalidArgumentError(
        absl::StrCat("cq moderation ", p.cq_mod, " outside 1..tx depth (", p.tx_depth, ")"));
  }
  if (p.post_list < 1 || p.post_list > p.tx_depth) {
    return absl::InvalidArgumentError(
        absl::StrCat("post list ", p.post_list, " outside 1..tx depth (", p.tx_depth, ")"));
  }
  if (p.inline_size > kMaxInline) {
    return absl::InvalidArgumentError(
        absl::StrCat("inline size ", p.inline_size, " above ", kMaxInline));
  }
  if (VerbOf(p.test) == Verb::kRead && p.inline_size != 0) {
    return absl::InvalidArgumentError("RDMA reads cannot be inlined (-I)");
  }
  if (p.num_qps < 1 || p.num_qps > kMaxQps) {
    return absl::InvalidArgumentError(
        absl::StrCat("number of QPs ", p.num_qps, " outside 1..", kMaxQps));
  }
  if (lat && p.num_qps != 1) {
    return absl::InvalidArgumentError("latency tests run on one QP (-q 1)");
  }
  if (lat && p.post_list != 1) {
    return absl::InvalidArgumentError("latency tests post one message at a time (-l 1)");
  }
  // Latency tests use a send and a receive region per side; bandwidth tests one per QP.
  const uint64_t total = p.size * p.num_qps * (lat ? 2 : 1);
  if (total > kMaxTotalBuffer) {
    return absl::InvalidArgumentError(
        absl::StrCat("buffers of ", total, " bytes exceed ", kMaxTotalBuffer));
  }
  return absl::OkStatus();
}

absl::Status CheckParamsMatch(const ProbeParams& server, uint32_t explicit_fields,
                              const ProbeParams& client) {
  std::vector<std::string> diffs;
  auto check = [&](bool differs, uint32_t field, std::string_view name, const auto& s,
                   const auto& c) {
    if (differs && (field == 0 || (explicit_fields & field) != 0)) {
      diffs.push_back(absl::StrCat(Av(name), " ", Text(s), " here, ", Text(c), " asked"));
    }
  };
  check(server.test != client.test, 0, "test", TestName(server.test), TestName(client.test));
  check(server.transport != client.transport, kFieldTransport, "transport",
        TransportName(server.transport), TransportName(client.transport));
  check(server.rdma_cm != client.rdma_cm, kFieldRdmaCm, "rdma_cm", server.rdma_cm ? "on" : "off",
        client.rdma_cm ? "on" : "off");
  check(server.size != client.size, kFieldSize, "size", server.size, client.size);
  check(server.iterations != client.iterations, kFieldIterations, "iterations", server.iterations,
        client.iterations);
  check(server.duration != client.duration, kFieldDuration, "duration", Ms(server.duration),
        Ms(client.duration));
  check(server.margin != client.margin, kFieldMargin, "margin", Ms(server.margin),
        Ms(client.margin));
  check(server.tx_depth != client.tx_depth, kFieldTxDepth, "tx_depth", server.tx_depth,
        client.tx_depth);
  check(server.cq_mod != client.cq_mod, kFieldCqMod, "cq_mod", server.cq_mod, client.cq_mod);
  check(server.inline_size != client.inline_size, kFieldInline, "inline", server.inline_size,
        client.inline_size);
  check(server.post_list != client.post_list, kFieldPostList, "post_list", server.post_list,
        client.post_list);
  check(server.num_qps != client.num_qps, kFieldQps, "qps", server.num_qps, client.num_qps);
  if (diffs.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("test parameters differ: ", absl::StrJoin(diffs, "; ")));
}

}  // namespace fabric::probes
