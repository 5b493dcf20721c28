#include "agent/fabric/probe_cli/cli.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace fabric::probes {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

CliParse Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "fabric-probe");
  return ParseCli(args);
}

void ExpectUsage(std::vector<std::string> args, std::string_view mention) {
  CliParse r = Parse(args);
  std::string joined;
  for (const auto& a : args) joined += a + " ";
  ASSERT_TRUE(r.exit) << joined;
  EXPECT_EQ(r.exit_code, kExitUsage) << joined;
  EXPECT_NE(r.output.find(mention), std::string::npos) << joined << ": " << r.output;
}

TEST(ParseCli, ServerWithDefaults) {
  CliParse r = Parse({"write_bw"});
  ASSERT_FALSE(r.exit) << r.output;
  EXPECT_TRUE(r.config.server);
  EXPECT_EQ(r.config.server_options.port, 18515);
  EXPECT_EQ(r.config.server_options.explicit_fields, 0u);
  EXPECT_EQ(r.config.client.params, DefaultParams(TestKind::kWriteBw));
}

TEST(ParseCli, ClientWithPerftestFlags) {
  CliParse r = Parse({"read_bw", "10.0.0.2", "-d",       "mlx5_0",    "-i",  "2",  "-x",
                      "3",       "-s",       "4096",     "-n",        "100", "-q", "4",
                      "-t",      "64",       "--cq-mod", "8",         "-l",  "4",  "-R",
                      "-p",      "9000",     "--json",   "--timeout", "2.5"});
  ASSERT_FALSE(r.exit) << r.output;
  const CliConfig& c = r.config;
  EXPECT_FALSE(c.server);
  EXPECT_TRUE(c.json);
  EXPECT_EQ(c.client.host, "10.0.0.2");
  EXPECT_EQ(c.client.port, 9000);
  EXPECT_EQ(c.client.local.device, "mlx5_0");
  EXPECT_EQ(c.client.local.ib_port, 2);
  EXPECT_EQ(c.client.local.gid_index, 3);
  EXPECT_EQ(c.client.local.timeout, absl::Milliseconds(2500));
  const ProbeParams& p = c.client.params;
  EXPECT_EQ(p.test, TestKind::kReadBw);
  EXPECT_EQ(p.size, 4096u);
  EXPECT_EQ(p.iterations, 100u);
  EXPECT_EQ(p.num_qps, 4u);
  EXPECT_EQ(p.tx_depth, 64u);
  EXPECT_EQ(p.cq_mod, 8u);
  EXPECT_EQ(p.post_list, 4u);
  EXPECT_TRUE(p.rdma_cm);
}

TEST(ParseCli, RemoteDeviceIsTheClients) {
  CliParse r = Parse({"write_bw", "10.0.0.2", "-d", "mlx5_1", "--remote-dev", "mlx5_3"});
  ASSERT_FALSE(r.exit) << r.output;
  EXPECT_EQ(r.config.client.remote_device, "mlx5_3");
  EXPECT_EQ(Parse({"write_bw", "10.0.0.2"}).config.client.remote_device, "");
  ExpectUsage({"write_bw", "--remote-dev", "mlx5_3"}, "--remote-dev is for the client");
  ExpectUsage({"write_bw", "h", "--remote-dev", "mlx5/3"}, "not an RDMA device name");
}

TEST(ParseCli, AllowRateAndSecret) {
  CliParse r = Parse({"write_bw", "--allow", "10.0.0.0/24,fd00::/64", "--rate", "10"});
  ASSERT_FALSE(r.exit) << r.output;
  ASSERT_TRUE(r.config.server_options.allow.has_value());
  EXPECT_EQ(r.config.server_options.allow->ToString(), "10.0.0.0/24, fd00::/64");
  EXPECT_EQ(r.config.server_options.rate_per_minute, 10u);
  r = Parse({"write_bw"});
  ASSERT_FALSE(r.exit) << r.output;
  EXPECT_FALSE(r.config.server_options.allow.has_value());  // this host's subnets
  EXPECT_EQ(r.config.server_options.rate_per_minute, kDefaultRatePerMinute);
  EXPECT_EQ(r.config.server_options.secret_file, "");
  ExpectUsage({"write_bw", "--allow", "10.0.0.0/24,bogus"}, "bogus");
  ExpectUsage({"write_bw", "h", "--allow", "10.0.0.0/24"}, "--allow is for the server");
  ExpectUsage({"write_bw", "h", "--rate", "3"}, "--rate is for the server");
  ExpectUsage({"write_bw", "h", "--secret-file", "/nonexistent/secret"}, "/nonexistent/secret");
}

TEST(ParseCli, LatencyDefaultsAndDuration) {
  CliParse r = Parse({"write_lat", "h", "-D", "3", "--margin", "0.5"});
  ASSERT_FALSE(r.exit) << r.output;
  const ProbeParams& p = r.config.client.params;
  EXPECT_EQ(p.size, 2u);
  EXPECT_EQ(p.tx_depth, 1u);
  EXPECT_EQ(p.inline_size, 220u);
  EXPECT_EQ(p.iterations, 0u);
  EXPECT_EQ(p.duration, absl::Seconds(3));
  EXPECT_EQ(p.margin, absl::Milliseconds(500));
}

TEST(ParseCli, SmallTxDepthShrinksDefaultModeration) {
  CliParse r = Parse({"write_bw", "h", "-t", "16"});
  ASSERT_FALSE(r.exit) << r.output;
  EXPECT_EQ(r.config.client.params.cq_mod, 16u);
  // Given explicitly it must fit.
  ExpectUsage({"write_bw", "h", "-t", "16", "--cq-mod", "32"}, "cq moderation");
}

TEST(ParseCli, ServerRecordsExplicitFields) {
  CliParse r = Parse({"send_bw", "-s", "1024", "--transport", "tcp", "-p", "0"});
  ASSERT_FALSE(r.exit) << r.output;
  EXPECT_EQ(r.config.server_options.explicit_fields, kFieldSize | kFieldTransport);
  EXPECT_EQ(r.config.server_options.port, 0);
  EXPECT_EQ(r.config.server_options.expect.transport, Transport::kTcp);
}

TEST(ParseCli, RejectsInvalidCombinations) {
  ExpectUsage({}, "TEST");
  ExpectUsage({"atomic_bw"}, "atomic_bw");
  ExpectUsage({"write_bw", "h", "-n", "10", "-D", "2"}, "exclude");
  ExpectUsage({"write_bw", "h", "-D", "0"}, "duration");
  ExpectUsage({"write_bw", "h", "-R", "--transport", "tcp"}, "rdma_cm");
  ExpectUsage({"write_lat", "h", "-q", "2"}, "one QP");
  ExpectUsage({"write_lat", "h", "-l", "2", "-t", "4"}, "one message");
  ExpectUsage({"read_lat", "h", "-I", "64"}, "inlined");
  ExpectUsage({"write_bw", "h", "-s", "0"}, "size");
  ExpectUsage({"write_bw", "h", "-s", "4294967296"}, "size");
  ExpectUsage({"write_bw", "h", "-q", "0"}, "QPs");
  ExpectUsage({"write_bw", "h", "-q", "100000"}, "QPs");
  ExpectUsage({"write_bw", "h", "-t", "0"}, "tx depth");
  ExpectUsage({"write_bw", "h", "-l", "200"}, "post list");
  ExpectUsage({"write_lat", "h", "-n", "2"}, "iterations");
  ExpectUsage({"write_bw", "h", "-i", "0"}, "ib-port");
  ExpectUsage({"write_bw", "h", "-p", "70000"}, "port");
  ExpectUsage({"write_bw", "h", "-p", "0"}, "port");
  ExpectUsage({"write_bw", "h", "--forever"}, "--forever");
  ExpectUsage({"write_bw", "h", "--bind", "0.0.0.0"}, "--bind");
  ExpectUsage({"write_bw", "h", "--transport", "udp"}, "transport");
  ExpectUsage({"write_bw", "h", "--timeout", "0"}, "timeout");
  ExpectUsage({"write_bw", "h", "-s", "abc"}, "size");
  ExpectUsage({"write_bw", "h", "extra"}, "extra");
  ExpectUsage({"write_bw", "--no-such-flag"}, "no-such-flag");
}

// Exact arguments: an option missing its value, or "--opt=" empty, is a usage error naming it
// rather than a value taken from the next argument (issue 51).
TEST(ParseCli, OptionMissingItsValueIsRefused) {
  ExpectUsage({"write_bw", "-d"}, "-d needs a value");
  ExpectUsage({"write_bw", "-d", "-p", "18516"}, "-d needs a value (-p after it is an option)");
  ExpectUsage({"write_bw", "h", "-s", "--json"}, "-s needs a value");
  ExpectUsage({"write_bw", "--sysfs=", "--bind=::1"}, "--sysfs is empty");
  ExpectUsage({"write_bw", "--secret-file=", "-p", "1"}, "--secret-file is empty");
  // A negative number is a value (the range check then judges it), and flags take none.
  ExpectUsage({"write_bw", "h", "-x", "-1"}, "gid-index");
  CliParse r = Parse({"write_bw", "-R", "-d", "mlx5_0", "--perftest", "-p", "18516"});
  ASSERT_FALSE(r.exit) << r.output;
  EXPECT_EQ(r.config.perftest_options.local.device, "mlx5_0");
  EXPECT_EQ(r.config.perftest_options.port, 18516);
}

TEST(ParseCli, PerftestProtocolServesOneStockWriteBwClient) {
  CliParse r = Parse({"write_bw", "--perftest", "-n", "300", "--report_gbits", "-d", "rxe0"});
  ASSERT_FALSE(r.exit) << r.output;
  EXPECT_TRUE(r.config.perftest);
  EXPECT_TRUE(r.config.gbits);
  EXPECT_TRUE(r.config.server);
  EXPECT_EQ(r.config.server_options.expect.iterations, 300u);
  EXPECT_EQ(r.config.perftest_options.params.iterations, 300u);
  EXPECT_TRUE(r.config.perftest_options.gbits);
  EXPECT_EQ(r.config.perftest_options.local.device, "rxe0");
  EXPECT_EQ(r.config.perftest_options.port, 18515);
  // The client of a stock server: perftest's moderation, 1 above 8 KiB messages.
  CliParse client = Parse({"write_bw", "10.0.0.2", "--perftest"});
  ASSERT_FALSE(client.exit) << client.output;
  EXPECT_EQ(client.config.client.params.cq_mod, 1u);
  EXPECT_EQ(Parse({"write_bw", "10.0.0.2", "--perftest", "-s", "4096"}).config.client.params.cq_mod,
            100u);
  EXPECT_EQ(Parse({"write_bw", "h", "--perftest", "-Q", "7"}).config.client.params.cq_mod, 7u);
  // Every test: ib_read_bw, ib_send_lat, ...
  for (const char* test : {"read_bw", "send_bw", "read_lat", "send_lat"}) {
    CliParse t = Parse({test, "--perftest"});
    ASSERT_FALSE(t.exit) << test << ": " << t.output;
    EXPECT_EQ(TestName(t.config.perftest_options.params.test), test);
  }
  // -D for latency too: perftest's whole run, a quarter of it (whole seconds) either side.
  for (const char* test : {"write_lat", "read_lat", "send_lat"}) {
    CliParse d = Parse({test, "h", "--perftest", "-D", "5"});
    ASSERT_FALSE(d.exit) << test << ": " << d.output;
    EXPECT_EQ(d.config.perftest_options.params.duration, absl::Seconds(3)) << test;
    EXPECT_EQ(d.config.perftest_options.params.margin, absl::Seconds(1)) << test;
    EXPECT_EQ(d.config.perftest_options.params.iterations, 0u) << test;
  }
  ExpectUsage({"write_lat", "--perftest", "-D", "2", "--margin", "1"}, "leaves no window");
  EXPECT_FALSE(Parse({"write_lat", "h", "--perftest"}).exit);
  EXPECT_TRUE(Parse({"write_bw", "--perftest", "-R"}).config.perftest_options.params.rdma_cm);
  // -b: bidirectional bandwidth tests (send_bw too), not latency.
  EXPECT_TRUE(Parse({"write_bw", "h", "--perftest", "-b"}).config.perftest_options.duplex);
  EXPECT_TRUE(Parse({"read_bw", "--perftest", "--bidirectional"}).config.perftest_options.duplex);
  EXPECT_FALSE(Parse({"write_bw", "h", "--perftest"}).config.perftest_options.duplex);
  EXPECT_TRUE(Parse({"send_bw", "h", "--perftest", "-b"}).config.perftest_options.duplex);
  ExpectUsage({"write_lat", "h", "--perftest", "-b"}, "-b (bidirectional) is for the bandwidth");
  ExpectUsage({"send_lat", "--perftest", "-b"}, "-b (bidirectional) is for the bandwidth");
  ExpectUsage({"write_bw", "h", "-b"}, "--bidirectional goes with --perftest");
  // -a: every size up to perftest's MAX_SIZE, its CQ moderation kept (not 1 above 8 KiB).
  CliParse all = Parse({"read_bw", "h", "--perftest", "-a", "-R"});
  ASSERT_FALSE(all.exit) << all.output;
  EXPECT_TRUE(all.config.perftest_options.params.all_sizes);
  EXPECT_EQ(all.config.perftest_options.params.size, 8388608u);
  EXPECT_EQ(all.config.perftest_options.params.cq_mod, 100u);
  const std::vector<uint64_t> sizes = SizesToRun(all.config.perftest_options.params);
  ASSERT_EQ(sizes.size(), 23u);  // 2 B .. 8 MiB, as perftest's RUN_ALL
  EXPECT_EQ(sizes.front(), 2u);
  EXPECT_EQ(sizes[1], 4u);
  EXPECT_EQ(sizes.back(), 8388608u);
  EXPECT_EQ(SizesToRun(
                Parse({"read_bw", "h", "--perftest", "-s", "4096"}).config.perftest_options.params),
            std::vector<uint64_t>{4096});
  EXPECT_EQ(
      Parse({"write_bw", "--perftest", "-a", "-t", "64"}).config.perftest_options.params.cq_mod,
      64u);
  ExpectUsage({"write_bw", "h", "--perftest", "-a", "-D", "5"},
              "Duration mode currently doesn't support running on all sizes.");
  ExpectUsage({"write_lat", "h", "--perftest", "-a"}, "-a (all sizes) is for the bandwidth tests");
  CliParse send_both = Parse({"send_bw", "h", "--perftest", "-a", "-b"});
  ASSERT_FALSE(send_both.exit) << send_both.output;
  EXPECT_TRUE(send_both.config.perftest_options.duplex);
  CliParse send_all = Parse({"send_bw", "h", "--perftest", "-a"});
  ASSERT_FALSE(send_all.exit) << send_all.output;
  EXPECT_TRUE(send_all.config.perftest_options.params.all_sizes);
  CliParse both = Parse({"write_bw", "--perftest", "-a", "-b"});
  ASSERT_FALSE(both.exit) << both.output;
  EXPECT_TRUE(both.config.perftest_options.params.all_sizes);
  EXPECT_TRUE(both.config.perftest_options.duplex);
  ExpectUsage({"write_bw", "h", "-a"}, "--all goes with --perftest");
  // NUMA placement as current perftest: the NIC's node by default, perftest's flags and words.
  EXPECT_EQ(Parse({"write_bw", "h", "--perftest"}).config.perftest_options.local.placement.mode,
            Placement::Mode::kAuto);
  EXPECT_EQ(Parse({"write_bw", "h"}).config.client.local.placement.mode, Placement::Mode::kNone);
  CliParse node = Parse({"write_bw", "--perftest", "--numa_node", "1"});
  EXPECT_EQ(node.config.perftest_options.local.placement.mode, Placement::Mode::kNode);
  EXPECT_EQ(node.config.perftest_options.local.placement.node, 1);
  CliParse pin = Parse({"write_bw", "h", "--perftest", "--pin_cores=0-3,8"});
  EXPECT_EQ(pin.config.perftest_options.local.placement.mode, Placement::Mode::kCpus);
  EXPECT_EQ(pin.config.perftest_options.local.placement.cpus, "0-3,8");
  EXPECT_EQ(Parse({"write_bw", "h", "--perftest", "--disable_numa"})
                .config.perftest_options.local.placement.mode,
            Placement::Mode::kOff);
  ExpectUsage({"write_bw", "h", "--perftest", "--numa_node", "0", "--pin_cores", "1"},
              "--numa_node and --pin_cores cannot be used together");
  ExpectUsage({"write_bw", "h", "--numa_node", "0"}, "--numa_node goes with --perftest");
  // -T: perftest's type of service, for rdma_cm connections only.
  EXPECT_EQ(Parse({"write_bw", "h", "--perftest", "-R", "-T", "105"}).config.client.params.tos,
            105);
  EXPECT_EQ(Parse({"write_bw", "h", "-R", "--tos=41"}).config.client.params.tos, 41);
  EXPECT_EQ(Parse({"write_bw", "h", "-R"}).config.client.params.tos, -1);
  ExpectUsage({"write_bw", "h", "--perftest", "-T", "105"}, "TOS only valid for rdma_cm");
  ExpectUsage({"write_bw", "h", "-R", "-T", "256"}, "--tos");
  ExpectUsage({"write_bw", "--perftest", "--secret-file", "/etc/hostname"}, "prove a secret");
  ExpectUsage({"write_bw", "--report_gbits"}, "--report_gbits goes with --perftest");
}

// perftest's -D is the whole run: a quarter of it (whole seconds) as margin either side of the
// measured window, or -f/--margin; a run too short for its margins is refused.
TEST(ParseCli, PerftestDurationIsTheWholeRun) {
  struct Case {
    std::vector<std::string> args;
    absl::Duration window, margin;
  };
  for (const Case& c : std::vector<Case>{
           {{"-D", "5"}, absl::Seconds(3), absl::Seconds(1)},
           {{"-D", "30"}, absl::Seconds(16), absl::Seconds(7)},
           {{"-D", "10", "-f", "1"}, absl::Seconds(8), absl::Seconds(1)},
           {{"-D", "3"}, absl::Seconds(3), absl::ZeroDuration()},
       }) {
    std::vector<std::string> args = {"write_bw", "h", "--perftest"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    CliParse r = Parse(args);
    ASSERT_FALSE(r.exit) << r.output;
    EXPECT_EQ(r.config.perftest_options.params.duration, c.window) << c.args[1];
    EXPECT_EQ(r.config.perftest_options.params.margin, c.margin) << c.args[1];
  }
  ExpectUsage({"write_bw", "h", "--perftest", "-D", "4", "-f", "2"}, "no window");
  // Without --perftest, -D is the window itself and the margin 2 s.
  CliParse own = Parse({"write_bw", "h", "-D", "5"});
  ASSERT_FALSE(own.exit) << own.output;
  EXPECT_EQ(own.config.client.params.duration, absl::Seconds(5));
}

// perftest's output flags, as perftest takes them; without --perftest they are usage errors.
TEST(ParseCli, PerftestOutputFlags) {
  CliParse r = Parse({"write_bw", "h", "--perftest", "--output=bandwidth", "--out_json",
                      "--out_json_file", "/tmp/x.json", "--perform_warm_up", "-m", "1024", "-F"});
  ASSERT_FALSE(r.exit) << r.output;
  EXPECT_EQ(r.config.output, perftest::Output::kBandwidth);
  EXPECT_EQ(r.config.out_json_file, "/tmp/x.json");
  EXPECT_TRUE(r.config.perftest_options.warm_up);
  EXPECT_EQ(r.config.perftest_options.mtu, 1024);
  // --out_json alone: perftest's default file; --out_json_file alone writes nothing (as perftest).
  EXPECT_EQ(Parse({"write_bw", "h", "--perftest", "--out_json"}).config.out_json_file,
            "perftest_out.json");
  EXPECT_EQ(
      Parse({"write_bw", "h", "--perftest", "--out_json_file", "a.json"}).config.out_json_file, "");
  EXPECT_EQ(Parse({"read_bw", "h", "--perftest", "--output", "message_rate"}).config.output,
            perftest::Output::kMessageRate);
  EXPECT_EQ(Parse({"send_lat", "h", "--perftest", "--output", "latency"}).config.output,
            perftest::Output::kLatency);
  EXPECT_EQ(Parse({"write_bw", "h", "--perftest"}).config.output, perftest::Output::kFull);
  ExpectUsage({"write_bw", "h", "--perftest", "--output", "latency"},
              "Output verbosity level for BW can be: bandwidth, message_rate");
  ExpectUsage({"write_lat", "h", "--perftest", "--output", "bandwidth"},
              "Output verbosity level for LAT can be: latency");
  ExpectUsage({"write_bw", "h", "--perftest", "--output", "everything"}, "--output");
  ExpectUsage({"write_bw", "h", "--perftest", "-m", "1500"}, "--mtu");
  for (const char* flag : {"--output=bandwidth", "--out_json", "--perform_warm_up", "-F"}) {
    ExpectUsage({"write_bw", "h", flag}, "goes with --perftest");
  }
}

// perftest's GPU flags: the vendor, the GPU, the registration path; perftest's own refusals.
TEST(ParseCli, PerftestGpuMemory) {
  CliParse r = Parse({"write_bw", "h", "--perftest", "--use_cuda", "1", "--use_cuda_dmabuf"});
  ASSERT_FALSE(r.exit) << r.output;
  ASSERT_TRUE(r.config.perftest_options.local.gpu.has_value());
  EXPECT_EQ(r.config.perftest_options.local.gpu->vendor, gpumem::GpuVendor::kCuda);
  EXPECT_EQ(r.config.perftest_options.local.gpu->device, "1");
  EXPECT_TRUE(r.config.perftest_options.local.gpu->dmabuf);
  CliParse bus = Parse({"read_bw", "--perftest", "--use_cuda_bus_id", "0000:3b:00.0"});
  ASSERT_FALSE(bus.exit) << bus.output;
  EXPECT_EQ(bus.config.perftest_options.local.gpu->device, "0000:3b:00.0");
  EXPECT_FALSE(bus.config.perftest_options.local.gpu->dmabuf);  // nvidia_peermem, as perftest
  CliParse rocm = Parse({"send_bw", "h", "--perftest", "--use_rocm", "0", "--use_rocm_dmabuf"});
  ASSERT_FALSE(rocm.exit) << rocm.output;
  EXPECT_EQ(rocm.config.perftest_options.local.gpu->vendor, gpumem::GpuVendor::kRocm);
  EXPECT_TRUE(rocm.config.perftest_options.local.gpu->dmabuf);
  EXPECT_FALSE(
      Parse({"write_bw", "h", "--perftest"}).config.perftest_options.local.gpu.has_value());
  ExpectUsage({"write_bw", "h", "--perftest", "--use_cuda_dmabuf"},
              "CUDA DMA-BUF cannot be used without CUDA");
  ExpectUsage({"write_bw", "h", "--perftest", "--use_rocm_dmabuf"},
              "ROCm DMA-BUF cannot be used without ROCm");
  ExpectUsage({"write_bw", "h", "--perftest", "--use_cuda", "0", "--use_rocm", "0"},
              "Can't use multiple memory types");
  ExpectUsage({"write_lat", "h", "--perftest", "--use_cuda", "0"}, "bandwidth tests");
  // Our own protocol: the client's buffer (the responder's serves latency tests too).
  CliParse own = Parse({"write_bw", "h", "--use_cuda_bus_id", "0000:3b:00.0"});
  ASSERT_FALSE(own.exit) << own.output;
  ASSERT_TRUE(own.config.client.local.gpu.has_value());
  EXPECT_EQ(own.config.client.local.gpu->device, "0000:3b:00.0");
  ExpectUsage({"write_bw", "--use_cuda", "0"}, "GPU memory without --perftest is for the client");
  ExpectUsage({"write_bw", "h", "--use_cuda", "0", "--transport=tcp"},
              "GPU memory needs the rdma transport");
}

TEST(ParseCli, HelpExitsZero) {
  CliParse r = Parse({"--help"});
  EXPECT_TRUE(r.exit);
  EXPECT_EQ(r.exit_code, kExitOk);
  EXPECT_NE(r.output.find("--rdma_cm"), std::string::npos);
}

// The agent's --probe-perftest lines: fabric-probe's server flags with --perftest implied; a host,
// whom it admits and what it prints are refused with the reason.
TEST(ParsePerftestResponder, ServerLines) {
  absl::StatusOr<PerftestServerOptions> o =
      ParsePerftestResponder("write_bw  -p 18516\t-d mlx5_0 -x 3 -s 4096 -q 2");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->params.test, TestKind::kWriteBw);
  EXPECT_EQ(o->port, 18516);
  EXPECT_EQ(o->local.device, "mlx5_0");
  EXPECT_EQ(o->local.gid_index, 3);
  EXPECT_EQ(o->params.size, 4096u);
  EXPECT_EQ(o->params.num_qps, 2u);
  EXPECT_FALSE(o->allow.has_value());
  EXPECT_EQ(o->local.placement.mode, Placement::Mode::kNone);
  o = ParsePerftestResponder("send_lat -D 8");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->params.duration, absl::Seconds(4));
  o = ParsePerftestResponder("read_lat -R");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->params.test, TestKind::kReadLat);
  EXPECT_EQ(o->port, 18515);
  EXPECT_TRUE(o->params.rdma_cm);

  struct Bad {
    const char* line;
    const char* says;
  } bad[] = {
      {"write_bw 10.0.0.2", "names a host"},
      {"write_bw --allow 10.0.0.0/8", "--probe-allow"},
      {"write_bw --allow=10.0.0.0/8", "--probe-allow"},
      {"write_bw --out_json", "logs each test"},
      {"write_bw --output=bandwidth", "logs each test"},
      {"write_bw --forever", "logs each test"},
      {"write_bw --help", "logs each test"},
      {"write_bw --numa_node=0", "moves none of its threads"},
      {"write_bw --disable_numa", "moves none of its threads"},
      {"write_bw -s nope", "-s"},
      {"write_lat -D 2 --margin 1", "leaves no window"},
      {"scan_bw", "scan_bw"},
      {"", "TEST"},
      // An option missing its value is refused, named, whatever follows it (issue 51: "-d" at
      // the end took the appended "--perftest" as the device; "-d -p 18516" listened on 18515).
      {"write_bw -p 18516 -d", "-d needs a value"},
      {"write_bw -d -p 18516", "-d needs a value (-p after it is an option)"},
      {"write_bw --ib-dev --port 18516", "--ib-dev needs a value"},
      {"write_bw -x -R", "-x needs a value"},
      {"write_bw -p", "-p needs a value"},
      {"write_bw -p= -d mlx5_0", "--port"},  // CLI11 takes "=" as the value: out of range
      {"write_bw --port= -d mlx5_0", "--port is empty"},
      {"write_bw --ib-dev= -p 18516", "--ib-dev is empty"},
  };
  for (const Bad& b : bad) {
    o = ParsePerftestResponder(b.line);
    ASSERT_FALSE(o.ok()) << b.line;
    EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument) << b.line;
    EXPECT_THAT(std::string(o.status().message()), HasSubstr(b.says)) << b.line;
    EXPECT_THAT(std::string(o.status().message()), Not(HasSubstr("Run with --help"))) << b.line;
  }
}

}  // namespace
}  // namespace fabric::probes
