#include "agent/fabric/probes/cli.h"

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

}  // namespace

CliParse ParseCli(const std::vector<std::string>& args) {
  CLI::App app{
      "fabric-probe: perftest-grade RDMA bandwidth and latency tests (RC write/send/read).\n"
      "Without HOST it serves one test (the responder) and exits; with HOST it runs the test "
      "against that responder. Exit codes: 0 ok, 1 runtime failure, 2 usage error."};
  app.set_version_flag("--version", absl::StrCat("fabric-probe ", kFabricVersion));
  std::string test_name, host, device, remote_device, transport = "auto", bind, sysfs = "/sys";
  int ib_port = 1, gid_index = -1;
  uint64_t size = 0, iters = 0;
  double duration_s = 0, margin_s = 2, timeout_s = 10, retry_s = 0;
  int port = kDefaultPort;
  uint32_t qps = 1, tx_depth = 0, inline_size = 0, cq_mod = 0, post_list = 1;
  bool rdma_cm = false, json = false, forever = false;
  std::string allow, secret_file;
  uint32_t rate = kDefaultRatePerMinute;

  app.add_option("TEST", test_name, TestNamesText())->required()->check(CLI::IsMember(TestNames()));
  app.add_option("HOST", host, "the responder to test against; none: be the responder");
  auto* o_dev = app.add_option("-d,--ib-dev", device, "RDMA device (default: the first one)");
  auto* o_rdev = app.add_option("--remote-dev", remote_device,
                                "client: the responder's RDMA device to test against (default: "
                                "the responder's choice)");
  app.add_option("-i,--ib-port", ib_port, "port of the device")
      ->check(CLI::Range(1, 254))
      ->capture_default_str();
  auto* o_gid =
      app.add_option(
             "-x,--gid-index", gid_index,
             "GID index (default: the port's RoCE v2 IPv4 GID, else its global IPv6 one; 0 on "
             "InfiniBand)")
          ->check(CLI::Range(0, 65535));
  auto* o_size = app.add_option("-s,--size", size,
                                "message size in bytes (default 65536 for bandwidth, 2 for "
                                "latency)");
  auto* o_iters = app.add_option("-n,--iters", iters,
                                 "iterations (default 5000 for bandwidth, 1000 for latency)");
  auto* o_dur = app.add_option("-D,--duration", duration_s,
                               "run for this many seconds instead of -n (measured after a "
                               "warm-up --margin)");
  auto* o_margin = app.add_option("-f,--margin", margin_s,
                                  "warm-up seconds before the -D window (default 2, as perftest)");
  app.add_option("-p,--port", port, "TCP port of the exchange (0: any, server)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  auto* o_qps = app.add_option("-q,--qp", qps, "number of QPs (bandwidth tests)");
  auto* o_tx = app.add_option("-t,--tx-depth", tx_depth,
                              "work requests in flight per QP (default 128; 1 for latency)");
  auto* o_inline = app.add_option("-I,--inline_size", inline_size,
                                  "inline messages up to this size (default 0; 220 for "
                                  "write/send latency)");
  auto* o_cm = app.add_flag("-R,--rdma_cm", rdma_cm, "connect the QPs with rdma_cm");
  int tos = -1;
  auto* o_tos = app.add_option("-T,--tos", tos,
                               "the rdma_cm connections' type of service (0..255, with -R; set by "
                               "the client, as perftest's)")
                    ->check(CLI::Range(0, 255));
  auto* o_cqmod = app.add_option("-Q,--cq-mod", cq_mod,
                                 "one signalled completion per this many messages (default 100, "
                                 "at most the tx depth)");
  auto* o_pl = app.add_option("-l,--post_list", post_list, "post this many messages per call");
  app.add_option("--transport", transport,
                 "rdma, tcp, or auto (rdma when this host has an RDMA "
                 "device)")
      ->check(CLI::IsMember({"rdma", "tcp", "auto"}))
      ->capture_default_str();
  app.add_option("--timeout", timeout_s,
                 "seconds any one step may take (connect, exchange, each completion)")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  auto* o_retry = app.add_option("--retry", retry_s,
                                 "client: while nothing listens on the responder's port, try "
                                 "again for this many seconds (default: fail at once, as "
                                 "perftest)")
                      ->check(CLI::Range(0.0, 3600.0));
  auto* o_bind = app.add_option("--bind", bind, "server: listen on this address only");
  app.add_option("--sysfs", sysfs, "sysfs root for the GID table")->capture_default_str();
  auto* o_allow = app.add_option("--allow", allow,
                                 "server: serve only peers in these networks (CIDR[,CIDR...]; "
                                 "default: the subnets this host has addresses in)");
  app.add_option("--secret-file", secret_file,
                 "a file holding a secret both sides must prove they know (HMAC over fresh "
                 "nonces; the secret never crosses the wire); read on every connection");
  auto* o_rate =
      app.add_option("--rate", rate, "server: tests a minute per peer address (0: no limit)")
          ->check(CLI::Range(0, 100000))
          ->capture_default_str();
  app.add_flag("--json", json, "print one JSON object per result");
  app.add_flag("--forever", forever, "server: keep serving tests");
  bool perftest = false, gbits = false;
  app.add_flag("--perftest", perftest,
               "speak stock perftest's protocol (6.06 to 6.29) with a stock ib_<TEST> peer "
               "(ib_write_bw, ib_read_lat, ...): serve its client (admitted by --allow alone), or "
               "be the client of its server (over the TCP exchange so far); perftest's defaults "
               "(-Q, and -D as the whole run with a quarter of it as margin either side)");
  app.add_flag("--report_gbits", gbits, "--perftest: report in Gb/s (as perftest's flag)");
  std::string output = "full", out_json_file = "perftest_out.json";
  bool out_json = false, warm_up = false;
  int mtu = 0;
  auto* o_output =
      app.add_option("--output", output,
                     "--perftest: print only this figure, as perftest (bandwidth or message_rate "
                     "for bandwidth tests, latency for latency tests)")
          ->check(CLI::IsMember({"bandwidth", "message_rate", "latency"}));
  auto* o_out_json = app.add_flag("--out_json", out_json,
                                  "--perftest: also write perftest's JSON report to "
                                  "--out_json_file");
  auto* o_out_json_file = app.add_option("--out_json_file", out_json_file,
                                         "--perftest: the --out_json file (default "
                                         "perftest_out.json in the working directory)");
  auto* o_warm = app.add_flag("--perform_warm_up", warm_up,
                              "--perftest: a tx depth of messages per QP before timing (not "
                              "send_bw), as perftest");
  auto* o_mtu = app.add_option("-m,--mtu", mtu,
                               "--perftest: path MTU in bytes (256..4096; the port's active MTU "
                               "when smaller)")
                    ->check(CLI::IsMember({256, 512, 1024, 2048, 4096}));
  std::string cuda, cuda_bus_id, rocm;
  bool cuda_dmabuf = false, rocm_dmabuf = false;
  auto* o_cuda = app.add_option("--use_cuda", cuda,
                                "Bandwidth tests: the buffer in this CUDA GPU's memory (index); "
                                "without --use_cuda_dmabuf registered through nvidia_peermem "
                                "(without --perftest: the client's buffer)");
  auto* o_cuda_bus = app.add_option("--use_cuda_bus_id", cuda_bus_id,
                                    "As --use_cuda, the GPU named by its PCI address");
  app.add_flag("--use_cuda_dmabuf", cuda_dmabuf,
               "Register the GPU memory as a dma-buf (ibv_reg_dmabuf_mr; no "
               "nvidia_peermem)");
  auto* o_rocm = app.add_option("--use_rocm", rocm,
                                "Bandwidth tests: the buffer in this ROCm GPU's memory (index; "
                                "without --perftest: the client's buffer)");
  app.add_flag("--use_rocm_dmabuf", rocm_dmabuf, "Register the ROCm memory as a dma-buf");
  int numa_node = -1;
  std::string pin_cores;
  bool disable_numa = false;
  auto* o_numa = app.add_option("--numa_node", numa_node,
                                "--perftest: run on this NUMA node's CPUs, memory bound there "
                                "(default: the NIC's node, unless the CPUs are narrowed already)")
                     ->check(CLI::NonNegativeNumber);
  auto* o_pin =
      app.add_option("--pin_cores", pin_cores, "--perftest: run on these CPUs (0-3,8,12-15)");
  auto* o_no_numa = app.add_flag("--disable_numa", disable_numa,
                                 "--perftest: leave the CPUs and memory as they are");
  bool all_sizes = false;
  auto* o_all = app.add_flag("-a,--all", all_sizes,
                             "--perftest, write_bw and read_bw clients: every size from 2 B to "
                             "8 MiB in turn, a line each (the server prints the last), as "
                             "perftest's -a");
  bool duplex = false;
  auto* o_duplex = app.add_flag("-b,--bidirectional", duplex,
                                "--perftest, bandwidth tests: both ends move data at once and "
                                "each prints the sum of both (send_bw with -D: its own sends "
                                "and receives), as perftest's -b");
  bool cpu_freq = false;
  auto* o_cpu_freq = app.add_flag("-F,--CPU-freq", cpu_freq,
                                  "--perftest: accepted for perftest's command lines; no effect "
                                  "(our clock is CLOCK_MONOTONIC, not the TSC's frequency)");

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

  CliConfig c;
  c.server = host.empty();
  c.perftest = perftest;
  c.gbits = gbits;
  for (const CLI::Option* opt : {o_output, o_out_json, o_out_json_file, o_warm, o_mtu, o_cpu_freq,
                                 o_duplex, o_all, o_numa, o_pin, o_no_numa}) {
    if (opt->count() > 0 && !perftest) {
      return Usage(absl::StrCat(opt->get_name(), " goes with --perftest"));
    }
  }
  if (gbits && !perftest) return Usage("--report_gbits goes with --perftest");
  if (perftest && (forever || !secret_file.empty())) {
    return Usage(
        "--perftest runs one test with one stock perftest peer (no --forever or --secret-file: "
        "a stock peer cannot prove a secret)");
  }
  c.forever = forever;
  c.json = json;
  c.device_given = o_dev->count() > 0;
  const TestKind test = *ParseTestName(test_name);
  if (output == "bandwidth") c.output = perftest::Output::kBandwidth;
  if (output == "message_rate") c.output = perftest::Output::kMessageRate;
  if (output == "latency") c.output = perftest::Output::kLatency;
  // perftest's own rule and words.
  if (IsLatency(test) ? (o_output->count() > 0 && output != "latency") : output == "latency") {
    return Usage(IsLatency(test) ? "Output verbosity level for LAT can be: latency"
                                 : "Output verbosity level for BW can be: bandwidth, message_rate");
  }
  if (out_json) c.out_json_file = out_json_file;
  ProbeParams p = DefaultParams(test);
  uint32_t fields = 0;
  if (o_size->count() > 0) {
    p.size = size;
    fields |= kFieldSize;
  }
  if (all_sizes) {
    // perftest's words for -D; the rest is what this -a covers so far.
    if (o_dur->count() > 0) {
      return Usage("Duration mode currently doesn't support running on all sizes.");
    }
    if (IsLatency(test)) return Usage("-a (all sizes) is for the bandwidth tests so far");
    p.all_sizes = true;
    p.size = 8388608;  // perftest's MAX_SIZE: the buffer holds the largest
  }
  if (o_iters->count() > 0 && o_dur->count() > 0) {
    return Usage("-n/--iters and -D/--duration exclude each other");
  }
  if (o_iters->count() > 0) {
    p.iterations = iters;
    fields |= kFieldIterations;
  }
  if (o_dur->count() > 0) {
    if (!(duration_s > 0) || duration_s > kMaxDurationMs / 1000.0) {
      return Usage("-D/--duration must be above 0 seconds and at most a day");
    }
    p.duration = absl::Milliseconds(std::llround(duration_s * 1000));
    p.iterations = 0;
    fields |= kFieldDuration | kFieldIterations;
  }
  if (o_margin->count() > 0) {
    if (!(margin_s >= 0) || margin_s > 600) return Usage("--margin must be within 0..600 seconds");
    p.margin = absl::Milliseconds(std::llround(margin_s * 1000));
    fields |= kFieldMargin;
  }
  if (o_qps->count() > 0) {
    p.num_qps = qps;
    fields |= kFieldQps;
  }
  if (o_tx->count() > 0) {
    p.tx_depth = tx_depth;
    fields |= kFieldTxDepth;
  }
  if (o_inline->count() > 0) {
    p.inline_size = inline_size;
    fields |= kFieldInline;
  }
  if (o_cqmod->count() > 0) {
    p.cq_mod = cq_mod;
    fields |= kFieldCqMod;
  } else if (perftest) {
    // ApplyPerftestRules below.
  } else if (p.cq_mod > p.tx_depth) {
    // As perftest: the default moderation shrinks to a smaller tx depth.
    p.cq_mod = p.tx_depth;
  }
  if (o_tos->count() > 0) {
    // perftest's words (it also allows raw Ethernet QPs, which fabric-probe has not).
    if (!rdma_cm) return Usage("TOS only valid for rdma_cm based QP and RawEth QP (-T needs -R)");
    p.tos = tos;
  }
  if (o_pl->count() > 0) {
    p.post_list = post_list;
    fields |= kFieldPostList;
  }
  if (o_cm->count() > 0) fields |= kFieldRdmaCm;
  p.rdma_cm = rdma_cm;
  c.transport = transport;
  if (transport == "tcp") {
    if (rdma_cm) return Usage("-R/--rdma_cm needs the rdma transport");
    p.transport = Transport::kTcp;
    fields |= kFieldTransport;
  } else if (transport == "rdma") {
    fields |= kFieldTransport;
  }
  if (perftest) {
    absl::Status s = ApplyPerftestRules(p, o_cqmod->count() > 0, o_margin->count() > 0);
    if (!s.ok()) return Usage(std::string(s.message()));
  }
  if (absl::Status s = ValidateParams(p); !s.ok()) return Usage(std::string(s.message()));

  if (!c.server) {
    if (forever) return Usage("--forever is for the server (no HOST)");
    if (o_bind->count() > 0) return Usage("--bind is for the server (no HOST)");
    if (port == 0) return Usage("the client needs the server's port (-p 1..65535)");
    if (o_allow->count() > 0) return Usage("--allow is for the server (no HOST)");
    if (o_rate->count() > 0) return Usage("--rate is for the server (no HOST)");
  } else if (o_retry->count() > 0) {
    return Usage("--retry is for the client (with HOST)");
  } else if (o_rdev->count() > 0) {
    return Usage("--remote-dev is for the client (with HOST); the responder uses -d");
  }
  if (!remote_device.empty() && !wire::IsValidDeviceName(remote_device)) {
    return Usage(absl::StrCat("--remote-dev=", remote_device, " is not an RDMA device name"));
  }
  if (o_allow->count() > 0) {
    absl::StatusOr<AllowList> a = AllowList::Parse(allow);
    if (!a.ok()) return Usage(absl::StrCat("--allow: ", a.status().message()));
    c.server_options.allow = *std::move(a);
  }
  if (!secret_file.empty()) {
    // Checked now so that a bad file is a usage error, not a failure after connecting.
    if (absl::StatusOr<std::string> s = LoadSecret(secret_file); !s.ok()) {
      return Usage(absl::StrCat("--secret-file: ", s.status().message()));
    }
  }
  Endpoint local;
  if (perftest) {
    // perftest's words; by default, as current perftest, the NIC's node.
    if (o_numa->count() > 0 && o_pin->count() > 0) {
      return Usage(" --numa_node and --pin_cores cannot be used together");
    }
    local.placement.mode = disable_numa          ? Placement::Mode::kOff
                           : o_pin->count() > 0  ? Placement::Mode::kCpus
                           : o_numa->count() > 0 ? Placement::Mode::kNode
                                                 : Placement::Mode::kAuto;
    local.placement.node = numa_node;
    local.placement.cpus = pin_cores;
  }
  // perftest's rules and words.
  const bool use_cuda = o_cuda->count() > 0 || o_cuda_bus->count() > 0;
  if (use_cuda && o_rocm->count() > 0) return Usage("Can't use multiple memory types");
  if (cuda_dmabuf && !use_cuda) return Usage("CUDA DMA-BUF cannot be used without CUDA");
  if (rocm_dmabuf && o_rocm->count() == 0) return Usage("ROCm DMA-BUF cannot be used without ROCm");
  if (o_cuda->count() > 0 && o_cuda_bus->count() > 0) {
    return Usage("--use_cuda and --use_cuda_bus_id name the same GPU: give one");
  }
  if (use_cuda || o_rocm->count() > 0) {
    // The responder's buffer serves whatever test a client asks for, latency ones too.
    if (!perftest && c.server && !IsLatency(test)) {
      return Usage("GPU memory without --perftest is for the client");
    }
    gpumem::GpuRequest g;
    g.vendor = use_cuda ? gpumem::GpuVendor::kCuda : gpumem::GpuVendor::kRocm;
    g.device = o_cuda_bus->count() > 0 ? cuda_bus_id : use_cuda ? cuda : rocm;
    g.dmabuf = use_cuda ? cuda_dmabuf : rocm_dmabuf;
    if (g.device.empty()) return Usage("--use_cuda/--use_rocm need a GPU");
    local.gpu = std::move(g);
    if (absl::Status gpu_ok = CheckGpuMemory(p, local); !gpu_ok.ok()) {
      return Usage(std::string(gpu_ok.message()));
    }
  }
  local.device = device;
  local.ib_port = static_cast<uint8_t>(ib_port);
  if (o_gid->count() > 0) local.gid_index = gid_index;
  local.sysfs = sysfs;
  local.timeout = absl::Milliseconds(std::llround(timeout_s * 1000));

  c.client.params = p;
  c.client.host = host;
  c.client.port = static_cast<uint16_t>(port);
  c.client.local = local;
  c.client.remote_device = remote_device;
  c.client.secret_file = secret_file;
  c.client.connect_retry = absl::Milliseconds(std::llround(retry_s * 1000));
  c.server_options.secret_file = secret_file;
  c.server_options.rate_per_minute = rate;
  c.server_options.test = test;
  c.server_options.expect = p;
  c.server_options.explicit_fields = fields;
  c.server_options.bind = bind;
  c.server_options.port = static_cast<uint16_t>(port);
  c.server_options.local = local;
  if (perftest) {
    PerftestServerOptions& o = c.perftest_options;
    o.params = p;
    o.gbits = gbits;
    o.local = local;
    o.bind = bind;
    o.port = static_cast<uint16_t>(port);
    o.allow = c.server_options.allow;
    o.mtu = mtu;
    o.warm_up = warm_up;
    o.duplex = duplex;
    if (duplex && IsLatency(test)) {
      return Usage("-b (bidirectional) is for the bandwidth tests, as perftest's");
    }
  }
  CliParse r;
  r.config = std::move(c);
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
