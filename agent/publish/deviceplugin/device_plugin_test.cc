// The device plugins' answers on the example hosts: which NICs each selector takes, their
// health and NUMA nodes, Allocate's edits and GetPreferredAllocation's NUMA packing; and the
// config section's refusals.
#include "agent/publish/deviceplugin/device_plugin.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "agent/publish/deviceplugin/request.h"
#include "agent/publish/deviceplugin/resource_section.h"
#include "google/protobuf/text_format.h"
#include "tests/hosts/discovered.h"

namespace fabric::deviceplugin {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

v1::DevicePluginConfig Config(const std::string& text) {
  v1::DevicePluginConfig c;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &c)) << text;
  EXPECT_TRUE(ValidateDevicePlugin(c, {}).ok()) << ValidateDevicePlugin(c, {});
  return c;
}

std::vector<std::string> Ids(const ResourceView& v) {
  std::vector<std::string> out;
  for (const auto& d : v.list.devices()) out.push_back(d.id());
  return out;
}

struct SelectorCase {
  std::string host;
  std::string selectors;  // Text format of RdmaSelectors.
  std::vector<std::string> nics;
};

class SelectorTest : public ::testing::TestWithParam<SelectorCase> {};

TEST_P(SelectorTest, MatchesTheExpectedNics) {
  const SelectorCase& c = GetParam();
  const v1::Host& host = testing::DiscoveredExampleHost(c.host);
  Plan plan = PlanResources(
      host, {},
      Config("resources { name: \"rdma/x\" mode: EXCLUSIVE selectors { " + c.selectors + " } }"),
      {});
  ASSERT_EQ(plan.resources.size(), 1u);
  EXPECT_THAT(plan.resources[0].nics, ElementsAreArray(c.nics)) << c.selectors;
  EXPECT_THAT(Ids(plan.resources[0]), ElementsAreArray(c.nics));
}

INSTANTIATE_TEST_SUITE_P(
    Hosts, SelectorTest,
    ::testing::Values(
        SelectorCase{
            "dgx-h100-ib",
            "link_types: \"infiniband\"",
            {"mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"}},
        SelectorCase{"dgx-h100-ib",
                     "link_types: \"ethernet\" function: \"vf\"",
                     {"mlx5_12", "mlx5_13", "mlx5_14", "mlx5_15"}},
        SelectorCase{"dgx-h100-ib",
                     "link_types: \"ether\" function: \"vf\"",
                     {"mlx5_12", "mlx5_13", "mlx5_14", "mlx5_15"}},
        SelectorCase{"dgx-h100-ib",
                     "if_names: \"enp46s0np0\" if_names: \"enp166s0np0\"",
                     {"mlx5_2", "mlx5_7"}},
        SelectorCase{"dgx-h100-ib", "rdma_devices: \"mlx5_9\" vendors: \"15B3\"", {"mlx5_9"}},
        SelectorCase{"dgx-h100-ib", "vendors: \"14e4\"", {}},
        SelectorCase{"amd-mi300x-bnxt",
                     "drivers: \"bnxt_en\"",
                     {"bnxt_re0", "bnxt_re1", "bnxt_re2", "bnxt_re3", "bnxt_re4", "bnxt_re5",
                      "bnxt_re6", "bnxt_re7"}},
        SelectorCase{"many-hcas", "role: \"front-end\"", {"mlx5_0"}},
        SelectorCase{"roce-9port", "role: \"back-end\" rdma_devices: \"mlx5_0\"", {}}));

TEST(DevicePluginTest, DgxIbListsHealthAndNuma) {
  const v1::Host& host = testing::DiscoveredExampleHost("dgx-h100-ib");
  v1::Health health;
  v1::Finding* f = health.add_findings();
  f->set_severity(v1::SEVERITY_CRITICAL);
  f->set_subject("mlx5_4:1");
  f->set_check("port_rate");
  Plan plan = PlanResources(host, {},
                            Config("resources { name: \"rdma/ib\" mode: EXCLUSIVE selectors { "
                                   "link_types: \"infiniband\" } }"),
                            health);
  const ResourceView& v = plan.resources[0];
  ASSERT_EQ(v.list.devices_size(), 8);
  for (const auto& d : v.list.devices()) {
    ASSERT_EQ(d.topology().nodes_size(), 1) << d.id();
    const int64_t numa = d.topology().nodes(0).id();
    const bool first_half =
        d.id() == "mlx5_0" || d.id() == "mlx5_3" || d.id() == "mlx5_4" || d.id() == "mlx5_5";
    EXPECT_EQ(numa, first_half ? 0 : 1) << d.id();
    EXPECT_EQ(d.health(), d.id() == "mlx5_4" ? kUnhealthy : kHealthy) << d.id();
  }
  // A port DOWN is unhealthy; gone, it is listed unhealthy while the kubelet knew it.
  v1::Host down = host;
  for (auto& d : *down.mutable_rdma_devices()) {
    if (d.name() == "mlx5_9") d.mutable_ports(0)->set_state(v1::PORT_STATE_DOWN);
  }
  EXPECT_EQ(Unhealthy(*std::find_if(down.rdma_devices().begin(), down.rdma_devices().end(),
                                    [](const auto& d) { return d.name() == "mlx5_9"; }),
                      {}),
            "port 1 is PORT_STATE_DOWN");
  v1beta1::ListAndWatchResponse list = v.list;
  AddVanished({"mlx5_0", "mlx5_99"}, &list);
  ASSERT_EQ(list.devices_size(), 9);
  EXPECT_EQ(list.devices(8).id(), "mlx5_99");
  EXPECT_EQ(list.devices(8).health(), kUnhealthy);
}

TEST(DevicePluginTest, SharedAdvertisesCountAndGivesEveryNic) {
  const v1::Host& host = testing::DiscoveredExampleHost("dgx-h100-ib");
  Plan plan = PlanResources(host, {},
                            Config("resources { name: \"rdma/hca_shared\" mode: SHARED "
                                   "shared_count: 3 selectors { link_types: \"infiniband\" } }"),
                            {});
  const ResourceView& v = plan.resources[0];
  EXPECT_THAT(Ids(v), ElementsAre("hca_shared-0", "hca_shared-1", "hca_shared-2"));
  EXPECT_EQ(v.list.devices(0).topology().nodes_size(), 2);
  v1beta1::AllocateRequest req;
  req.add_container_requests()->add_devices_ids("hca_shared-1");
  auto resp = Allocate(host, {}, v, req, {});
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_EQ(resp->container_responses(0).devices_size(), 9);  // 8 uverbs + rdma_cm.
  EXPECT_EQ(resp->container_responses(0).envs().at(kEnvDevices),
            "mlx5_0,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_9,mlx5_10,mlx5_11");
  EXPECT_EQ(SharedCount(v1::RdmaResource()), 1000u);
}

// With the NCCL environment plugin: mounted where it finds the helper, NCCL_ENV_PLUGIN naming
// it, and NCCL's variables left to it (a set variable would win over its answer).
TEST(DevicePluginTest, AllocateMountsTheNcclEnvPlugin) {
  const v1::Host& host = testing::DiscoveredExampleHost("dgx-h100-ib");
  Plan plan = PlanResources(host, {},
                            Config("resources { name: \"fabric.io/rdma-ib\" mode: EXCLUSIVE "
                                   "env_at_allocate: true "
                                   "selectors { link_types: \"infiniband\" } }"),
                            {});
  v1beta1::AllocateRequest req;
  req.add_container_requests()->add_devices_ids("mlx5_3");
  AllocateOptions opt{
      .host_file_dir = "/var/lib/fabric-env",
      .pod_helper = kPodHelperDefault,
      .cdi = false,
      .dev_root = "",
      .nccl_env_plugin = "/usr/lib/x86_64-linux-gnu/fabric-agent/libnccl-env-fabric.so"};
  auto resp = Allocate(host, {}, plan.resources[0], req, opt);
  ASSERT_TRUE(resp.ok()) << resp.status();
  const auto& r = resp->container_responses(0);
  ASSERT_EQ(r.mounts_size(), 3);
  EXPECT_EQ(r.mounts(2).host_path(), opt.nccl_env_plugin);
  EXPECT_EQ(r.mounts(2).container_path(), kNcclEnvPluginInContainer);
  EXPECT_TRUE(r.mounts(2).read_only());
  // The plugin looks for the helper at ../../bin/fabric-env from its own folder.
  EXPECT_EQ(
      std::filesystem::path(kNcclEnvPluginInContainer).parent_path().parent_path().parent_path() /
          "bin/fabric-env",
      kPodHelperInContainer);
  EXPECT_EQ(r.envs().at("NCCL_ENV_PLUGIN"), kNcclEnvPluginInContainer);
  EXPECT_FALSE(r.envs().contains("NCCL_IB_HCA"));
  EXPECT_TRUE(r.envs().contains("UCX_NET_DEVICES") || r.envs().contains("MC_TE_FILTERS"));
  // Without the helper there is nothing for the plugin to run: the variables as before.
  opt.pod_helper.clear();
  resp = Allocate(host, {}, plan.resources[0], req, opt);
  ASSERT_TRUE(resp.ok());
  EXPECT_FALSE(resp->container_responses(0).envs().contains("NCCL_ENV_PLUGIN"));
  EXPECT_TRUE(resp->container_responses(0).envs().contains("NCCL_IB_HCA"));
}

TEST(DevicePluginTest, AllocateGivesNodesMountsAndEnv) {
  const v1::Host& host = testing::DiscoveredExampleHost("dgx-h100-ib");
  Plan plan = PlanResources(host, {},
                            Config("resources { name: \"fabric.io/rdma-ib\" mode: EXCLUSIVE "
                                   "env_at_allocate: true cdi_devices: true "
                                   "selectors { link_types: \"infiniband\" } }"),
                            {});
  v1beta1::AllocateRequest req;
  auto* c = req.add_container_requests();
  c->add_devices_ids("mlx5_10");
  c->add_devices_ids("mlx5_3");
  AllocateOptions opt{.host_file_dir = "/var/lib/fabric-env",
                      .pod_helper = kPodHelperDefault,
                      .cdi = true,
                      .dev_root = "",
                      .nccl_env_plugin = ""};
  auto resp = Allocate(host, {}, plan.resources[0], req, opt);
  ASSERT_TRUE(resp.ok()) << resp.status();
  const auto& r = resp->container_responses(0);
  std::vector<std::string> nodes;
  for (const auto& d : r.devices()) {
    EXPECT_EQ(d.container_path(), d.host_path());
    EXPECT_EQ(d.permissions(), "rw");
    nodes.push_back(d.container_path());
  }
  EXPECT_THAT(nodes, ElementsAre("/dev/infiniband/uverbs3", "/dev/infiniband/uverbs10", kRdmaCm));
  ASSERT_EQ(r.mounts_size(), 2);
  EXPECT_EQ(r.mounts(0).host_path(), "/var/lib/fabric-env");
  EXPECT_EQ(r.mounts(0).container_path(), "/run/fabric-env") << "where the helper looks";
  EXPECT_TRUE(r.mounts(0).read_only());
  EXPECT_EQ(r.mounts(1).host_path(), "/usr/bin/fabric-env");
  EXPECT_EQ(r.mounts(1).container_path(), "/usr/local/bin/fabric-env");
  EXPECT_TRUE(r.mounts(1).read_only());
  EXPECT_EQ(r.envs().at(kEnvResource), "fabric.io/rdma-ib");
  EXPECT_EQ(r.envs().at(kEnvDevices), "mlx5_3,mlx5_10");
  ASSERT_TRUE(r.envs().count("NCCL_IB_HCA")) << "env_at_allocate";
  EXPECT_THAT(r.envs().at("NCCL_IB_HCA"), HasSubstr("mlx5_3"));
  EXPECT_THAT(r.envs().at("NCCL_IB_HCA"), HasSubstr("mlx5_10"));
  EXPECT_THAT(r.envs().at("NCCL_IB_HCA"), ::testing::Not(HasSubstr("mlx5_0")));
  ASSERT_EQ(r.cdi_devices_size(), 2);
  EXPECT_EQ(r.cdi_devices(0).name(), "fabric.io/rdma=mlx5_3");

  v1beta1::AllocateRequest bad;
  bad.add_container_requests()->add_devices_ids("mlx5_1");  // RoCE: not this resource's.
  auto err = Allocate(host, {}, plan.resources[0], bad, opt);
  EXPECT_EQ(err.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(err.status().message(), HasSubstr("\"mlx5_1\""));

  // A device root moves the host side of every node, never the container's.
  opt.dev_root = "/var/tmp/devroot";
  auto rooted = Allocate(host, {}, plan.resources[0], req, opt);
  ASSERT_TRUE(rooted.ok()) << rooted.status();
  for (const auto& d : rooted->container_responses(0).devices()) {
    EXPECT_EQ(d.host_path(), "/var/tmp/devroot" + d.container_path());
  }
}

TEST(DevicePluginTest, TwoResourcesOnOneNicServeItNeither) {
  const v1::Host& host = testing::DiscoveredExampleHost("dgx-h100-ib");
  Plan plan = PlanResources(
      host, {},
      Config("resources { name: \"rdma/a\" mode: EXCLUSIVE selectors { rdma_devices: \"mlx5_0\" "
             "rdma_devices: \"mlx5_3\" } } resources { name: \"rdma/b\" mode: SHARED selectors { "
             "rdma_devices: \"mlx5_3\" } }"),
      {});
  EXPECT_THAT(plan.resources[0].nics, ElementsAre("mlx5_0"));
  EXPECT_TRUE(plan.resources[1].nics.empty());
  ASSERT_EQ(plan.findings.size(), 1u);
  EXPECT_EQ(plan.findings[0].subject(), "mlx5_3");
  EXPECT_THAT(plan.findings[0].message(), HasSubstr("rdma/a and rdma/b"));
  EXPECT_EQ(plan.resources[1].list.devices(0).health(), kUnhealthy);
}

struct PreferCase {
  std::string host;
  int size;
  std::vector<std::string> must;
  std::vector<int64_t> numa;  // The NUMA node every chosen NIC must be on.
};

class PreferTest : public ::testing::TestWithParam<PreferCase> {};

TEST_P(PreferTest, PicksOneNumaNode) {
  const PreferCase& c = GetParam();
  const v1::Host& host = testing::DiscoveredExampleHost(c.host);
  Plan plan = PlanResources(host, {},
                            Config("resources { name: \"rdma/gpu-nics\" mode: EXCLUSIVE selectors "
                                   "{ role: \"back-end\" function: \"pf\" } }"),
                            {});
  const ResourceView& v = plan.resources[0];
  v1beta1::PreferredAllocationRequest req;
  auto* cr = req.add_container_requests();
  // Interleave the nodes, so that the natural order alone would mix them.
  std::vector<std::string> avail = v.nics;
  std::reverse(avail.begin(), avail.end());
  for (const auto& id : avail) cr->add_available_deviceids(id);
  for (const auto& id : c.must) cr->add_must_include_deviceids(id);
  cr->set_allocation_size(c.size);
  auto resp = PreferredAllocation(host, v, req);
  ASSERT_TRUE(resp.ok()) << resp.status();
  const auto& ids = resp->container_responses(0).deviceids();
  ASSERT_EQ(ids.size(), c.size);
  for (const std::string& m : c.must) EXPECT_THAT(ids, ::testing::Contains(m));
  for (const std::string& id : ids) {
    const auto& d = *std::find_if(v.list.devices().begin(), v.list.devices().end(),
                                  [&](const auto& x) { return x.id() == id; });
    EXPECT_THAT(c.numa, ::testing::Contains(d.topology().nodes(0).id())) << id;
  }
  cr->set_allocation_size(static_cast<int>(v.nics.size()) + 1);
  EXPECT_EQ(PreferredAllocation(host, v, req).status().code(), absl::StatusCode::kInvalidArgument);
  cr->add_available_deviceids("nope0");
  EXPECT_THAT(PreferredAllocation(host, v, req).status().message(), HasSubstr("\"nope0\""));
}

INSTANTIATE_TEST_SUITE_P(Hosts, PreferTest,
                         ::testing::Values(PreferCase{"dgx-h100-ib", 4, {}, {0}},
                                           PreferCase{"dgx-h100-ib", 2, {"mlx5_9"}, {1}},
                                           PreferCase{"amd-mi300x-bnxt", 4, {}, {0}},
                                           PreferCase{"amd-mi300x-bnxt", 3, {"bnxt_re6"}, {1}},
                                           PreferCase{"roce-9port", 4, {"mlx5_5"}, {1}}));

TEST(ResourceSectionTest, RefusesBadConfig) {
  struct Case {
    std::string text;
    std::string error;
  };
  for (const Case& c : std::vector<Case>{
           {"resources { name: \"hca\" mode: SHARED selectors { vendors: \"15b3\" } }",
            "domain/name"},
           {"resources { name: \"Rdma/hca\" mode: SHARED selectors { vendors: \"15b3\" } }", "DNS"},
           {"resources { name: \"kubernetes.io/hca\" mode: SHARED selectors { vendors: \"15b3\" } "
            "}",
            "kubernetes.io"},
           {"resources { name: \"rdma/-x\" mode: SHARED selectors { vendors: \"15b3\" } }", "1-63"},
           {"resources { name: \"rdma/hca\" selectors { vendors: \"15b3\" } }",
            "SHARED or EXCLUSIVE"},
           {"resources { name: \"rdma/hca\" mode: SHARED }", "no selector"},
           {"resources { name: \"rdma/hca\" mode: SHARED selectors { vendors: \"15b3x\" } }",
            "four hex"},
           {"resources { name: \"rdma/hca\" mode: SHARED selectors { link_types: \"roce\" } }",
            "ethernet"},
           {"resources { name: \"rdma/hca\" mode: SHARED selectors { role: \"backend\" } }",
            "back-end"},
           {"resources { name: \"rdma/hca\" mode: SHARED selectors { function: \"sf\" } }",
            "pf or vf"},
           {"resources { name: \"rdma/hca\" mode: SHARED selectors { rails: \"r9\" } }", "rail"},
           {"resources { name: \"rdma/hca\" mode: EXCLUSIVE shared_count: 4 selectors { vendors: "
            "\"15b3\" } }",
            "shared_count"},
           {"resources { name: \"rdma/hca\" mode: SHARED shared_count: 10001 selectors { vendors: "
            "\"15b3\" } }",
            "above"},
           {"resources { name: \"rdma/hca\" mode: SHARED selectors { vendors: \"15b3\" } } "
            "resources { name: \"rdma/hca\" mode: EXCLUSIVE selectors { vendors: \"15b3\" } }",
            "twice"}}) {
    v1::DevicePluginConfig cfg;
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(c.text, &cfg)) << c.text;
    absl::Status s = ValidateDevicePlugin(cfg, {});
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(s.message(), HasSubstr(c.error)) << c.text;
  }
  EXPECT_EQ(SocketName("fabric.io/rdma-rail0"), "fabric-fabric.io-rdma-rail0.sock");
}

// Issue 51: each bound refused with INVALID_ARGUMENT naming it, before any container is answered;
// the largest accepted request is answered.
TEST(DevicePluginTest, AllocateAndPreferredAllocationAreBounded) {
  const v1::Host& host = testing::DiscoveredExampleHost("dgx-h100-ib");
  Plan plan =
      PlanResources(host, {},
                    Config("resources { name: \"rdma/ib\" mode: EXCLUSIVE selectors { link_types: "
                           "\"infiniband\" } }"),
                    {});
  const ResourceView& view = plan.resources[0];
  v1beta1::AllocateRequest req;
  for (int i = 0; i < kMaxContainerRequests; ++i)
    req.add_container_requests()->add_devices_ids("mlx5_0");
  auto ok = Allocate(host, {}, view, req, {});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->container_responses_size(), kMaxContainerRequests);
  req.add_container_requests();
  auto many = Allocate(host, {}, view, req, {});
  EXPECT_EQ(many.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(many.status().message(), HasSubstr("257 container requests, more than 256"));

  v1beta1::AllocateRequest wide;
  auto* c = wide.add_container_requests();
  for (int i = 0; i <= kMaxContainerDevices; ++i) c->add_devices_ids("mlx5_0");
  auto w = Allocate(host, {}, view, wide, {});
  EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(w.status().message(), HasSubstr("10001 device IDs, more than 10000"));

  v1beta1::PreferredAllocationRequest pr;
  for (int i = 0; i <= kMaxContainerRequests; ++i) pr.add_container_requests();
  auto p = PreferredAllocation(host, view, pr);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(), HasSubstr("more than 256"));

  // A negative size was taken as 0.
  v1beta1::PreferredAllocationRequest neg;
  neg.add_container_requests()->set_allocation_size(-1);
  auto n = PreferredAllocation(host, view, neg);
  EXPECT_EQ(n.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(n.status().message(), HasSubstr("allocation_size -1 is negative"));

  // An unknown ID is quoted escaped.
  v1beta1::AllocateRequest odd;
  odd.add_container_requests()->add_devices_ids("mlx\x1b[2J");
  auto o = Allocate(host, {}, view, odd, {});
  EXPECT_THAT(o.status().message(), HasSubstr("\"mlx\\x1b[2J\""));
}

TEST(RequestTest, ParsesOrNamesTheFieldThatIsNotUtf8) {
  struct Case {
    std::string bytes;
    std::string error;  // Empty: parsed.
  };
  auto ld = [](int field, const std::string& b) {
    return std::string(1, static_cast<char>((field << 3) | 2)) +
           std::string(1, static_cast<char>(b.size())) + b;
  };
  for (const Case& c : std::vector<Case>{
           {"", ""},
           {ld(1, ld(1, "mlx5_0") + ld(1, "mlx5_3")), ""},
           {ld(1, ld(1, "mlx5_0") + ld(1, "mlx5_\xff")),
            "AllocateRequest.container_requests[0].devices_ids[1] is not UTF-8: \"mlx5_\\xff\""},
           {ld(1, "") + ld(1, ld(1, "\xc3")),
            "AllocateRequest.container_requests[1].devices_ids[0] is not UTF-8"},
           {"\x0a\x05"
            "ab",
            "not a v1beta1.AllocateRequest"},  // Truncated.
           {"\xff\xff\xff", "not a v1beta1.AllocateRequest"},
       }) {
    v1beta1::AllocateRequest req;
    absl::Status s = ParseRequest(c.bytes, &req);
    if (c.error.empty()) {
      EXPECT_TRUE(s.ok()) << s;
    } else {
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.error;
      EXPECT_THAT(s.message(), HasSubstr(c.error));
    }
  }
  v1beta1::PreferredAllocationRequest pr;
  absl::Status s = ParseRequest(ld(1, ld(2, "\x80")), &pr);
  EXPECT_THAT(
      s.message(),
      HasSubstr("PreferredAllocationRequest.container_requests[0].must_include_deviceIDs[0]"));
}

// A valid name whose socket path bind(2) cannot take: refused at config time, naming the bound.
TEST(ResourceSectionTest, SocketPathsFitSunPath) {
  const std::string part(63, 'a');
  v1::DevicePluginConfig cfg;
  auto* r = cfg.add_resources();
  r->set_name("fabric.io/" + part);
  r->set_mode(v1::RdmaResource::SHARED);
  r->mutable_selectors()->add_vendors("15b3");
  ASSERT_TRUE(ValidateDevicePlugin(cfg, {}).ok());
  EXPECT_TRUE(CheckSocketPaths("/dp", cfg).ok());
  absl::Status s = CheckSocketPaths("/var/lib/kubelet/device-plugins", cfg);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("bytes, longer than the 107"));
  // The longest names fit no directory at all: refused by the section's own checks.
  r->set_name(std::string(60, 'a') + "." + std::string(60, 'b') + ".io/" + part);
  s = ValidateDevicePlugin(cfg, {});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("longer than the 107"));
}

}  // namespace
}  // namespace fabric::deviceplugin
