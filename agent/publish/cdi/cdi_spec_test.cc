// The CDI spec on every example host: its golden bytes (testdata/golden/<host>.json;
// FABRIC_UPDATE_GOLDEN=1 rewrites, scripts/regen-golden.sh), the schema's names, and the property
// that lets a container take any combination of devices: for every pair, each variable both set
// has one value, and no device's variables name an RDMA device whose uverbs node it lacks.
#include "agent/publish/cdi/cdi_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/inventory/query/host_query.h"
#include "agent/policy/select/gpu_names.h"
#include "agent/policy/select/select.h"
#include "tests/hosts/discovered.h"
#include "tests/hosts/hosts.h"

namespace fabric::cdi {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

class CdiSpecTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    host_ = testing::DiscoveredExampleHost(GetParam());
    ASSERT_GT(host_.rdma_devices_size(), 0);
    for (const v1::RdmaDevice& d : host_.rdma_devices()) {
      if (!d.uverbs_device().empty()) uverbs_[d.name()] = "/dev/infiniband/" + d.uverbs_device();
    }
  }
  v1::Host host_;
  std::map<std::string, std::string> uverbs_;  // RDMA device -> its node.
};

TEST_P(CdiSpecTest, PrintsItsGoldenBytes) {
  absl::StatusOr<std::string> got = SpecJson(host_, {});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, *SpecJson(host_, {})) << "two renderings differ";
  const std::filesystem::path file = std::filesystem::path(FABRIC_SOURCE_DIR) /
                                     "agent/publish/cdi/testdata/golden" / (GetParam() + ".json");
  if (std::getenv("FABRIC_UPDATE_GOLDEN") != nullptr) {
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file) << *got;
    return;
  }
  std::ifstream in(file);
  ASSERT_TRUE(in.good()) << file << " is missing: run scripts/regen-golden.sh";
  std::stringstream want;
  want << in.rdbuf();
  EXPECT_EQ(*got, want.str()) << "the CDI spec of " << GetParam()
                              << " differs from its golden file; if meant, run "
                                 "scripts/regen-golden.sh and review the diff";
}

// What runtimes parse: the version, the kind, unique valid names, env as NAME=VALUE, nodes with
// a container path and (with a device root) the host path under it.
TEST_P(CdiSpecTest, FollowsTheSchema) {
  absl::StatusOr<std::string> text = SpecJson(
      host_, {},
      SpecOptions{
          .dev_root = "/var/tmp/x", .nccl_env_plugin = "", .pod_helper = "", .host_file_dir = ""});
  ASSERT_TRUE(text.ok()) << text.status();
  const nlohmann::json spec = nlohmann::json::parse(*text);
  EXPECT_EQ(spec["cdiVersion"], "0.5.0");
  EXPECT_EQ(spec["kind"], "fabric.io/rdma");
  std::set<std::string> names;
  for (const auto& d : spec["devices"]) {
    const std::string name = d["name"];
    EXPECT_TRUE(ValidDeviceName(name)) << name;
    EXPECT_TRUE(names.insert(name).second) << "twice: " << name;
    for (const auto& e : d["containerEdits"].value("env", nlohmann::json::array())) {
      EXPECT_THAT(std::string(e), ::testing::MatchesRegex("[A-Za-z_][A-Za-z0-9_]*=.*"));
    }
    ASSERT_FALSE(d["containerEdits"]["deviceNodes"].empty()) << name;
    for (const auto& n : d["containerEdits"]["deviceNodes"]) {
      const std::string path = n["path"];
      EXPECT_THAT(path, ::testing::StartsWith("/dev/infiniband/"));
      EXPECT_EQ(n["hostPath"], "/var/tmp/x" + path);
    }
  }
  EXPECT_THAT(names, Contains("all"));
  for (const auto& [dev, node] : uverbs_) EXPECT_THAT(names, Contains(dev));
}

// With NCCL's environment plugin: the spec's own edits mount the library, the helper and the
// published host read-only and name the plugin; no device sets an NCCL_* variable, which would
// win over the plugin's answer. One of the three missing: no plugin, the variables as before.
TEST_P(CdiSpecTest, NcclEnvPluginIsMountedForEveryDevice) {
  SpecOptions opt{.dev_root = "",
                  .nccl_env_plugin = "/usr/lib/x86_64-linux-gnu/fabric-agent/libnccl-env-fabric.so",
                  .pod_helper = "/usr/bin/fabric-env",
                  .host_file_dir = "/run/fabric-env"};
  absl::StatusOr<std::string> text = SpecJson(host_, {}, opt);
  ASSERT_TRUE(text.ok()) << text.status();
  const nlohmann::json spec = nlohmann::json::parse(*text);
  const nlohmann::json& edits = spec["containerEdits"];
  EXPECT_EQ(edits["env"],
            nlohmann::json::array({std::string("NCCL_ENV_PLUGIN=") + kNcclEnvPluginInContainer}));
  ASSERT_EQ(edits["mounts"].size(), 3u);
  std::map<std::string, std::string> mounts;
  for (const auto& m : edits["mounts"]) {
    mounts[m["containerPath"]] = m["hostPath"];
    EXPECT_THAT(m["options"], Contains("ro"));
  }
  EXPECT_EQ(mounts[kNcclEnvPluginInContainer], opt.nccl_env_plugin);
  EXPECT_EQ(mounts[kPodHelperInContainer], "/usr/bin/fabric-env");
  EXPECT_EQ(mounts["/run/fabric-env"], "/run/fabric-env");
  bool other_env = false;
  for (const auto& d : spec["devices"]) {
    for (const auto& e : d["containerEdits"].value("env", nlohmann::json::array())) {
      EXPECT_THAT(std::string(e), Not(::testing::StartsWith("NCCL_")));
      other_env = true;
    }
  }
  EXPECT_TRUE(other_env) << "the other libraries' variables stay";
  opt.pod_helper.clear();
  const nlohmann::json plain = nlohmann::json::parse(*SpecJson(host_, {}, opt));
  EXPECT_FALSE(plain.contains("containerEdits"));
  EXPECT_EQ(plain["devices"], nlohmann::json::parse(*SpecJson(host_, {}))["devices"]);
}

// gpu<K> holds the node of the NIC `fabricctl select --gpus=all` gives GPU K (the index
// `--gpus=K` takes), and `all` those of every chosen NIC.
TEST_P(CdiSpecTest, GpuDevicesFollowTheSelection) {
  absl::StatusOr<std::vector<Device>> devices = Devices(host_, {});
  ASSERT_TRUE(devices.ok()) << devices.status();
  auto sel = SelectNics(host_, CollectiveGpus(host_), {});
  ASSERT_TRUE(sel.ok()) << sel.status();
  std::map<std::string, std::string> chosen;  // GPU PCI address -> its RDMA device.
  std::set<std::string> all_nodes = {kRdmaCm};
  for (const v1::GpuAssignment& a : sel->assignments()) {
    chosen[a.gpu()] = a.rdma_device();
    all_nodes.insert(uverbs_.at(a.rdma_device()));
  }
  size_t gpus = 0;
  for (const Device& d : *devices) {
    if (d.name == "all") {
      EXPECT_EQ(std::set<std::string>(d.nodes.begin(), d.nodes.end()), all_nodes);
      EXPECT_EQ(d.nodes.size(), all_nodes.size());
    } else if (d.name.rfind("gpu", 0) == 0) {
      ++gpus;
      auto gpu = ResolveGpu(host_, d.name.substr(3), nullptr);
      ASSERT_TRUE(gpu.ok()) << d.name << ": " << gpu.status();
      EXPECT_THAT(d.nodes, ::testing::ElementsAre(uverbs_.at(chosen.at(gpu->pci_address)), kRdmaCm))
          << d.name;
    }
  }
  EXPECT_GT(gpus, 0u);
}

// The RDMA device names a value mentions ("=mlx5_1:1,mlx5_2:1", "mlx5_1:1", "^mlx5_0").
std::set<std::string> NamedDevices(const std::string& value,
                                   const std::set<std::string>& rdma_devices) {
  std::set<std::string> out;
  for (absl::string_view tok : absl::StrSplit(value, absl::ByAnyChar("=,:^ ;"))) {
    if (rdma_devices.count(std::string(tok))) out.insert(std::string(tok));
  }
  return out;
}

TEST_P(CdiSpecTest, AnyTwoDevicesAgree) {
  absl::StatusOr<std::vector<Device>> devices = Devices(host_, {});
  ASSERT_TRUE(devices.ok()) << devices.status();
  std::set<std::string> rdma;
  for (const v1::RdmaDevice& d : host_.rdma_devices()) rdma.insert(d.name());
  for (const Device& d : *devices) {
    for (const auto& [name, value] : d.env) {
      for (const std::string& dev : NamedDevices(value, rdma)) {
        EXPECT_THAT(d.nodes, Contains(uverbs_.at(dev)))
            << d.name << ": " << name << "=" << value << " names " << dev << " without its node";
      }
    }
  }
  // 520 devices on sriov-512vf: every pair, but each env compared once per name.
  for (size_t i = 0; i < devices->size(); ++i) {
    for (size_t j = i + 1; j < devices->size(); ++j) {
      const Device& a = (*devices)[i];
      const Device& b = (*devices)[j];
      for (const auto& [name, value] : a.env) {
        auto it = b.env.find(name);
        if (it != b.env.end()) {
          ASSERT_EQ(it->second, value) << a.name << " and " << b.name << " disagree on " << name;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(ExampleHosts, CdiSpecTest,
                         ::testing::ValuesIn(testing::ExampleHostNames()),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           return testing::ExampleHostTestName(p.param);
                         });

// A container with two GPUs: their devices together give both NICs' nodes once each, and an
// environment with no device list, so libibverbs' list (the nodes) is the pin.
TEST(CdiSpec, TwoGpuContainer) {
  const v1::Host& host = testing::DiscoveredExampleHost("roce-9port");
  absl::StatusOr<std::vector<Device>> devices = Devices(host, {});
  ASSERT_TRUE(devices.ok()) << devices.status();
  std::map<std::string, const Device*> by_name;
  for (const Device& d : *devices) by_name[d.name] = &d;
  ASSERT_TRUE(by_name.count("gpu0") && by_name.count("gpu1") && by_name.count("all"));
  const Device& g0 = *by_name["gpu0"];
  const Device& g1 = *by_name["gpu1"];
  EXPECT_NE(g0.nodes[0], g1.nodes[0]) << "two GPUs, one NIC: the pairing gives each its own";
  EXPECT_EQ(g0.env, g1.env);
  EXPECT_FALSE(g0.env.count("NCCL_IB_HCA"));
  EXPECT_FALSE(g0.env.count("UCX_NET_DEVICES"));
  // The job-wide rules are there, as in `all`, with the same values.
  const Device& all = *by_name["all"];
  ASSERT_FALSE(g0.env.empty());
  for (const auto& [name, value] : g0.env) EXPECT_EQ(all.env.at(name), value) << name;
  EXPECT_TRUE(all.env.count("NCCL_IB_HCA"));
}

// Without an active port no GPU has a NIC: the per-NIC devices alone, notes saying why.
TEST(CdiSpec, NoSelectionLeavesTheNics) {
  v1::Host host = testing::DiscoveredExampleHost("roce-9port");
  for (v1::RdmaDevice& d : *host.mutable_rdma_devices()) {
    for (v1::Port& p : *d.mutable_ports()) p.set_state(v1::PORT_STATE_DOWN);
  }
  std::vector<std::string> notes;
  absl::StatusOr<std::vector<Device>> devices = Devices(host, {}, &notes);
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->size(), static_cast<size_t>(host.rdma_devices_size()));
  for (const Device& d : *devices) EXPECT_TRUE(d.env.empty()) << d.name;
  EXPECT_THAT(notes, Contains(HasSubstr("no gpu<K> or all device")));

  // No uverbs node anywhere: nothing to name, so no spec.
  for (v1::RdmaDevice& d : *host.mutable_rdma_devices()) d.clear_uverbs_device();
  EXPECT_EQ(SpecJson(host, {}).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(CdiSpec, DeviceNames) {
  EXPECT_TRUE(ValidDeviceName("mlx5_0"));
  EXPECT_TRUE(ValidDeviceName("gpu10"));
  EXPECT_TRUE(ValidDeviceName("a.b:c-d"));
  EXPECT_FALSE(ValidDeviceName(""));
  EXPECT_FALSE(ValidDeviceName("_x"));
  EXPECT_FALSE(ValidDeviceName("x-"));
  EXPECT_FALSE(ValidDeviceName("a/b"));
  EXPECT_FALSE(ValidDeviceName("a=b"));
}

}  // namespace
}  // namespace fabric::cdi
