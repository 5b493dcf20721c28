// Runs the real fabricctl binary against written example hosts and checks what a user sees:
// output, JSON that parses back into the model, shell output that a real shell evaluates, and
// exit codes.
#include <gmock/gmock.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fabric/v1/agent.pb.h"
#include "fabric/v1/health.pb.h"
#include "fabric/v1/host.pb.h"
#include "fabric/v1/select.pb.h"
#include "tests/cli/cli_fixture.h"
#include "tests/hosts/builder.h"
#include "tests/hosts/hosts.h"

namespace fabric {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST_F(CliTest, InventoryHumanAndJson) {
  const std::string host = Host("roce-9port");
  Result r = Run("inventory " + host);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("roce-node-03"));
  EXPECT_THAT(r.out, HasSubstr("mlx5_8"));
  EXPECT_THAT(r.out, HasSubstr("25.11.128.18"));
  EXPECT_THAT(r.out, HasSubstr("default route"));
  EXPECT_THAT(r.out, HasSubstr("GPUDirect RDMA: available"));
  EXPECT_THAT(r.out, Not(HasSubstr("Problems")));

  Result j = Run("inventory --json " + host);
  ASSERT_EQ(j.code, 0) << j.err;
  v1::Host parsed;
  auto st = google::protobuf::util::JsonStringToMessage(j.out, &parsed);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(parsed.rdma_devices_size(), 9);
  EXPECT_EQ(parsed.hostname(), "roce-node-03");
  EXPECT_THAT(j.out, HasSubstr("\"rdma_devices\""));  // the .proto field names
}

TEST_F(CliTest, TopoMatrix) {
  Result r = Run("topo " + Host("roce-9port"));
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string header, gpu0;
  std::getline(lines, header);
  std::getline(lines, gpu0);
  EXPECT_THAT(header, HasSubstr("NIC0"));
  EXPECT_THAT(r.out, HasSubstr("NIC0:  mlx5_0"));  // The NIC legend.
  // GPU0's row: SYS-free, PIX under NIC1 (mlx5_1).
  std::istringstream cells(gpu0);
  std::vector<std::string> c;
  for (std::string w; cells >> w;) c.push_back(w);
  ASSERT_GE(c.size(), 11u);
  EXPECT_EQ(c[0], "GPU0");
  EXPECT_EQ(c[1], "NODE");  // mlx5_0, another host bridge on NUMA 0
  EXPECT_EQ(c[2], "PIX*");  // mlx5_1, GPU0's pair
  EXPECT_EQ(c[3], "PXB");   // mlx5_2
  EXPECT_EQ(c[6], "SYS");   // mlx5_5
  EXPECT_THAT(r.out, HasSubstr("Legend"));
  EXPECT_THAT(r.out, HasSubstr("*    = the GPU's paired NIC"));
}

// Two GPUs and two NICs per switch: each GPU asked for alone gets its own NIC, the one topo marks
// and the whole-host request gives it.
TEST_F(CliTest, PerGpuSelectFollowsTheHostWidePairing) {
  const std::string host = Host("pcie-2x2");
  Result t = Run("topo " + host);
  ASSERT_EQ(t.code, 0) << t.err;
  std::istringstream lines(t.out);
  std::string header, gpu0, gpu1;
  std::getline(lines, header);
  std::getline(lines, gpu0);
  std::getline(lines, gpu1);
  std::vector<std::string> c;
  std::istringstream cells(gpu1);
  for (std::string w; cells >> w;) c.push_back(w);
  ASSERT_GE(c.size(), 4u) << t.out;
  EXPECT_EQ(c[0], "GPU1");
  EXPECT_EQ(c[2], "PIX");   // mlx5_1: GPU0's
  EXPECT_EQ(c[3], "PIX*");  // mlx5_2: GPU1's

  Result all = Run("select --gpus=all --json " + host);
  ASSERT_EQ(all.code, 0) << all.err;
  v1::Selection whole;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(all.out, &whole).ok()) << all.out;
  ASSERT_EQ(whole.assignments_size(), 8);
  for (const v1::GpuAssignment& want : whole.assignments()) {
    Result one = Run("select --json --gpus=" + want.gpu() + " " + host);
    ASSERT_EQ(one.code, 0) << one.err;
    v1::Selection sel;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(one.out, &sel).ok()) << one.out;
    ASSERT_EQ(sel.assignments_size(), 1);
    EXPECT_EQ(sel.assignments(0).rdma_device(), want.rdma_device()) << want.gpu();
  }
  EXPECT_EQ(whole.assignments(0).rdma_device(), "mlx5_1");
  EXPECT_EQ(whole.assignments(1).rdma_device(), "mlx5_2");
}

TEST_F(CliTest, SelectAndEnvOnTheRoceHost) {
  const std::string host = Host("roce-9port");
  Result s = Run("select --gpus=all --json " + host);
  ASSERT_EQ(s.code, 0) << s.err;
  v1::Selection sel;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(s.out, &sel).ok()) << s.out;
  ASSERT_EQ(sel.assignments_size(), 8);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(sel.assignments(i).rdma_device(), "mlx5_" + std::to_string(i + 1));
    EXPECT_EQ(sel.assignments(i).gid_index(), 3u);
  }

  // The shell output, evaluated by a real shell.
  Result e = Run("env --gpus=all " + host);
  ASSERT_EQ(e.code, 0) << e.err;
  std::ofstream(tmp_ / "env.sh") << e.out;
  const std::string check = absl::StrCat(
      "sh -c '. ", (tmp_ / "env.sh").string(),
      " && printf \"%s|%s|%s|%s\" \"$NCCL_IB_HCA\" \"$NCCL_IB_GID_INDEX\" \"$NCCL_SOCKET_IFNAME\" "
      "\"$UCX_NET_DEVICES\"' > ",
      (tmp_ / "eval").string());
  ASSERT_EQ(std::system(check.c_str()), 0);
  EXPECT_EQ(Slurp(tmp_ / "eval"),
            "=mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1,mlx5_8:1|3|=eth0|"
            "mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1,mlx5_8:1");
}

TEST_F(CliTest, EnvFormatsAndKeepSet) {
  const std::string host = Host("roce-9port");
  Result conf = Run("env --gpus=all --format=nccl-conf " + host);
  ASSERT_EQ(conf.code, 0) << conf.err;
  EXPECT_THAT(conf.out, HasSubstr("\nNCCL_IB_GID_INDEX=3\n"));
  EXPECT_THAT(conf.out, HasSubstr("NCCL_IB_HCA==mlx5_1:1,"));

  Result json = Run("env --gpus=all --format=json " + host);
  ASSERT_EQ(json.code, 0) << json.err;
  google::protobuf::Struct parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json.out, &parsed).ok()) << json.out;
  const google::protobuf::Struct& env = parsed.fields().at("env").struct_value();
  EXPECT_EQ(env.fields().at("NCCL_IB_GID_INDEX").string_value(), "3");
  // Scope and pins travel too: every GPU of the host, no rank asked.
  EXPECT_EQ(parsed.fields().at("scope").list_value().values_size(), 8);
  EXPECT_EQ(parsed.fields().at("pins").struct_value().fields_size(), 0);
  EXPECT_EQ(parsed.fields().at("job_env").struct_value().fields().at("NCCL_IB_HCA").string_value(),
            env.fields().at("NCCL_IB_HCA").string_value());

  Result keep = Run("env --gpus=all --keep-set " + host, "NCCL_IB_GID_INDEX=7");
  ASSERT_EQ(keep.code, 0) << keep.err;
  EXPECT_THAT(keep.out, Not(HasSubstr("NCCL_IB_GID_INDEX")));
  EXPECT_THAT(keep.out, HasSubstr("NCCL_IB_HCA"));
  Result nokeep = Run("env --gpus=all " + host, "NCCL_IB_GID_INDEX=7");
  EXPECT_THAT(nokeep.out, HasSubstr("NCCL_IB_GID_INDEX=3"));

  Result exported = Run("env --gpus=all --export " + host);
  EXPECT_THAT(exported.out, HasSubstr("export NCCL_IB_GID_INDEX=3\n"));
}

TEST_F(CliTest, ExactMatchWithMoreThanTenHcas) {
  const std::string host = Host("many-hcas");
  Result e = Run("env --gpus=all --format=nccl-conf " + host);
  ASSERT_EQ(e.code, 0) << e.err;
  // GPUs in PCI order; the second one's switch-mate mlx5_2 is down, so it gets mlx5_3 (NODE: the
  // first in PCI order among equal ports no other GPU is paired with). The exact-match "=" keeps
  // mlx5_1 from matching mlx5_10/11.
  EXPECT_THAT(e.out, HasSubstr("\nNCCL_IB_HCA==mlx5_1:1,mlx5_3:1,mlx5_10:1,mlx5_11:1\n"));
  EXPECT_THAT(e.out, Not(HasSubstr("mlx5_2:1")));
}

TEST_F(CliTest, ConfigSteersSelectionAndAddsStaticEnv) {
  const std::string host = Host("roce-9port");
  std::ofstream(tmp_ / "agent.json")
      << R"({"selection": {"deny": ["mlx5_1"], "staticEnv": {"NCCL_IB_TIMEOUT": "22"}}})";
  Result e =
      Run(absl::StrCat("env --gpus=all --config=", (tmp_ / "agent.json").string(), " ", host));
  ASSERT_EQ(e.code, 0) << e.err;
  EXPECT_THAT(e.out, HasSubstr("NCCL_IB_TIMEOUT=22"));
  EXPECT_THAT(e.out, Not(HasSubstr("mlx5_1:1,")));

  std::ofstream(tmp_ / "bad.json") << R"({"selection": {"denny": []}})";
  Result bad =
      Run(absl::StrCat("env --gpus=all --config=", (tmp_ / "bad.json").string(), " ", host));
  EXPECT_EQ(bad.code, 2);
  EXPECT_THAT(bad.err, HasSubstr("denny"));
}

TEST_F(CliTest, ExitCodes) {
  const std::string host = Host("roce-9port");
  // Unknown GPU: the host lacks it.
  Result unknown = Run("select --gpus=0000:ee:00.0 " + host);
  EXPECT_EQ(unknown.code, 1);
  EXPECT_THAT(unknown.err, HasSubstr("0000:ee:00.0"));
  // Malformed address: bad input.
  Result malformed = Run("env --gpus=not-a-bdf " + host);
  EXPECT_EQ(malformed.code, 2);
  EXPECT_THAT(malformed.err, HasSubstr("not-a-bdf"));
  // No such sysfs root.
  Result missing = Run("inventory --sysfs=/nonexistent/sys --procfs=/proc");
  EXPECT_EQ(missing.code, 3);
  EXPECT_THAT(missing.err, HasSubstr("/nonexistent/sys"));
  // A GPU given twice, or one that is the BMC's display: bad input.
  Result twice = Run("env --gpus=1a:00.0,0000:1a:00.0 " + host);
  EXPECT_EQ(twice.code, 2);
  EXPECT_THAT(twice.err, HasSubstr("twice"));
  Result display = Run("select --gpus=03:00.0 " + host);
  EXPECT_EQ(display.code, 2);
  EXPECT_THAT(display.err, HasSubstr("management display"));
  // Bad flag, unknown or missing subcommand, missing --gpus.
  Result bogus = Run("bogus " + host);
  EXPECT_EQ(bogus.code, 2);
  EXPECT_THAT(bogus.err, HasSubstr("unknown subcommand \"bogus\""));
  EXPECT_EQ(Run("inventory --no-such-flag " + host).code, 2);
  EXPECT_EQ(Run("").code, 2);
  EXPECT_EQ(Run("env " + host).code, 2);
  EXPECT_EQ(Run("env --gpus=all --format=yaml " + host).code, 2);
  EXPECT_EQ(Run("--help").code, 0);
}

// Every GPU name form, as a launcher or a person writes it; answers echo the name and address.
TEST_F(CliTest, GpuNames) {
  const std::string dgx = Host("dgx-h100-ib");
  const std::string gpu0 = "GPU-c15521b1-b3dc-a50a-9daa-37e51b591d75";  // 0000:19:00.0, mlx5_0
  struct Case {
    std::string gpus;
    int code;
    std::string want;  // in stdout (code 0) or stderr
  };
  const Case cases[] = {
      {gpu0, 0, "GPU " + gpu0 + " (0000:19:00.0) -> mlx5_0:1"},
      {"gpu-C15521B1-B3DC-A50A-9DAA-37E51B591D75", 0, "(0000:19:00.0) -> mlx5_0:1"},
      {"3", 0, "GPU 3 (0000:5f:00.0) -> mlx5_5:1"},
      {"00000000:19:00.0", 0, "GPU 00000000:19:00.0 (0000:19:00.0) -> mlx5_0:1"},
      {"0000:41:00.0", 0, "GPU 0000:41:00.0 -> mlx5_3:1"},
      {"1," + gpu0, 0, "GPU 1 (0000:41:00.0) -> mlx5_3:1"},
      // Well formed, not on this host: exit 1.
      {"GPU-00000000-b3dc-a50a-9daa-37e51b591d75", 1, "no GPU of this host has this UUID"},
      {"8", 1, "8 NVIDIA GPUs"},
      // No NVML on this machine: exit 1, saying so.
      {"MIG-11111111-2222-3333-4444-555555555555", 1,
       "needs libnvidia-ml (NVML), which is not loadable"},
      // Malformed, or the same GPU twice: exit 2.
      {"GPU-c15521b1", 2, "malformed"},
      {"MIG-1234", 2, "malformed"},
      {"gpu0", 2, "nor an index, GPU-<uuid> or MIG-<uuid>"},
      {"0," + gpu0, 2, "twice"},
  };
  for (const Case& c : cases) {
    Result r = Run("select --gpus=" + c.gpus + " " + dgx);
    EXPECT_EQ(r.code, c.code) << c.gpus << "\n" << r.out << r.err;
    EXPECT_THAT(c.code == 0 ? r.out : r.err, HasSubstr(c.want)) << c.gpus;
  }
  // The inventory names each GPU by its index; the wide view adds the UUID.
  Result inv = Run("inventory " + dgx);
  EXPECT_EQ(inv.code, 0);
  EXPECT_THAT(inv.out, HasSubstr("GPU0  0000:19:00.0"));
  EXPECT_THAT(inv.out, Not(HasSubstr(gpu0)));
  Result wide = Run("inventory --wide " + dgx);
  EXPECT_EQ(wide.code, 0);
  EXPECT_THAT(wide.out, HasSubstr(gpu0));

  const std::string amd = Host("amd-mi300x-bnxt");
  Result by_uuid = Run("select --gpus=GPU-5c54e05b42a9ba21 " + amd);
  EXPECT_EQ(by_uuid.code, 0) << by_uuid.err;
  EXPECT_THAT(by_uuid.out, HasSubstr("GPU GPU-5c54e05b42a9ba21 (0000:09:00.0) -> bnxt_re0:1"));
  Result by_index = Run("select --gpus=2 " + amd);
  EXPECT_EQ(by_index.code, 0) << by_index.err;
  EXPECT_THAT(by_index.out, HasSubstr("GPU 2 (0000:69:00.0) -> bnxt_re2:1"));
}

// --gpus=visible under each variable, with the container rule.
TEST_F(CliTest, VisibleGpus) {
  const std::string dgx = Host("dgx-h100-ib");
  const std::string amd = Host("amd-mi300x-bnxt");
  const std::string a = "GPU-c15521b1-b3dc-a50a-9daa-37e51b591d75";  // 0000:19:00.0
  const std::string b = "GPU-3f372617-f0ba-ef3a-86f0-ce2ea6ec39c1";  // 0000:41:00.0
  const std::string clean =
      "env -u NVIDIA_VISIBLE_DEVICES -u CUDA_VISIBLE_DEVICES -u ROCR_VISIBLE_DEVICES "
      "-u HIP_VISIBLE_DEVICES";
  struct Case {
    std::string env;
    const std::string* host;
    int code;
    std::string want;
  };
  const Case cases[] = {
      {"NVIDIA_VISIBLE_DEVICES=" + a + "," + b, &dgx, 0, "GPU " + b + " (0000:41:00.0)"},
      {"NVIDIA_VISIBLE_DEVICES=" + a + "," + b + " CUDA_VISIBLE_DEVICES=1", &dgx, 0,
       "GPU " + b + " (0000:41:00.0) -> mlx5_3:1"},
      {"NVIDIA_VISIBLE_DEVICES=4,6 CUDA_VISIBLE_DEVICES=1", &dgx, 0, "GPU 6 (0000:cf:00.0)"},
      {"CUDA_VISIBLE_DEVICES=2", &dgx, 0, "GPU 2 (0000:50:00.0) -> mlx5_4:1"},
      {"ROCR_VISIBLE_DEVICES=1", &amd, 0, "GPU 1 (0000:19:00.0) -> bnxt_re1:1"},
      {"HIP_VISIBLE_DEVICES=2", &amd, 0, "GPU 2 (0000:69:00.0)"},
      {"ROCR_VISIBLE_DEVICES=0,3 HIP_VISIBLE_DEVICES=1", &amd, 0, "GPU 3 (0000:79:00.0)"},
      {"ROCR_VISIBLE_DEVICES=GPU-5c54e05b42a9ba21", &amd, 0, "(0000:09:00.0) -> bnxt_re0:1"},
      {"NVIDIA_VISIBLE_DEVICES=all", &dgx, 2, "names no GPU"},
      {"NVIDIA_VISIBLE_DEVICES=void", &dgx, 2, "names no GPU"},
      {"CUDA_VISIBLE_DEVICES=", &dgx, 2, "CUDA_VISIBLE_DEVICES is empty"},
      {"", &dgx, 2, "NVIDIA_VISIBLE_DEVICES, CUDA_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES"},
      {"NVIDIA_VISIBLE_DEVICES=" + a + " CUDA_VISIBLE_DEVICES=1", &dgx, 1, "makes 1 GPUs visible"},
      {"NVIDIA_VISIBLE_DEVICES=9", &dgx, 1, "8 NVIDIA GPUs"},
      {"NVIDIA_VISIBLE_DEVICES=GPU-nope", &dgx, 2, "malformed"},
  };
  for (const Case& c : cases) {
    Result r = Run("select --gpus=visible " + *c.host, clean + " " + c.env);
    EXPECT_EQ(r.code, c.code) << c.env << "\n" << r.out << r.err;
    EXPECT_THAT(c.code == 0 ? r.out : r.err, HasSubstr(c.want)) << c.env;
  }
}

TEST_F(CliTest, HostWithoutRdma) {
  auto spec = testing::ExampleHost("roce-9port");
  ASSERT_TRUE(spec.ok());
  std::vector<std::string> names;
  for (const auto& d : spec->rdma) names.push_back(d.name);
  for (const auto& n : names) spec->RemoveRdma(n);
  const std::string host = HostFrom(*spec, "nordma");
  Result inv = Run("inventory " + host);
  EXPECT_EQ(inv.code, 1);
  EXPECT_THAT(inv.err, HasSubstr("no RDMA device"));
  Result env = Run("env --gpus=all " + host);
  EXPECT_EQ(env.code, 1);
  EXPECT_THAT(env.err, HasSubstr("no RDMA device"));
  Result counters = Run("counters --interval=0 " + host);
  EXPECT_EQ(counters.code, 1);
  EXPECT_THAT(counters.out, HasSubstr("0 ports"));
  EXPECT_THAT(counters.err, HasSubstr("no RDMA port found"));
}

std::vector<std::string> LinesOf(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST_F(CliTest, CountersPerPortFromTheSysfsTree) {
  const std::string host = Host("roce-9port");
  Result all_ports = Run("counters --interval=0 " + host);
  ASSERT_EQ(all_ports.code, 0) << all_ports.err;
  EXPECT_THAT(all_ports.out, HasSubstr("9 ports; one reading, no rates; hidden:"));
  EXPECT_THAT(all_ports.out, HasSubstr("\nmlx5_0:1  netdev eth0  ("));
  EXPECT_THAT(all_ports.out, HasSubstr("\n  COUNTER  "));
  EXPECT_THAT(all_ports.out, HasSubstr("\n  counters/port_rcv_data  "));
  EXPECT_THAT(all_ports.out, HasSubstr("\n  hw_counters/np_cnp_sent  "));
  // Zero error counters and the lifespan setting are hidden by default; --all shows them.
  EXPECT_THAT(all_ports.out, Not(HasSubstr("symbol_error")));
  EXPECT_THAT(all_ports.out, Not(HasSubstr("lifespan")));
  Result every = Run("counters --interval=0 --all " + host);
  EXPECT_EQ(every.code, 0);
  EXPECT_THAT(every.out, HasSubstr("\n  counters/symbol_error  "));
  EXPECT_THAT(every.out, HasSubstr("\n  hw_counters/lifespan  "));
  for (const std::string& line : LinesOf(all_ports.out)) EXPECT_LE(line.size(), 100u) << line;

  // The port as the tables spell it, or the device.
  for (const char* device : {"mlx5_3:1", "mlx5_3"}) {
    Result one = Run(absl::StrCat("counters --interval=0 --device=", device, " ", host));
    EXPECT_EQ(one.code, 0) << one.err;
    EXPECT_THAT(one.out, HasSubstr("1 port; one reading"));
    EXPECT_THAT(one.out, HasSubstr("\nmlx5_3:1  netdev "));
    EXPECT_THAT(one.out, Not(HasSubstr("mlx5_0:1")));
  }

  // Two readings: a rate column and the header's Gb/s (the tree does not change: zero).
  Result rates = Run("counters --interval=50ms --device=mlx5_0 " + host);
  EXPECT_EQ(rates.code, 0) << rates.err;
  EXPECT_THAT(rates.out, HasSubstr("1 port; rates over 0.0"));
  EXPECT_THAT(rates.out, HasSubstr("mlx5_0:1  netdev eth0  rx 0.00 Gb/s  tx 0.00 Gb/s"));
  EXPECT_THAT(rates.out, HasSubstr("VALUE  PER-SECOND\n"));

  Result json = Run("counters --interval=0 --json --device=mlx5_0:1 " + host);
  ASSERT_EQ(json.code, 0) << json.err;
  v1::PortCountersResponse parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json.out, &parsed).ok()) << json.out;
  ASSERT_EQ(parsed.ports_size(), 1);
  EXPECT_EQ(parsed.ports(0).netdev(), "eth0");
  EXPECT_GE(parsed.ports(0).counters_size(), 20);  // Zeros too: JSON has every counter.
  EXPECT_THAT(json.out, HasSubstr("\"hw_counters\": ["));
  EXPECT_THAT(json.out, HasSubstr("\"interval_seconds\": 0"));
}

TEST_F(CliTest, CountersBadArguments) {
  const std::string host = Host("roce-9port");
  const struct {
    std::string args;
    int code;
    std::string err;
  } cases[] = {
      {"--device=nope", 1, "no RDMA device \"nope\" on this host (devices: mlx5_0, mlx5_1,"},
      {"--device=mlx5_1:9", 1, "mlx5_1 has no port 9 (ports: 1)"},
      {"--device=mlx5_1:0", 2, "--device: \"mlx5_1:0\" is not DEVICE or DEVICE:PORT"},
      {"--device=a/b", 2, "is not DEVICE or DEVICE:PORT"},
      {"--device=", 2, "--device is empty"},
      {"--interval=abc", 2, "--interval: \"abc\" is not a duration"},
      {"--interval=2h", 2, "out of range (0, or 10ms to 1h)"},
      {"--interval=-1", 2, "out of range"},
      {"--all --json", 2, "--all is for the table"},
      {"--target=/x.sock", 2, "--target is for asking the agent"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.args);
    // Each is refused before the first reading, so the default 1 s interval costs nothing.
    Result r = Run(absl::StrCat("counters ", c.args, " ", host));
    EXPECT_EQ(r.code, c.code) << r.err;
    EXPECT_THAT(r.err, HasSubstr(c.err));
    EXPECT_EQ(r.out, "");
  }
}

TEST_F(CliTest, HealthExitCodesFollowTheMonitoringPluginConvention) {
  Result ok = Run("health " + Host("roce-9port"));
  EXPECT_EQ(ok.code, 0) << ok.out << ok.err;
  EXPECT_THAT(ok.out, HasSubstr("FABRIC OK - 0 critical, 0 warning; 9 RDMA devices"));

  auto spec = testing::ExampleHost("roce-9port");
  ASSERT_TRUE(spec.ok());
  spec->FindRdma("mlx5_3")->ports[0].rate = "200 Gb/sec (4X HDR)";
  Result warn = Run("health " + HostFrom(*spec, "slow"));
  EXPECT_EQ(warn.code, 1) << warn.out;
  EXPECT_THAT(warn.out, HasSubstr("WARNING port_rate.below_peers mlx5_3:1: rate 200 Gb/s"));

  const std::string many = Host("many-hcas");
  Result crit = Run("health " + many);
  EXPECT_EQ(crit.code, 2) << crit.out;
  EXPECT_THAT(crit.out, HasSubstr("CRITICAL port_state.down mlx5_2:1: port DOWN"));
  EXPECT_THAT(crit.out, HasSubstr("-> CHECK_SWITCH_PORT"));
  Result json = Run("health --json " + many);
  EXPECT_EQ(json.code, 2);
  v1::Health parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json.out, &parsed).ok()) << json.out;
  EXPECT_EQ(parsed.verdict(), v1::SEVERITY_CRITICAL);
  ASSERT_EQ(parsed.findings_size(), 1);
  EXPECT_EQ(parsed.findings(0).subject(), "mlx5_2:1");

  Result unknown = Run("health --sysfs=/nonexistent/sys");
  EXPECT_EQ(unknown.code, 3);
  EXPECT_THAT(unknown.out, HasSubstr("FABRIC UNKNOWN"));
  EXPECT_EQ(Run("health --no-such-flag").code, 3);
}

TEST_F(CliTest, BrokenTreeStillAnswers) {
  const std::string host = Host("broken");
  Result inv = Run("inventory " + host);
  EXPECT_EQ(inv.code, 0) << inv.err;
  EXPECT_THAT(inv.out, HasSubstr("Problems (fields left unknown)"));
  EXPECT_THAT(inv.out, HasSubstr("fw_ver unknown"));
  Result env = Run("env --gpus=all " + host);
  EXPECT_EQ(env.code, 0) << env.err;
  EXPECT_THAT(env.out, HasSubstr("NCCL_IB_HCA="));
}

}  // namespace
}  // namespace fabric
