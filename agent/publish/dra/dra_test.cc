// The DRA driver's devices and slices on the example hosts: names, the standard attributes and
// ours, health as taints, vanished devices, the API's limits; the objects it writes validated
// against resource.k8s.io/v1's published OpenAPI schema (tests/dra/k8s_schema.py); claims parsed
// and prepared: the CDI devices and the claim's own job environment.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/publish/dra/claim.h"
#include "agent/publish/dra/devices.h"
#include "agent/publish/dra/slice_json.h"
#include "nlohmann/json.hpp"
#include "tests/hosts/discovered.h"
#include "tests/hosts/hosts.h"
#include "tests/testing/subprocess.h"

namespace fabric::dra {
namespace {

using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::SizeIs;

const Device* Find(const std::vector<Device>& devices, const std::string& name) {
  for (const Device& d : devices) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

std::string Str(const Device& d, const std::string& attr) {
  auto it = d.attributes.find(attr);
  if (it == d.attributes.end() || !std::holds_alternative<std::string>(it->second)) return "";
  return std::get<std::string>(it->second);
}

int64_t Int(const Device& d, const std::string& attr) {
  auto it = d.attributes.find(attr);
  if (it == d.attributes.end() || !std::holds_alternative<int64_t>(it->second)) return -1;
  return std::get<int64_t>(it->second);
}

v1::Finding MakeFinding(v1::Severity s, const std::string& check, const std::string& subject,
                        const std::string& code) {
  v1::Finding f;
  f.set_severity(s);
  f.set_check(check);
  f.set_subject(subject);
  f.set_code(code);
  return f;
}

bool IsDnsLabel(const std::string& s) {
  if (s.empty() || s.size() > 63 || s.front() == '-' || s.back() == '-') return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return true;
}

// Every example host: names are unique DNS labels, the API's limits hold, every port is one
// device.
TEST(DraDevices, EveryExampleHostKeepsTheApiLimits) {
  for (const std::string& name : testing::ExampleHostNames()) {
    const v1::Host& host = testing::DiscoveredExampleHost(name);
    const std::vector<Device> devices = Devices(host, {}, {}, {});
    size_t ports = 0;
    for (const v1::RdmaDevice& d : host.rdma_devices()) ports += d.ports_size();
    EXPECT_EQ(devices.size(), ports) << name;
    std::set<std::string> names;
    for (const Device& d : devices) {
      EXPECT_TRUE(IsDnsLabel(d.name)) << name << ": " << d.name;
      EXPECT_TRUE(names.insert(d.name).second) << name << ": " << d.name << " twice";
      EXPECT_LE(d.attributes.size(), kMaxAttributes) << name << ": " << d.name;
      for (const auto& [attr, value] : d.attributes) {
        if (const auto* s = std::get_if<std::string>(&value)) {
          EXPECT_LE(s->size(), kMaxStringValue) << attr;
          EXPECT_FALSE(s->empty()) << attr;
        }
      }
    }
    for (const auto& slice : Split(devices)) {
      EXPECT_LE(slice.size(), kMaxTaintedDevicesPerSlice) << name;
      EXPECT_FALSE(slice.empty()) << name;
    }
  }
}

TEST(DraDevices, Roce9portAttributes) {
  const v1::Host& host = testing::DiscoveredExampleHost("roce-9port");
  const std::vector<Device> devices = Devices(host, {}, {}, {});
  ASSERT_THAT(devices, SizeIs(9));
  EXPECT_EQ(devices[0].name, "mlx5-0");
  EXPECT_EQ(devices[8].name, "mlx5-8");
  const Device* d = Find(devices, "mlx5-3");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(Str(*d, "resource.kubernetes.io/pcieRoot"), "pci0000:37");
  EXPECT_EQ(Int(*d, "resource.kubernetes.io/numaNode"), 0);
  EXPECT_EQ(Int(*d, "dra.net/numaNode"), 0);
  EXPECT_EQ(Str(*d, "pciAddress"), "0000:3d:00.0");
  EXPECT_EQ(Str(*d, "rdmaDevice"), "mlx5_3");
  EXPECT_EQ(Int(*d, "port"), 1);
  EXPECT_EQ(Str(*d, "netdev"), "eth3");
  EXPECT_EQ(Str(*d, "linkLayer"), "ethernet");
  EXPECT_EQ(Str(*d, "function"), "pf");
  EXPECT_EQ(Str(*d, "vendorId"), "15b3");
  EXPECT_EQ(Str(*d, "driver"), "mlx5_core");
  // The host-wide pairing: GPU 2 (0000:3c:00.0) is mlx5_3's.
  EXPECT_EQ(Str(*d, "gpu"), "0000:3c:00.0");
  EXPECT_EQ(Int(*d, "gpuCount"), 1);
  const Device* nic5 = Find(devices, "mlx5-5");
  ASSERT_NE(nic5, nullptr);
  EXPECT_EQ(Str(*nic5, "resource.kubernetes.io/pcieRoot"), "pci0000:97");
  EXPECT_EQ(Int(*nic5, "resource.kubernetes.io/numaNode"), 1);
  // The front-end NIC serves no GPU.
  const Device* front = Find(devices, "mlx5-0");
  ASSERT_NE(front, nullptr);
  EXPECT_EQ(front->attributes.count("gpu"), 0u);
  EXPECT_THAT(front->taints, IsEmpty());
}

TEST(DraDevices, ExcludedNicsAreLeftOut) {
  const v1::Host& host = testing::DiscoveredExampleHost("roce-9port");
  const std::vector<Device> devices = Devices(host, {}, {}, {"mlx5_0", "mlx5_4"});
  EXPECT_THAT(devices, SizeIs(7));
  EXPECT_EQ(Find(devices, "mlx5-0"), nullptr);
  EXPECT_EQ(Find(devices, "mlx5-4"), nullptr);
}

TEST(DraDevices, VfsAreDevicesAndCutIntoSlicesOf64) {
  const v1::Host& host = testing::DiscoveredExampleHost("sriov-512vf");
  const std::vector<Device> devices = Devices(host, {}, {}, {});
  EXPECT_THAT(devices, SizeIs(520));
  size_t vfs = 0;
  for (const Device& d : devices) {
    if (Str(d, "function") == "vf") {
      ++vfs;
      EXPECT_FALSE(Str(d, "pfPciAddress").empty()) << d.name;
    }
  }
  EXPECT_EQ(vfs, 512u);
  const auto slices = Split(devices);
  ASSERT_THAT(slices, SizeIs(9));
  EXPECT_THAT(slices[0], SizeIs(64));
  EXPECT_THAT(slices[8], SizeIs(8));
}

// CRITICAL is NoSchedule, WARNING None, a dry run nothing; one taint per check, the worse kept;
// at most four, CRITICAL first; findings about other devices or the host taint nothing.
TEST(DraDevices, HealthBecomesTaints) {
  const v1::Host& host = testing::DiscoveredExampleHost("roce-9port");
  v1::Health health;
  *health.add_findings() =
      MakeFinding(v1::SEVERITY_WARNING, "counter", "mlx5_2:1", "counter.symbol_error");
  *health.add_findings() =
      MakeFinding(v1::SEVERITY_CRITICAL, "port_state", "mlx5_2:1", "port_state.down");
  v1::Finding timed =
      MakeFinding(v1::SEVERITY_WARNING, "pcie_link", "0000:1f:00.0", "pcie_link.slow");
  timed.mutable_first_seen()->set_seconds(1796515200);  // 2026-12-06T00:00:00Z
  *health.add_findings() = timed;
  *health.add_findings() =
      MakeFinding(v1::SEVERITY_CRITICAL, "counter", "eth2", "counter.link_downed");
  v1::Finding dry = MakeFinding(v1::SEVERITY_CRITICAL, "kmsg", "mlx5_2", "kmsg.fatal");
  dry.set_dry_run(true);
  *health.add_findings() = dry;
  *health.add_findings() = MakeFinding(v1::SEVERITY_CRITICAL, "uverbs", "mlx5_3", "uverbs.missing");
  *health.add_findings() = MakeFinding(v1::SEVERITY_CRITICAL, "gpudirect", "", "gpudirect.none");
  *health.add_findings() =
      MakeFinding(v1::SEVERITY_WARNING, "firmware", "mlx5_2", "firmware.mixed");
  *health.add_findings() = MakeFinding(v1::SEVERITY_WARNING, "roce_gid", "mlx5_2:1", "roce_gid.x");

  const std::vector<Device> devices = Devices(host, {}, health, {});
  const Device* d = Find(devices, "mlx5-2");
  ASSERT_NE(d, nullptr);
  ASSERT_THAT(d->taints, SizeIs(kMaxTaints));
  EXPECT_EQ(d->taints[0], (Taint{"rdma.fabric.io/counter", "link_downed", "NoSchedule", ""}));
  EXPECT_EQ(d->taints[1], (Taint{"rdma.fabric.io/port_state", "down", "NoSchedule", ""}));
  // WARNINGs in key order after the CRITICALs: roce_gid's is the fifth, left out.
  EXPECT_EQ(d->taints[2], (Taint{"rdma.fabric.io/firmware", "mixed", "None", ""}));
  EXPECT_EQ(d->taints[3],
            (Taint{"rdma.fabric.io/pcie_link", "slow", "None", "2026-12-06T00:00:00Z"}));
  const Device* other = Find(devices, "mlx5-3");
  ASSERT_NE(other, nullptr);
  EXPECT_THAT(other->taints,
              ElementsAre(Taint{"rdma.fabric.io/uverbs", "missing", "NoSchedule", ""}));
  EXPECT_THAT(Find(devices, "mlx5-1")->taints, IsEmpty());
}

TEST(DraDevices, VanishedDevicesStayTainted) {
  const v1::Host& host = testing::DiscoveredExampleHost("roce-9port");
  const std::vector<Device> before = Devices(host, {}, {}, {});
  std::vector<Device> now = Devices(host, {}, {}, {"mlx5_4"});
  KeepVanished(before, "2026-12-06T01:00:00Z", &now);
  ASSERT_THAT(now, SizeIs(9));
  EXPECT_EQ(now[4].name, "mlx5-4");
  EXPECT_THAT(now[4].taints, ElementsAre(Taint{"rdma.fabric.io/device_missing", "vanished",
                                               "NoSchedule", "2026-12-06T01:00:00Z"}));
  // Kept again later: the first time stays.
  std::vector<Device> later = Devices(host, {}, {}, {"mlx5_4"});
  KeepVanished(now, "2026-12-06T02:00:00Z", &later);
  EXPECT_EQ(later[4].taints[0].time_added, "2026-12-06T01:00:00Z");
  // Back: the device as discovery sees it, untainted.
  std::vector<Device> back = Devices(host, {}, {}, {});
  KeepVanished(later, "2026-12-06T03:00:00Z", &back);
  EXPECT_EQ(back, before);
}

TEST(DraDevices, DnsLabels) {
  EXPECT_EQ(DnsLabel("mlx5_0"), "mlx5-0");
  EXPECT_EQ(DnsLabel("Bnxt_RE3"), "bnxt-re3");
  EXPECT_EQ(DnsLabel("__x__"), "x");
  EXPECT_EQ(DnsLabel(""), "x");
  EXPECT_EQ(DnsLabel("___"), "x");
  EXPECT_EQ(DnsLabel(std::string(100, 'a')), std::string(63, 'a'));
  EXPECT_EQ(DnsLabel(std::string(62, 'a') + "_b"), std::string(62, 'a'));
}

TEST(DraSliceJson, ListedDevicesCompareAsOurs) {
  const v1::Host& host = testing::DiscoveredExampleHost("roce-9port");
  v1::Health health;
  v1::Finding f = MakeFinding(v1::SEVERITY_CRITICAL, "port_state", "mlx5_2:1", "port_state.down");
  f.mutable_first_seen()->set_seconds(1796515200);
  *health.add_findings() = f;
  const std::vector<Device> devices = Devices(host, {}, health, {});
  SliceMeta meta{"node-a", "uid-1", 7, 1, 0, "41"};
  const std::string object = SliceJson(meta, devices);
  auto listed =
      ParseSliceList(absl::StrCat(R"({"kind":"ResourceSliceList","items":[)", object, "]}"));
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_THAT(*listed, SizeIs(1));
  const ListedSlice& s = (*listed)[0];
  EXPECT_EQ(s.name, "node-a-rdma.fabric.io-0");
  EXPECT_EQ(s.resource_version, "41");
  EXPECT_EQ(s.node, "node-a");
  EXPECT_EQ(s.driver, "rdma.fabric.io");
  EXPECT_EQ(s.pool, "node-a");
  EXPECT_EQ(s.generation, 7);
  EXPECT_EQ(s.slice_count, 1);
  EXPECT_EQ(s.devices_key, DevicesKey(devices));
  // The server's timeAdded on a taint that had none changes nothing; another device does.
  std::vector<Device> untimed = devices;
  for (Device& d : untimed) {
    for (Taint& t : d.taints) t.time_added.clear();
  }
  EXPECT_EQ(DevicesKey(untimed), s.devices_key);
  std::vector<Device> fewer(devices.begin(), devices.end() - 1);
  EXPECT_NE(DevicesKey(fewer), s.devices_key);
}

TEST(DraSliceJson, NamesFitTheApi) {
  EXPECT_EQ(SliceName("n1", 3), "n1-rdma.fabric.io-3");
  EXPECT_THAT(SliceName(std::string(300, 'n'), 12), SizeIs(253));
}

TEST(DraSliceJson, BadListsAreRefused) {
  for (const char* body : {"", "nope", "[]", R"({"items":{}})", R"({"items":[1]})",
                           R"({"items":[{"metadata":{}}]})"}) {
    EXPECT_FALSE(ParseSliceList(body).ok()) << body;
  }
  EXPECT_THAT(ParseSliceList(std::string(40, '[')).status().message(), HasSubstr("deeper"));
  auto empty = ParseSliceList(R"({"kind":"ResourceSliceList","items":null})");
  ASSERT_TRUE(empty.ok());
  EXPECT_THAT(*empty, IsEmpty());
}

// Every object the driver writes, for every example host (with taints and a vanished device), is
// what resource.k8s.io/v1 accepts: the published OpenAPI schema with unknown fields refused (the
// server's strict field validation) and the limits its validation adds.
TEST(DraSliceJson, ObjectsValidateAgainstTheApiSchema) {
  const std::string dir = testing::MakeTempDir("dra-schema");
  std::vector<std::string> argv = {"/usr/bin/python3", "-E",
                                   FABRIC_SOURCE_DIR "/tests/dra/k8s_schema.py", "--kind",
                                   "ResourceSlice"};
  for (const std::string& name : testing::ExampleHostNames()) {
    const v1::Host& host = testing::DiscoveredExampleHost(name);
    v1::Health health;
    for (const v1::RdmaDevice& d : host.rdma_devices()) {
      *health.add_findings() =
          MakeFinding(v1::SEVERITY_CRITICAL, "port_state", d.name() + ":1", "port_state.down");
      break;
    }
    std::vector<Device> devices = Devices(host, {}, health, {});
    if (devices.size() > 1) {
      std::vector<Device> now(devices.begin() + 1, devices.end());
      KeepVanished(devices, "2026-12-06T01:00:00Z", &now);
      devices = now;
    }
    const auto slices = Split(devices);
    for (size_t i = 0; i < slices.size(); ++i) {
      const std::string path = absl::StrCat(dir, "/", name, "-", i, ".json");
      std::ofstream(path) << SliceJson(
          {name, "0b6e2f4c-uid", 3, static_cast<int64_t>(slices.size()), i, ""}, slices[i]);
      argv.push_back(path);
    }
  }
  auto run = testing::Run(argv, absl::Seconds(60));
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->status, 0) << run->out << run->err;

  // The validator can fail: a field the API does not have, and a 129th device.
  const std::string bad = dir + "/bad.json";
  std::ofstream(bad) << R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice",)"
                     << R"("metadata":{"name":"x"},"spec":{"driver":"rdma.fabric.io",)"
                     << R"("nodeName":"x","pool":{"name":"x","generation":1,)"
                     << R"("resourceSliceCount":1},"devices":[{"name":"a","colour":"red"}]}})";
  auto refused =
      testing::Run({"/usr/bin/python3", "-E", FABRIC_SOURCE_DIR "/tests/dra/k8s_schema.py",
                    "--kind", "ResourceSlice", bad},
                   absl::Seconds(60));
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_NE(refused->status, 0);
  EXPECT_THAT(refused->out + refused->err, HasSubstr("colour"));
}

std::string ClaimJson(const std::string& results, const std::string& uid = "7d4b0c1e-11") {
  return R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"c1",)"
         R"("namespace":"ns","uid":")" +
         uid + R"(","resourceVersion":"5"},"status":{"allocation":{"devices":{"results":[)" +
         results + "]}}}}";
}

TEST(DraClaim, ParsesOurResultsOnly) {
  auto c = ParseClaim(
      ClaimJson(R"({"request":"nic","driver":"rdma.fabric.io","pool":"node-a","device":"mlx5-3"},)"
                R"({"request":"gpu","driver":"gpu.nvidia.com","pool":"node-a","device":"gpu-0"})"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->uid, "7d4b0c1e-11");
  EXPECT_EQ(c->namespace_, "ns");
  EXPECT_EQ(c->name, "c1");
  EXPECT_TRUE(c->allocated);
  ASSERT_THAT(c->results, SizeIs(1));
  EXPECT_EQ(c->results[0].device, "mlx5-3");
  EXPECT_EQ(c->results[0].request, "nic");
  auto pending = ParseClaim(R"({"metadata":{"uid":"u"},"status":{}})");
  ASSERT_TRUE(pending.ok());
  EXPECT_FALSE(pending->allocated);
  for (const char* bad :
       {"", "[]", R"({"metadata":{}})",
        R"({"metadata":{"uid":"u"},"status":{"allocation":{"devices":{"results":{}}}}})",
        R"({"metadata":{"uid":"u"},"status":{"allocation":{"devices":{"results":[1]}}}})"}) {
    EXPECT_FALSE(ParseClaim(bad).ok()) << bad;
  }
}

TEST(DraClaim, PreparesCdiDevicesAndTheClaimsEnvironment) {
  const v1::Host& host = testing::DiscoveredExampleHost("roce-9port");
  const std::vector<Device> published = Devices(host, {}, {}, {});
  auto c = ParseClaim(ClaimJson(
      R"({"request":"nic","driver":"rdma.fabric.io","pool":"node-a","device":"mlx5-3"},)"
      R"({"request":"nic","driver":"rdma.fabric.io","pool":"node-a","device":"mlx5-4"})"));
  ASSERT_TRUE(c.ok());
  auto p = PrepareClaim(*c, "node-a", published, host, {});
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_THAT(p->devices, SizeIs(2));
  EXPECT_THAT(p->devices[0].cdi_ids,
              ElementsAre("fabric.io/rdma=mlx5_3", "fabric.io/rdma=claim-7d4b0c1e-11"));
  EXPECT_THAT(p->devices[1].cdi_ids, ElementsAre("fabric.io/rdma=mlx5_4"));
  EXPECT_EQ(p->spec_file, "fabric.io-rdma-claim-7d4b0c1e-11.json");
  // The claim's environment names exactly its NICs.
  EXPECT_THAT(p->spec_json, HasSubstr("\"name\": \"claim-7d4b0c1e-11\""));
  EXPECT_THAT(p->spec_json, HasSubstr("NCCL_IB_HCA==mlx5_3:1,mlx5_4:1"));
  EXPECT_THAT(p->spec_json, Not(HasSubstr("mlx5_5")));

  // Another driver's claim prepares to nothing.
  auto other = ParseClaim(
      ClaimJson(R"({"request":"gpu","driver":"gpu.nvidia.com","pool":"node-a","device":"gpu-0"})"));
  ASSERT_TRUE(other.ok());
  auto none = PrepareClaim(*other, "node-a", published, host, {});
  ASSERT_TRUE(none.ok());
  EXPECT_THAT(none->devices, IsEmpty());
  EXPECT_TRUE(none->spec_json.empty());
}

TEST(DraClaim, RefusedWithTheReason) {
  const v1::Host& host = testing::DiscoveredExampleHost("roce-9port");
  const std::vector<Device> published = Devices(host, {}, {}, {});
  const std::vector<std::pair<std::string, std::string>> cases = {
      {ClaimJson(R"({"request":"n","driver":"rdma.fabric.io","pool":"node-b","device":"mlx5-3"})"),
       "another node's"},
      {ClaimJson(R"({"request":"n","driver":"rdma.fabric.io","pool":"node-a","device":"mlx5-99"})"),
       "not one this node published"},
      {ClaimJson(R"({"request":"n","driver":"rdma.fabric.io","pool":"node-a","device":"mlx5-3"})",
                 "a/b"),
       "cannot name a CDI device"},
      {R"({"metadata":{"uid":"u","name":"c","namespace":"n"},"status":{}})", "not allocated"},
  };
  for (const auto& [body, why] : cases) {
    auto c = ParseClaim(body);
    ASSERT_TRUE(c.ok()) << body;
    auto p = PrepareClaim(*c, "node-a", published, host, {});
    ASSERT_FALSE(p.ok()) << body;
    EXPECT_THAT(p.status().message(), HasSubstr(why)) << body;
  }
  // A device gone since it was published.
  v1::Host fewer = host;
  fewer.mutable_rdma_devices()->erase(fewer.mutable_rdma_devices()->begin() + 3);
  auto c = ParseClaim(
      ClaimJson(R"({"request":"n","driver":"rdma.fabric.io","pool":"node-a","device":"mlx5-3"})"));
  auto gone = PrepareClaim(*c, "node-a", published, fewer, {});
  ASSERT_FALSE(gone.ok());
  EXPECT_THAT(gone.status().message(), HasSubstr("gone"));
}

// A pod record as fabric-cni writes it: `ifname` of pod `pod` on mlx5_<nic>:1.
podrecord::PodRecord Record(const std::string& pod, const std::string& ifname, int nic,
                            std::vector<std::string> addresses, const std::string& mac) {
  podrecord::PodRecord r;
  r.pod_uid = pod;
  r.interfaces.push_back({ifname, std::move(addresses), mac});
  jobenv::Pick p;
  p.device = absl::StrCat("mlx5_", nic);
  p.port = 1;
  p.netdev = ifname;
  r.ports.push_back(p);
  return r;
}

TEST(DraClaimNetwork, ThePodsInterfaceOnEachNic) {
  const v1::Host& host = testing::DiscoveredExampleHost("roce-9port");
  std::string body =
      ClaimJson(R"({"request":"nic","driver":"rdma.fabric.io","pool":"node-a","device":"mlx5-3"},)"
                R"({"request":"nic","driver":"rdma.fabric.io","pool":"node-a","device":"mlx5-4"})");
  body.insert(body.rfind("}}"), R"(,"reservedFor":[{"resource":"pods","name":"job-0",)"
                                R"("uid":"pod-1"},{"resource":"jobs","apiGroup":"batch",)"
                                R"("name":"j","uid":"job-uid"}])");
  auto c = ParseClaim(body);
  ASSERT_TRUE(c.ok()) << c.status() << body;
  EXPECT_THAT(c->pods, ElementsAre("pod-1"));  // pods only: not the Job
  auto p = PrepareClaim(*c, "node-a", Devices(host, {}, {}, {}), host, {});
  ASSERT_TRUE(p.ok()) << p.status();

  const std::vector<podrecord::PodRecord> records = {
      // Another pod on the same NIC: not this claim's.
      Record("pod-9", "net1", 3, {"10.50.0.9/24"}, "0a:00:00:00:00:09"),
      Record("pod-1", "net1", 3, {"10.50.0.11/24", "fd00::11/64", "garbage", "10.50.0.11/24"},
             "0a:58:0a:32:00:0b"),
      Record("", "net2", 4, {"10.60.0.11/24"}, ""),  // No pod UID (podman): never matched.
  };
  std::vector<DeviceNetwork> net = NetworkOf(*c, p->devices, records);
  ASSERT_THAT(net, SizeIs(1));  // mlx5-4 has no interface of the claim's pods
  EXPECT_EQ(net[0].pool, "node-a");
  EXPECT_EQ(net[0].device, "mlx5-3");
  EXPECT_EQ(net[0].data.interface_name, "net1");
  // Addresses as the API takes them: with their prefix, once, none that is not an address.
  EXPECT_THAT(net[0].data.ips, ElementsAre("10.50.0.11/24", "fd00::11/64"));
  EXPECT_EQ(net[0].data.hardware_address, "0a:58:0a:32:00:0b");

  // At most 16 addresses; a MAC past 128 characters is dropped, the rest kept.
  std::vector<std::string> many;
  for (int i = 1; i <= 20; ++i) many.push_back(absl::StrCat("10.70.0.", i, "/24"));
  auto capped =
      NetworkOf(*c, p->devices, {Record("pod-1", "net1", 3, many, std::string(129, 'a'))});
  ASSERT_THAT(capped, SizeIs(1));
  EXPECT_THAT(capped[0].data.ips, SizeIs(kMaxNetworkIps));
  EXPECT_EQ(capped[0].data.hardware_address, "");
}

TEST(DraClaimNetwork, StatusKeepsOtherEntriesAndWritesOnlyChanges) {
  std::string body =
      ClaimJson(R"({"request":"nic","driver":"rdma.fabric.io","pool":"node-a","device":"mlx5-3"},)"
                R"({"request":"gpu","driver":"gpu.nvidia.com","pool":"node-a","device":"gpu-0"})");
  body.insert(body.rfind("}}"), R"(,"devices":[{"driver":"gpu.nvidia.com","pool":"node-a",)"
                                R"("device":"gpu-0","data":{"uuid":"GPU-1"}}])");
  const std::vector<DeviceNetwork> net = {
      {"node-a", "mlx5-3", {"net1", {"10.50.0.11/24"}, "0a:58:0a:32:00:0b"}}};
  auto update = ClaimStatusUpdate(body, net);
  ASSERT_TRUE(update.ok()) << update.status();
  ASSERT_TRUE(update->has_value());
  const nlohmann::json j = nlohmann::json::parse(**update);
  EXPECT_EQ(j["metadata"]["resourceVersion"], "5");  // a 409 if the claim changed since
  ASSERT_EQ(j["status"]["devices"].size(), 2u);
  EXPECT_EQ(j["status"]["devices"][0]["data"]["uuid"], "GPU-1");  // the GPU driver's, untouched
  EXPECT_EQ(j["status"]["devices"][1],
            nlohmann::json::parse(R"({"driver":"rdma.fabric.io","pool":"node-a","device":"mlx5-3",
              "networkData":{"interfaceName":"net1","ips":["10.50.0.11/24"],
              "hardwareAddress":"0a:58:0a:32:00:0b"}})"));
  EXPECT_TRUE(j["status"].contains("allocation"));

  // Written once: the same data again is no update; new data replaces ours in place.
  auto again = ClaimStatusUpdate(**update, net);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->has_value());
  auto moved = ClaimStatusUpdate(**update, {{"node-a", "mlx5-3", {"net1", {"10.50.0.12/24"}, ""}}});
  ASSERT_TRUE(moved.ok() && moved->has_value());
  const nlohmann::json m = nlohmann::json::parse(**moved);
  ASSERT_EQ(m["status"]["devices"].size(), 2u);
  EXPECT_EQ(m["status"]["devices"][1]["networkData"],
            nlohmann::json::parse(R"({"interfaceName":"net1","ips":["10.50.0.12/24"]})"));

  for (const char* bad : {"", "[]", R"({"metadata":{}})", R"({"metadata":{"uid":"u"},"status":[]})",
                          R"({"metadata":{"uid":"u"},"status":{"devices":{}}})"}) {
    EXPECT_FALSE(ClaimStatusUpdate(bad, net).ok()) << bad;
  }
}

TEST(DraClaimNetwork, StatusValidatesAgainstTheApiSchema) {
  const std::string dir = testing::MakeTempDir("dra-claim-schema");
  std::string claim =
      ClaimJson(R"({"request":"nic","driver":"rdma.fabric.io","pool":"node-a","device":"mlx5-3"})");
  claim.insert(claim.find(R"("status")"), R"("spec":{},)");  // The API's claims have one.
  auto update = ClaimStatusUpdate(
      claim,
      {{"node-a", "mlx5-3", {"net1", {"10.50.0.11/24", "fd00::11/64"}, "0a:58:0a:32:00:0b"}}});
  ASSERT_TRUE(update.ok() && update->has_value());
  const std::string good = dir + "/claim.json", bad = dir + "/bad.json";
  std::ofstream(good) << **update;
  std::string wrong = **update;
  wrong.replace(wrong.find("10.50.0.11/24"), 13, "10.50.0.11");  // no prefix: not what it takes
  std::ofstream(bad) << wrong;
  for (const auto& [path, ok] : {std::pair{good, true}, {bad, false}}) {
    auto run = testing::Run({"/usr/bin/python3", "-E", FABRIC_SOURCE_DIR "/tests/dra/k8s_schema.py",
                             "--kind", "ResourceClaim", path},
                            absl::Seconds(60));
    ASSERT_TRUE(run.ok()) << run.status();
    EXPECT_EQ(run->status == 0, ok) << path << run->out << run->err;
  }
}

}  // namespace
}  // namespace fabric::dra
