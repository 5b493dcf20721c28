#include "agent/fabric/probe_cli/cli.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <optional>
#include <span>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/common/cli_args.h"
#include "agent/common/cli_args_cli11.h"
#include "agent/common/cli_docs.h"
#include "agent/common/cli_docs_cli11.h"
#include "agent/common/excerpt.h"
#include "agent/common/status.h"
#include "agent/common/strings.h"
#include "agent/common/version.h"
#include "agent/fabric/probes/auth.h"
#include "agent/fabric/probes/wire.h"

namespace fabric::probes {
namespace {

CliParse Usage(std::string message) {
  CliParse r;
  r.exit = true;
  r.exit_code = kExitUsage;
  r.output = absl::StrCat("fabric-probe: ", message, "\nRun with --help for more information.\n");
  return r;
}

// fabric-probe(1): options from the tree; the rest says what the help text cannot.
docs::Page Page(const CLI::App& app) {
  docs::Page p = docs::PageOf(app, "fabric-probe", 1, "[OPTIONS] TEST [HOST]");
  p.description = {
      "Without HOST fabric-probe is the responder: it serves one test (with --forever, every "
      "test) on --port and exits. With HOST it runs TEST against the responder there (another "
      "fabric-probe, or a fabric-agent started with --probe-listen) and prints the result, as "
      "perftest does, or with --json as one JSON object.",
      absl::StrCat("TEST is one of ", TestNamesText(),
                   ". What the responder is given explicitly must match the client's test; the "
                   "rest it takes from the client."),
      "With --transport=auto (the default) a host without an RDMA device tests over TCP."};
  p.sections.push_back(
      {"EXIT STATUS",
       {},
       {{absl::StrCat(kExitOk), "", "the test ran (responder: every test it served ran)"},
        {absl::StrCat(kExitFailure), "",
         "a runtime failure: the device is missing, the peer is unreachable or gone or refused, "
         "a step timed out"},
        {absl::StrCat(kExitUsage), "", "a usage error"}}});
  p.see_also = {"fabric-agent(8)", "fabricctl(1)"};
  return p;
}

// Every flag's value as given, and its option (count() > 0: it was given), by group.
struct TestFlags {  // TEST HOST and what shapes the test: both ends
  std::string test_name, host, device, remote_device, transport = "auto", sysfs = "/sys";
  int ib_port = 1, gid_index = -1, port = kDefaultPort, tos = -1;
  uint64_t size = 0, iters = 0;
  double duration_s = 0, margin_s = 2, timeout_s = 10, retry_s = 0;
  uint32_t qps = 1, tx_depth = 0, inline_size = 0, cq_mod = 0, post_list = 1;
  bool rdma_cm = false;
  CLI::Option *dev, *rdev, *gid, *size_opt, *iters_opt, *dur, *margin, *qps_opt, *tx, *inl, *cm,
      *tos_opt, *cqmod, *pl, *retry;
};
struct ResponderFlags {  // the responder's admission and how results are printed
  std::string bind, allow, secret_file;
  uint32_t rate = kDefaultRatePerMinute;
  bool json = false, forever = false;
  CLI::Option *bind_opt, *allow_opt, *rate_opt;
};
struct PerftestFlags {  // --perftest and what goes with it only
  bool perftest = false, gbits = false, out_json = false, warm_up = false, disable_numa = false,
       all_sizes = false, duplex = false, cpu_freq = false;
  std::string output = "full", out_json_file = "perftest_out.json", pin_cores;
  int mtu = 0, numa_node = -1;
  CLI::Option *output_opt, *out_json_opt, *out_json_file_opt, *warm, *mtu_opt, *numa, *pin,
      *no_numa, *all, *duplex_opt, *cpu_freq_opt;
};
struct GpuFlags {  // the buffer in a GPU's memory, perftest's flags
  std::string cuda, cuda_bus_id, rocm;
  bool cuda_dmabuf = false, rocm_dmabuf = false;
  CLI::Option *cuda_opt, *cuda_bus, *rocm_opt;
};
struct Flags {
  TestFlags t;
  ResponderFlags r;
  PerftestFlags pt;
  GpuFlags g;
};

void AddTestFlags(CLI::App& app, TestFlags& f) {
  app.add_option("TEST", f.test_name, TestNamesText())
      ->required()
      ->check(CLI::IsMember(TestNames()));
  app.add_option("HOST", f.host, "the responder to test against; none: be the responder");
  f.dev = app.add_option("-d,--ib-dev", f.device, "RDMA device (default: the first one)");
  f.rdev = app.add_option("--remote-dev", f.remote_device,
                          "client: the responder's RDMA device to test against (default: "
                          "the responder's choice)");
  app.add_option("-i,--ib-port", f.ib_port, "port of the device")
      ->check(CLI::Range(1, 254))
      ->capture_default_str();
  f.gid = app.add_option("-x,--gid-index", f.gid_index,
                         "GID index (default: the port's RoCE v2 IPv4 GID, else its global IPv6 "
                         "one; 0 on InfiniBand)")
              ->check(CLI::Range(0, 65535));
  f.size_opt = app.add_option("-s,--size", f.size,
                              "message size in bytes (default 65536 for bandwidth, 2 for "
                              "latency)");
  f.iters_opt = app.add_option("-n,--iters", f.iters,
                               "iterations (default 5000 for bandwidth, 1000 for latency)");
  f.dur = app.add_option("-D,--duration", f.duration_s,
                         "run for this many seconds instead of -n (measured after a "
                         "warm-up --margin)");
  f.margin = app.add_option("-f,--margin", f.margin_s,
                            "warm-up seconds before the -D window (default 2, as perftest)");
  app.add_option("-p,--port", f.port, "TCP port of the exchange (0: any, server)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  f.qps_opt = app.add_option("-q,--qp", f.qps, "number of QPs (bandwidth tests)");
  f.tx = app.add_option("-t,--tx-depth", f.tx_depth,
                        "work requests in flight per QP (default 128; 1 for latency)");
  f.inl = app.add_option("-I,--inline_size", f.inline_size,
                         "inline messages up to this size (default 0; 220 for "
                         "write/send latency)");
  f.cm = app.add_flag("-R,--rdma_cm", f.rdma_cm, "connect the QPs with rdma_cm");
  f.tos_opt = app.add_option("-T,--tos", f.tos,
                             "the rdma_cm connections' type of service (0..255, with -R; set by "
                             "the client, as perftest's)")
                  ->check(CLI::Range(0, 255));
  f.cqmod = app.add_option("-Q,--cq-mod", f.cq_mod,
                           "one signalled completion per this many messages (default 100, "
                           "at most the tx depth)");
  f.pl = app.add_option("-l,--post_list", f.post_list, "post this many messages per call");
  app.add_option("--transport", f.transport,
                 "rdma, tcp, or auto (rdma when this host has an RDMA "
                 "device)")
      ->check(CLI::IsMember({"rdma", "tcp", "auto"}))
      ->capture_default_str();
  app.add_option("--timeout", f.timeout_s,
                 "seconds any one step may take (connect, exchange, each completion)")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  f.retry = app.add_option("--retry", f.retry_s,
                           "client: while nothing listens on the responder's port, try "
                           "again for this many seconds (default: fail at once, as "
                           "perftest)")
                ->check(CLI::Range(0.0, 3600.0));
  app.add_option("--sysfs", f.sysfs, "sysfs root for the GID table")->capture_default_str();
}

void AddResponderFlags(CLI::App& app, ResponderFlags& f) {
  f.bind_opt = app.add_option("--bind", f.bind, "server: listen on this address only");
  f.allow_opt = app.add_option("--allow", f.allow,
                               "server: serve only peers in these networks (CIDR[,CIDR...]; "
                               "default: the subnets this host has addresses in)");
  app.add_option("--secret-file", f.secret_file,
                 "a file holding a secret both sides must prove they know (HMAC over fresh "
                 "nonces; the secret never crosses the wire); read on every connection");
  f.rate_opt =
      app.add_option("--rate", f.rate, "server: tests a minute per peer address (0: no limit)")
          ->check(CLI::Range(0, 100000))
          ->capture_default_str();
  app.add_flag("--json", f.json, "print one JSON object per result");
  app.add_flag("--forever", f.forever, "server: keep serving tests");
}

void AddPerftestFlags(CLI::App& app, PerftestFlags& f) {
  app.add_flag("--perftest", f.perftest,
               "speak stock perftest's protocol (6.06 to 6.29) with a stock ib_<TEST> peer "
               "(ib_write_bw, ib_read_lat, ...): serve its client (admitted by --allow alone), or "
               "be the client of its server (over the TCP exchange so far); perftest's defaults "
               "(-Q, and -D as the whole run with a quarter of it as margin either side)");
  app.add_flag("--report_gbits", f.gbits, "--perftest: report in Gb/s (as perftest's flag)");
  f.output_opt =
      app.add_option("--output", f.output,
                     "--perftest: print only this figure, as perftest (bandwidth or message_rate "
                     "for bandwidth tests, latency for latency tests)")
          ->check(CLI::IsMember({"bandwidth", "message_rate", "latency"}));
  f.out_json_opt = app.add_flag("--out_json", f.out_json,
                                "--perftest: also write perftest's JSON report to "
                                "--out_json_file");
  f.out_json_file_opt = app.add_option("--out_json_file", f.out_json_file,
                                       "--perftest: the --out_json file (default "
                                       "perftest_out.json in the working directory)");
  f.warm = app.add_flag("--perform_warm_up", f.warm_up,
                        "--perftest: a tx depth of messages per QP before timing (not "
                        "send_bw), as perftest");
  f.mtu_opt = app.add_option("-m,--mtu", f.mtu,
                             "--perftest: path MTU in bytes (256..4096; the port's active MTU "
                             "when smaller)")
                  ->check(CLI::IsMember({256, 512, 1024, 2048, 4096}));
  f.numa = app.add_option("--numa_node", f.numa_node,
                          "--perftest: run on this NUMA node's CPUs, memory bound there "
                          "(default: the NIC's node, unless the CPUs are narrowed already)")
               ->check(CLI::NonNegativeNumber);
  f.pin = app.add_option("--pin_cores", f.pin_cores, "--perftest: run on these CPUs (0-3,8,12-15)");
  f.no_numa = app.add_flag("--disable_numa", f.disable_numa,
                           "--perftest: leave the CPUs and memory as they are");
  f.all = app.add_flag("-a,--all", f.all_sizes,
                       "--perftest, write_bw and read_bw clients: every size from 2 B to "
                       "8 MiB in turn, a line each (the server prints the last), as "
                       "perftest's -a");
  f.duplex_opt = app.add_flag("-b,--bidirectional", f.duplex,
                              "--perftest, bandwidth tests: both ends move data at once and "
                              "each prints the sum of both (send_bw with -D: its own sends "
                              "and receives), as perftest's -b");
  f.cpu_freq_opt = app.add_flag("-F,--CPU-freq", f.cpu_freq,
                                "--perftest: accepted for perftest's command lines; no effect "
                                "(our clock is CLOCK_MONOTONIC, not the TSC's frequency)");
}

void AddGpuFlags(CLI::App& app, GpuFlags& f) {
  f.cuda_opt = app.add_option("--use_cuda", f.cuda,
                              "Bandwidth tests: the buffer in this CUDA GPU's memory (index); "
                              "without --use_cuda_dmabuf registered through nvidia_peermem "
                              "(without --perftest: the client's buffer)");
  f.cuda_bus = app.add_option("--use_cuda_bus_id", f.cuda_bus_id,
                              "As --use_cuda, the GPU named by its PCI address");
  app.add_flag("--use_cuda_dmabuf", f.cuda_dmabuf,
               "Register the GPU memory as a dma-buf (ibv_reg_dmabuf_mr; no "
               "nvidia_peermem)");
  f.rocm_opt = app.add_option("--use_rocm", f.rocm,
                              "Bandwidth tests: the buffer in this ROCm GPU's memory (index; "
                              "without --perftest: the client's buffer)");
  app.add_flag("--use_rocm_dmabuf", f.rocm_dmabuf, "Register the ROCm memory as a dma-buf");
}

// The perftest group: its flags without --perftest, what --perftest excludes, --output.
absl::Status CheckPerftestFlags(const Flags& f, TestKind test, CliConfig& c) {
  const PerftestFlags& pt = f.pt;
  for (const CLI::Option* opt :
       {pt.output_opt, pt.out_json_opt, pt.out_json_file_opt, pt.warm, pt.mtu_opt, pt.cpu_freq_opt,
        pt.duplex_opt, pt.all, pt.numa, pt.pin, pt.no_numa}) {
    if (opt->count() > 0 && !pt.perftest) {
      return absl::InvalidArgumentError(absl::StrCat(opt->get_name(), " goes with --perftest"));
    }
  }
  if (pt.gbits && !pt.perftest) {
    return absl::InvalidArgumentError("--report_gbits goes with --perftest");
  }
  if (pt.perftest && (f.r.forever || !f.r.secret_file.empty())) {
    return absl::InvalidArgumentError(
        "--perftest runs one test with one stock perftest peer (no --forever or --secret-file: "
        "a stock peer cannot prove a secret)");
  }
  if (pt.output == "bandwidth") c.output = perftest::Output::kBandwidth;
  if (pt.output == "message_rate") c.output = perftest::Output::kMessageRate;
  if (pt.output == "latency") c.output = perftest::Output::kLatency;
  // perftest's own rule and words.
  if (IsLatency(test) ? (pt.output_opt->count() > 0 && pt.output != "latency")
                      : pt.output == "latency") {
    return absl::InvalidArgumentError(
        IsLatency(test) ? "Output verbosity level for LAT can be: latency"
                        : "Output verbosity level for BW can be: bandwidth, message_rate");
  }
  if (pt.out_json) c.out_json_file = pt.out_json_file;
  if (pt.duplex && IsLatency(test)) {
    return absl::InvalidArgumentError(
        "-b (bidirectional) is for the bandwidth tests, as perftest's");
  }
  return absl::OkStatus();
}

// The test's parameters, and which of them were given (ParamField bits: what a responder must
// match).
absl::Status ResolveParams(const Flags& f, TestKind test, ProbeParams& p, uint32_t& fields) {
  const TestFlags& t = f.t;
  p = DefaultParams(test);
  fields = 0;
  if (t.size_opt->count() > 0) {
    p.size = t.size;
    fields |= kFieldSize;
  }
  if (f.pt.all_sizes) {
    // perftest's words for -D; the rest is what this -a covers so far.
    if (t.dur->count() > 0) {
      return absl::InvalidArgumentError(
          "Duration mode currently doesn't support running on all sizes.");
    }
    if (IsLatency(test)) {
      return absl::InvalidArgumentError("-a (all sizes) is for the bandwidth tests so far");
    }
    p.all_sizes = true;
    p.size = 8388608;  // perftest's MAX_SIZE: the buffer holds the largest
  }
  if (t.iters_opt->count() > 0 && t.dur->count() > 0) {
    return absl::InvalidArgumentError("-n/--iters and -D/--duration exclude each other");
  }
  if (t.iters_opt->count() > 0) {
    p.iterations = t.iters;
    fields |= kFieldIterations;
  }
  if (t.dur->count() > 0) {
    if (!(t.duration_s > 0) || t.duration_s > kMaxDurationMs / 1000.0) {
      return absl::InvalidArgumentError("-D/--duration must be above 0 seconds and at most a day");
    }
    p.duration = absl::Milliseconds(std::llround(t.duration_s * 1000));
    p.iterations = 0;
    fields |= kFieldDuration | kFieldIterations;
  }
  if (t.margin->count() > 0) {
    if (!(t.margin_s >= 0) || t.margin_s > 600) {
      return absl::InvalidArgumentError("--margin must be within 0..600 seconds");
    }
    p.margin = absl::Milliseconds(std::llround(t.margin_s * 1000));
    fields |= kFieldMargin;
  }
  // Each given count is one the responder must match.
  const struct {
    const CLI::Option* opt;
    uint32_t value;
    uint32_t ProbeParams::*field;
    uint32_t bit;
  } kCounts[] = {{t.qps_opt, t.qps, &ProbeParams::num_qps, kFieldQps},
                 {t.tx, t.tx_depth, &ProbeParams::tx_depth, kFieldTxDepth},
                 {t.inl, t.inline_size, &ProbeParams::inline_size, kFieldInline},
                 {t.cqmod, t.cq_mod, &ProbeParams::cq_mod, kFieldCqMod},
                 {t.pl, t.post_list, &ProbeParams::post_list, kFieldPostList}};
  for (const auto& [opt, value, field, bit] : kCounts) {
    if (opt->count() > 0) {
      p.*field = value;
      fields |= bit;
    }
  }
  // As perftest: the default moderation shrinks to a smaller tx depth (with --perftest,
  // ApplyPerftestRules below).
  if (t.cqmod->count() == 0 && !f.pt.perftest && p.cq_mod > p.tx_depth) p.cq_mod = p.tx_depth;
  if (t.tos_opt->count() > 0) {
    // perftest's words (it also allows raw Ethernet QPs, which fabric-probe has not).
    if (!t.rdma_cm) {
      return absl::InvalidArgumentError(
          "TOS only valid for rdma_cm based QP and RawEth QP (-T needs -R)");
    }
    p.tos = t.tos;
  }
  if (t.cm->count() > 0) fields |= kFieldRdmaCm;
  p.rdma_cm = t.rdma_cm;
  if (t.transport == "tcp") {
    if (t.rdma_cm) return absl::InvalidArgumentError("-R/--rdma_cm needs the rdma transport");
    p.transport = Transport::kTcp;
    fields |= kFieldTransport;
  } else if (t.transport == "rdma") {
    fields |= kFieldTransport;
  }
  if (f.pt.perftest) {
    FABRIC_RETURN_IF_ERROR(ApplyPerftestRules(p, t.cqmod->count() > 0, t.margin->count() > 0));
  }
  return ValidateParams(p);
}

// The flags that belong to one end only, and the responder's admission.
absl::Status CheckEnds(const Flags& f, bool server, CliConfig& c) {
  const TestFlags& t = f.t;
  const ResponderFlags& r = f.r;
  if (!server) {
    if (r.forever) return absl::InvalidArgumentError("--forever is for the server (no HOST)");
    if (r.bind_opt->count() > 0) {
      return absl::InvalidArgumentError("--bind is for the server (no HOST)");
    }
    if (t.port == 0) {
      return absl::InvalidArgumentError("the client needs the server's port (-p 1..65535)");
    }
    if (r.allow_opt->count() > 0) {
      return absl::InvalidArgumentError("--allow is for the server (no HOST)");
    }
    if (r.rate_opt->count() > 0) {
      return absl::InvalidArgumentError("--rate is for the server (no HOST)");
    }
  } else if (t.retry->count() > 0) {
    return absl::InvalidArgumentError("--retry is for the client (with HOST)");
  } else if (t.rdev->count() > 0) {
    return absl::InvalidArgumentError(
        "--remote-dev is for the client (with HOST); the responder uses -d");
  }
  if (!t.remote_device.empty() && !wire::IsValidDeviceName(t.remote_device)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--remote-dev=", t.remote_device, " is not an RDMA device name"));
  }
  if (r.allow_opt->count() > 0) {
    absl::StatusOr<AllowList> a = AllowList::Parse(r.allow);
    if (!a.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--allow: ", a.status().message()));
    }
    c.server_options.allow = *std::move(a);
  }
  if (!r.secret_file.empty()) {
    // Checked now so that a bad file is a usage error, not a failure after connecting.
    if (absl::StatusOr<std::string> s = LoadSecret(r.secret_file); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--secret-file: ", s.status().message()));
    }
  }
  return absl::OkStatus();
}

// This end: the device, where its threads run (--perftest) and where its buffer lives.
absl::StatusOr<Endpoint> ResolveEndpoint(const Flags& f, const ProbeParams& p, TestKind test,
                                         bool server) {
  const TestFlags& t = f.t;
  const PerftestFlags& pt = f.pt;
  const GpuFlags& g = f.g;
  Endpoint local;
  if (pt.perftest) {
    // perftest's words; by default, as current perftest, the NIC's node.
    if (pt.numa->count() > 0 && pt.pin->count() > 0) {
      return absl::InvalidArgumentError(" --numa_node and --pin_cores cannot be used together");
    }
    local.placement.mode = pt.disable_numa        ? Placement::Mode::kOff
                           : pt.pin->count() > 0  ? Placement::Mode::kCpus
                           : pt.numa->count() > 0 ? Placement::Mode::kNode
                                                  : Placement::Mode::kAuto;
    local.placement.node = pt.numa_node;
    local.placement.cpus = pt.pin_cores;
  }
  // perftest's rules and words.
  const bool use_cuda = g.cuda_opt->count() > 0 || g.cuda_bus->count() > 0;
  const bool use_rocm = g.rocm_opt->count() > 0;
  if (use_cuda && use_rocm) return absl::InvalidArgumentError("Can't use multiple memory types");
  if (g.cuda_dmabuf && !use_cuda) {
    return absl::InvalidArgumentError("CUDA DMA-BUF cannot be used without CUDA");
  }
  if (g.rocm_dmabuf && !use_rocm) {
    return absl::InvalidArgumentError("ROCm DMA-BUF cannot be used without ROCm");
  }
  if (g.cuda_opt->count() > 0 && g.cuda_bus->count() > 0) {
    return absl::InvalidArgumentError(
        "--use_cuda and --use_cuda_bus_id name the same GPU: give one");
  }
  if (use_cuda || use_rocm) {
    // The responder's buffer serves whatever test a client asks for, latency ones too.
    if (!pt.perftest && server && !IsLatency(test)) {
      return absl::InvalidArgumentError("GPU memory without --perftest is for the client");
    }
    gpumem::GpuRequest gpu;
    gpu.vendor = use_cuda ? gpumem::GpuVendor::kCuda : gpumem::GpuVendor::kRocm;
    gpu.device = g.cuda_bus->count() > 0 ? g.cuda_bus_id : use_cuda ? g.cuda : g.rocm;
    gpu.dmabuf = use_cuda ? g.cuda_dmabuf : g.rocm_dmabuf;
    if (gpu.device.empty()) return absl::InvalidArgumentError("--use_cuda/--use_rocm need a GPU");
    local.gpu = std::move(gpu);
    FABRIC_RETURN_IF_ERROR(CheckGpuMemory(p, local));
  }
  local.device = t.device;
  local.ib_port = static_cast<uint8_t>(t.ib_port);
  if (t.gid->count() > 0) local.gid_index = t.gid_index;
  local.sysfs = t.sysfs;
  local.timeout = absl::Milliseconds(std::llround(t.timeout_s * 1000));
  return local;
}

// What the client, the responder and the perftest peer are each given.
void Assemble(const Flags& f, TestKind test, const ProbeParams& p, uint32_t fields,
              const Endpoint& local, CliConfig& c) {
  const TestFlags& t = f.t;
  const ResponderFlags& r = f.r;
  const auto port = static_cast<uint16_t>(t.port);
  c.client.params = p;
  c.client.host = t.host;
  c.client.port = port;
  c.client.local = local;
  c.client.remote_device = t.remote_device;
  c.client.secret_file = r.secret_file;
  c.client.connect_retry = absl::Milliseconds(std::llround(t.retry_s * 1000));
  c.server_options.secret_file = r.secret_file;
  c.server_options.rate_per_minute = r.rate;
  c.server_options.test = test;
  c.server_options.expect = p;
  c.server_options.explicit_fields = fields;
  c.server_options.bind = r.bind;
  c.server_options.port = port;
  c.server_options.local = local;
  if (f.pt.perftest) {
    PerftestServerOptions& o = c.perftest_options;
    o.params = p;
    o.gbits = f.pt.gbits;
    o.local = local;
    o.bind = r.bind;
    o.port = port;
    o.allow = c.server_options.allow;
    o.mtu = f.pt.mtu;
    o.warm_up = f.pt.warm_up;
    o.duplex = f.pt.duplex;
  }
}

// The parse proper: CLI11 over the flags, or the exit it asks for (help, version, an error).
std::optional<CliParse> ParseArgs(CLI::App& app, const std::vector<std::string>& args) {
  if (std::optional<std::string> kind = docs::GenerateKind(args)) {
    absl::StatusOr<std::string> text =
        docs::Generate(*kind, Page(app), docs::CompletionOf(app, "fabric-probe", TestNames()));
    if (!text.ok()) return Usage(std::string(text.status().message()));
    CliParse r;
    r.exit = true;
    r.output = *std::move(text);
    return r;
  }
  if (args.size() > 1) {
    const std::span<const std::string> given = std::span(args).subspan(1);
    if (absl::Status s = RefuseEmptyValues(given); !s.ok()) return Usage(std::string(s.message()));
    if (absl::Status s = RefuseMissingValues(app, given); !s.ok()) {
      return Usage(std::string(s.message()));
    }
  }
  std::vector<std::string> rev(args.rbegin(), args.rend() - (args.empty() ? 0 : 1));
  try {
    app.parse(rev);
  } catch (const CLI::ParseError& e) {
    std::ostringstream out, err;
    const int rc = app.exit(e, out, err);
    CliParse r;
    r.exit = true;
    r.exit_code = rc == 0 ? kExitOk : kExitUsage;
    r.output = rc == 0 ? out.str() : err.str();
    return r;
  }
  return std::nullopt;
}

// Everything after CLI11: each group's rules, in the order their errors are reported.
absl::StatusOr<CliConfig> Resolve(const Flags& f) {
  CliConfig c;
  c.server = f.t.host.empty();
  c.perftest = f.pt.perftest;
  c.gbits = f.pt.gbits;
  c.forever = f.r.forever;
  c.json = f.r.json;
  c.device_given = f.t.dev->count() > 0;
  c.transport = f.t.transport;
  const TestKind test = *ParseTestName(f.t.test_name);
  FABRIC_RETURN_IF_ERROR(CheckPerftestFlags(f, test, c));
  ProbeParams p;
  uint32_t fields = 0;
  FABRIC_RETURN_IF_ERROR(ResolveParams(f, test, p, fields));
  FABRIC_RETURN_IF_ERROR(CheckEnds(f, c.server, c));
  absl::StatusOr<Endpoint> local = ResolveEndpoint(f, p, test, c.server);
  if (!local.ok()) return local.status();
  Assemble(f, test, p, fields, *local, c);
  return c;
}

}  // namespace

CliParse ParseCli(const std::vector<std::string>& args) {
  CLI::App app{
      "fabric-probe: perftest-grade RDMA bandwidth and latency tests (RC write/send/read).\n"
      "Without HOST it serves one test (the responder) and exits; with HOST it runs the test "
      "against that responder. Exit codes: 0 ok, 1 runtime failure, 2 usage error."};
  app.set_version_flag("--version", absl::StrCat("fabric-probe ", kFabricVersion));
  Flags f;
  AddTestFlags(app, f.t);
  AddResponderFlags(app, f.r);
  AddPerftestFlags(app, f.pt);
  AddGpuFlags(app, f.g);
  if (std::optional<CliParse> exit = ParseArgs(app, args)) return *std::move(exit);
  absl::StatusOr<CliConfig> c = Resolve(f);
  if (!c.ok()) return Usage(std::string(c.status().message()));
  CliParse r;
  r.config = *std::move(c);
  return r;
}

absl::StatusOr<PerftestServerOptions> ParsePerftestResponder(std::string_view line) {
  // --perftest first: an option at the end of the line missing its value is refused as such.
  std::vector<std::string> args = {"fabric-probe", "--perftest"};
  for (absl::string_view t : absl::StrSplit(Av(line), absl::ByAnyChar(" \t"), absl::SkipEmpty())) {
    const std::string flag(t.substr(0, t.find('=')));
    // Whom it admits, what it prints or writes and where its threads run are the agent's.
    struct Agents {
      std::string_view why;
      std::vector<std::string_view> flags;
    };
    static const Agents kAgents[] = {
        {"--probe-allow admits its clients", {"--allow"}},
        {"it logs each test it serves",
         {"--json", "--output", "--out_json", "--out_json_file", "--forever", "--help", "-h"}},
        {"the agent moves none of its threads or pages",
         {"--numa_node", "--pin_cores", "--disable_numa"}},
    };
    for (const auto& [why, flags] : kAgents) {
      if (std::find(flags.begin(), flags.end(), flag) != flags.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat(flag, " is not for the agent's perftest responder (", Av(why), ")"));
      }
    }
    args.emplace_back(t);
  }
  CliParse r = ParseCli(args);
  if (r.exit) {
    std::string why(absl::StripSuffix(Av(r.output), "\nRun with --help for more information.\n"));
    return absl::InvalidArgumentError(std::string(absl::StripPrefix(Av(why), "fabric-probe: ")));
  }
  if (!r.config.server) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", Av(line),
                     "\" names a host: the responder serves clients (TEST and perftest's flags)"));
  }
  PerftestServerOptions o = std::move(r.config.perftest_options);
  o.local.placement = Placement();  // a thread of the agent: perftest's placement would move it
  return o;
}

}  // namespace fabric::probes
