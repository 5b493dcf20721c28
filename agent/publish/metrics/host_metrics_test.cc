#include "agent/publish/metrics/host_metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/inventory/discovery/discovery.h"
#include "tests/hosts/hosts.h"
#include "tests/testing/subprocess.h"

namespace fabric::metrics {
namespace {

namespace fs = std::filesystem;
using ::testing::Contains;
using ::testing::IsEmpty;
using ::testing::Key;

// A rendered scrape: series ("name{labels}") to value text, and the families' TYPE lines.
struct Scrape {
  std::map<std::string, std::string> series;
  std::map<std::string, std::string> types;  // Family name to "gauge" or "counter".
  std::string text;

  // The value of `series`, or "absent".
  std::string operator[](const std::string& s) const {
    auto it = series.find(s);
    return it == series.end() ? "absent" : it->second;
  }
  // Series whose text contains `part`.
  std::vector<std::string> With(const std::string& part) const {
    std::vector<std::string> out;
    for (const auto& [s, v] : series) {
      if (absl::StrContains(s, part)) out.push_back(s);
    }
    return out;
  }
};

// Parses the text format strictly enough to catch a malformed exposition: every sample line is
// "name[{labels}] value" under a TYPE line of its family, no series twice, no family twice.
Scrape Parse(const std::string& text) {
  Scrape out;
  out.text = text;
  std::string family;
  std::set<std::string> families_seen;
  EXPECT_TRUE(text.empty() || text.back() == '\n');
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (absl::StartsWith(line, "# HELP ")) continue;
    if (absl::StartsWith(line, "# TYPE ")) {
      std::vector<std::string> parts = absl::StrSplit(line, ' ');
      EXPECT_EQ(parts.size(), 4u) << line;
      if (parts.size() != 4) continue;
      family = parts[2];
      EXPECT_TRUE(families_seen.insert(family).second) << "family twice: " << family;
      out.types[family] = parts[3];
      continue;
    }
    const size_t space = line.rfind(' ');
    EXPECT_NE(space, absl::string_view::npos) << line;
    if (space == absl::string_view::npos) continue;
    const std::string s(line.substr(0, space));
    const std::string name = s.substr(0, s.find('{'));
    EXPECT_EQ(name, family) << "sample outside its family: " << line;
    EXPECT_TRUE(out.series.emplace(s, std::string(line.substr(space + 1))).second)
        << "series twice: " << s;
  }
  return out;
}

// An example host written to a temporary directory and discovered; the tree stays for the test
// to change before it scrapes.
class HostMetricsTest : public ::testing::Test {
 protected:
  void TearDown() override {
    std::error_code ec;
    if (!tmp_.empty()) fs::remove_all(tmp_, ec);
  }

  void Write(const std::string& name,
             const std::function<void(testing::HostSpec&)>& edit = nullptr) {
    auto spec = testing::ExampleHost(name);
    ASSERT_TRUE(spec.ok()) << spec.status();
    spec_ = *spec;
    if (edit) edit(spec_);
    tmp_ = testing::MakeTempDir("host-metrics");
    ASSERT_FALSE(tmp_.empty());
    dir_ = fs::path(tmp_) / "host";
    ASSERT_TRUE(testing::WriteHost(spec_, dir_).ok());
    HostFsImpl sys((dir_ / "sys").string()), proc((dir_ / "proc").string());
    auto host = Discover(sys, proc);
    ASSERT_TRUE(host.ok()) << host.status();
    host_ = *host;
  }

  Scrape Run() {
    HostFsImpl sys((dir_ / "sys").string());
    Exposition e;
    AppendHostMetrics(host_, sys, &e);
    EXPECT_EQ(e.dropped(), 0u) << (e.drop_reasons().empty() ? "" : e.drop_reasons()[0]);
    return Parse(e.Render());
  }

  // The port directory of `device` port 1, in the written tree.
  fs::path PortDir(const std::string& device) {
    auto path = testing::RdmaDevicePath(spec_, device);
    EXPECT_TRUE(path.ok()) << path.status();
    return dir_ / "sys" / (path.ok() ? *path : "") / "ports" / "1";
  }

  static void Overwrite(const fs::path& p, const std::string& content) {
    std::ofstream f(p, std::ios::binary | std::ios::trunc);
    f << content;
    ASSERT_TRUE(f.good()) << p;
  }

  const v1::RdmaDevice& Device(const std::string& name) const {
    for (const auto& d : host_.rdma_devices()) {
      if (d.name() == name) return d;
    }
    ADD_FAILURE() << "no device " << name;
    static const v1::RdmaDevice kNone;
    return kNone;
  }

  std::string tmp_;
  fs::path dir_;
  testing::HostSpec spec_;
  v1::Host host_;
};

std::string P(const std::string& device, const std::string& rest = "") {
  return absl::StrCat("{device=\"", device, "\",port=\"1\"", rest, "}");
}

TEST_F(HostMetricsTest, Roce9PortCountersAreExactAndScaled) {
  Write("roce-9port", [](testing::HostSpec& s) {
    auto& port = s.FindRdma("mlx5_1")->ports[0];
    port.counters = {
        {"port_rcv_data", 1000},
        {"port_xmit_data", (uint64_t{1} << 60) + 1},  // x4 beyond a double's 53 bits, exact.
        {"port_rcv_packets", 5},
        {"port_xmit_packets", 6},
        {"unicast_rcv_packets", 123456789012},
        {"unicast_xmit_packets", 15},
        {"multicast_rcv_packets", 16},
        {"multicast_xmit_packets", 17},
        {"port_rcv_errors", 10},
        {"port_xmit_discards", 11},
        {"link_downed", 7},
        {"link_error_recovery", 12},
        {"symbol_error", 8},
        {"port_xmit_wait", 9},
        {"VL15_dropped", 13},
        {"port_rcv_remote_physical_errors", 14},
    };
    port.hw_counters = {{"lifespan", 10}, {"np_cnp_sent", 21}, {"rp_cnp_handled", 22}};
  });
  const Scrape m = Run();
  const std::string p = P("mlx5_1");
  EXPECT_EQ(m["fabric_port_data_received_bytes_total" + p], "4000");
  EXPECT_EQ(m["fabric_port_data_transmitted_bytes_total" + p], "4611686018427387908");
  EXPECT_EQ(m["fabric_port_packets_received_total" + p], "5");
  EXPECT_EQ(m["fabric_port_packets_transmitted_total" + p], "6");
  EXPECT_EQ(m["fabric_port_unicast_packets_received_total" + p], "123456789012");
  EXPECT_EQ(m["fabric_port_unicast_packets_transmitted_total" + p], "15");
  EXPECT_EQ(m["fabric_port_multicast_packets_received_total" + p], "16");
  EXPECT_EQ(m["fabric_port_multicast_packets_transmitted_total" + p], "17");
  EXPECT_EQ(m["fabric_port_errors_received_total" + p], "10");
  EXPECT_EQ(m["fabric_port_discards_transmitted_total" + p], "11");
  EXPECT_EQ(m["fabric_port_link_downed_total" + p], "7");
  EXPECT_EQ(m["fabric_port_link_error_recovery_total" + p], "12");
  EXPECT_EQ(m["fabric_port_symbol_error_total" + p], "8");
  EXPECT_EQ(m["fabric_port_transmit_wait_total" + p], "9");
  EXPECT_EQ(m["fabric_port_counter_total" + P("mlx5_1", ",counter=\"VL15_dropped\"")], "13");
  EXPECT_EQ(
      m["fabric_port_counter_total" + P("mlx5_1", ",counter=\"port_rcv_remote_physical_errors\"")],
      "14");
  // Counters with a name of their own are not repeated under fabric_port_counter_total.
  EXPECT_EQ(m.With("counter=\"port_rcv_data\"").size(), 0u);
  EXPECT_EQ(m["fabric_port_hw_counter_total" + P("mlx5_1", ",counter=\"np_cnp_sent\"")], "21");
  EXPECT_EQ(m["fabric_port_hw_counter_total" + P("mlx5_1", ",counter=\"rp_cnp_handled\"")], "22");
  EXPECT_THAT(m.With("counter=\"lifespan\""), IsEmpty());
  EXPECT_EQ(m["fabric_port_read_errors" + p], "0");
  EXPECT_EQ(m.types.at("fabric_port_data_received_bytes_total"), "counter");
  EXPECT_EQ(m.types.at("fabric_port_hw_counter_total"), "counter");
  EXPECT_EQ(m.types.at("fabric_port_read_errors"), "gauge");
}

TEST_F(HostMetricsTest, Roce9PortGaugesAndLabels) {
  Write("roce-9port");
  const Scrape m = Run();
  EXPECT_EQ(m["fabric_rdma_devices"], "9");
  EXPECT_EQ(m["fabric_accelerators"], "8");  // The BMC's display is no accelerator.

  const std::string p = P("mlx5_1");
  EXPECT_EQ(m["fabric_port_info{device=\"mlx5_1\",port=\"1\",link_layer=\"Ethernet\","
              "netdev=\"eth1\",pci=\"0000:1b:00.0\"}"],
            "1");
  for (const char* state : {"DOWN", "INIT", "ARMED", "ACTIVE_DEFER"}) {
    EXPECT_EQ(m["fabric_port_state" + P("mlx5_1", absl::StrCat(",state=\"", state, "\""))], "0");
  }
  EXPECT_EQ(m["fabric_port_state" + P("mlx5_1", ",state=\"ACTIVE\"")], "1");
  EXPECT_EQ(m["fabric_port_state_id" + p], "4");
  EXPECT_EQ(m["fabric_port_physical_state_id" + P("mlx5_1", ",phys_state=\"LinkUp\"")], "5");
  EXPECT_EQ(m["fabric_port_rate_bytes_per_second" + p], "50000000000");            // 400 Gb/s.
  EXPECT_EQ(m["fabric_port_rate_bytes_per_second" + P("mlx5_0")], "12500000000");  // 100 Gb/s.
  EXPECT_EQ(m["fabric_port_gid_entries" + p], "4");
  EXPECT_EQ(m["fabric_port_roce_v2_ipv4_gid_index" + p], "3");
  // mlx5_3 also has a macvlan's two GIDs; its own netdev's RoCE v2 IPv4 GID stays at 3.
  EXPECT_EQ(m["fabric_port_gid_entries" + P("mlx5_3")], "6");
  EXPECT_EQ(m["fabric_port_roce_v2_ipv4_gid_index" + P("mlx5_3")], "3");

  // The builder's full counter sets: 14 of the 21 counters/ files have names of their own, and
  // every hw_counters/ entry but lifespan is a counter.
  const std::string dev2 = "device=\"mlx5_2\"";
  size_t counters = 0;
  for (const std::string& s : m.With(dev2)) {
    if (absl::EndsWith(s.substr(0, s.find('{')), "_total")) ++counters;
  }
  EXPECT_EQ(counters, testing::IbPortCounters(0).size() + testing::Mlx5HwCounters(0).size() - 1);
  EXPECT_EQ(m.With("fabric_port_counter_total{" + dev2).size(), 7u);
  EXPECT_EQ(m.With("fabric_port_hw_counter_total{" + dev2).size(),
            testing::Mlx5HwCounters(0).size() - 1);
  EXPECT_THAT(m.With("fabric_port_hw_gauge"), IsEmpty());

  // PCIe links from the inventory: the NICs' and the GPUs'.
  const v1::RdmaDevice& mlx5_0 = Device("mlx5_0");
  const std::string nic0 = absl::StrCat("{pci=\"", mlx5_0.pci().address(), "\",role=\"nic\"}");
  EXPECT_EQ(m["fabric_pcie_link_speed_gts" + nic0], "16");  // ConnectX-6 Dx: Gen4.
  EXPECT_EQ(m["fabric_pcie_link_max_speed_gts" + nic0], "16");
  EXPECT_EQ(m["fabric_pcie_link_width" + nic0], "16");
  EXPECT_EQ(m["fabric_pcie_link_max_width" + nic0], "16");
  const std::string gpu0 = "{pci=\"0000:1a:00.0\",role=\"accelerator\"}";
  EXPECT_EQ(m["fabric_pcie_link_speed_gts" + gpu0], "32");
  EXPECT_EQ(m["fabric_pcie_link_max_width" + gpu0], "16");
  EXPECT_EQ(m.With("role=\"nic\"").size(), 9u * 4);
  EXPECT_EQ(m.With("role=\"accelerator\"").size(), 8u * 4);
  EXPECT_THAT(m.With("0000:03:00.0"), IsEmpty());  // The ASPEED display.
  for (const auto& [s, v] : m.series) {
    if (absl::StartsWith(s, "fabric_port_read_errors")) {
      EXPECT_EQ(v, "0") << s;
    }
  }
}

TEST_F(HostMetricsTest, VanishedDeviceIsLeftOutEntirely) {
  Write("roce-9port");
  auto dev = testing::RdmaDevicePath(spec_, "mlx5_2");
  ASSERT_TRUE(dev.ok()) << dev.status();
  ASSERT_GT(fs::remove_all(dir_ / "sys" / *dev), 0u);
  const Scrape m = Run();
  EXPECT_EQ(m["fabric_rdma_devices"], "8");
  EXPECT_THAT(m.With("\"mlx5_2\""), IsEmpty());
  EXPECT_THAT(m.With(Device("mlx5_2").pci().address() + "\",role=\"nic\""), IsEmpty());
  EXPECT_EQ(m["fabric_port_state_id" + P("mlx5_3")], "4");  // The others as before.
  EXPECT_EQ(m["fabric_port_read_errors" + P("mlx5_3")], "0");

  // Its class link gone too (the kernel removes both): the same.
  fs::remove(dir_ / "sys" / "class" / "infiniband" / "mlx5_2");
  EXPECT_THAT(Run().With("\"mlx5_2\""), IsEmpty());
}

// One info series per netdev with a neighbour; what the switch sent is escaped, never trusted.
TEST_F(HostMetricsTest, NeighbourInfoPerNetdev) {
  Write("roce-9port");
  EXPECT_THAT(Run().With("fabric_netdev_neighbor_info"), IsEmpty());
  for (v1::Netdev& n : *host_.mutable_netdevs()) {
    if (n.name() != "eth1") continue;
    v1::Neighbor* nb = n.mutable_neighbor();
    nb->set_switch_label("leaf-07");
    nb->set_system_name("leaf-07");
    nb->set_chassis_id("02:00:00:00:0b:07");
    nb->set_port_id("swp1");
    nb->set_port_description("to \"gpu\"\nnode");
  }
  const Scrape m = Run();
  EXPECT_EQ(m["fabric_netdev_neighbor_info{netdev=\"eth1\",rdma_device=\"mlx5_1\",switch=\"leaf-"
              "07\",system_name=\"leaf-07\",chassis_id=\"02:00:00:00:0b:07\",port_id=\"swp1\","
              "port_description=\"to \\\"gpu\\\"\\nnode\"}"],
            "1");
  EXPECT_EQ(m.With("fabric_netdev_neighbor_info").size(), 1u);
}

TEST_F(HostMetricsTest, VanishedAcceleratorIsLeftOut) {
  Write("roce-9port");
  fs::remove(dir_ / "sys" / "bus" / "pci" / "devices" / "0000:1a:00.0");
  const Scrape m = Run();
  EXPECT_EQ(m["fabric_accelerators"], "7");
  EXPECT_THAT(m.With("0000:1a:00.0"), IsEmpty());
}

TEST_F(HostMetricsTest, UnreadableCounterFilesAreCountedNotFatal) {
  Write("roce-9port");
  const fs::path counters = PortDir("mlx5_3") / "counters";
  Overwrite(counters / "symbol_error", "garbage\n");
  fs::remove(counters / "link_downed");
  fs::create_directory(counters / "link_downed");                  // EISDIR on read.
  Overwrite(counters / "port_xmit_wait", std::string(8192, '9'));  // Longer than a counter.
  Overwrite(PortDir("mlx5_3") / "hw_counters" / "np_cnp_sent", "0x10\n");
  const Scrape m = Run();
  const std::string p = P("mlx5_3");
  EXPECT_EQ(m["fabric_port_read_errors" + p], "4");
  EXPECT_EQ(m["fabric_port_symbol_error_total" + p], "absent");
  EXPECT_EQ(m["fabric_port_link_downed_total" + p], "absent");
  EXPECT_EQ(m["fabric_port_transmit_wait_total" + p], "absent");
  EXPECT_EQ(m["fabric_port_hw_counter_total" + P("mlx5_3", ",counter=\"np_cnp_sent\"")], "absent");
  // The rest of the port still reads.
  EXPECT_NE(m["fabric_port_data_received_bytes_total" + p], "absent");
  EXPECT_EQ(m["fabric_port_errors_received_total" + p], "0");
  EXPECT_NE(m["fabric_port_hw_counter_total" + P("mlx5_3", ",counter=\"rp_cnp_handled\"")],
            "absent");
  EXPECT_EQ(m["fabric_port_state_id" + p], "4");
  EXPECT_EQ(m["fabric_port_read_errors" + P("mlx5_4")], "0");
}

TEST_F(HostMetricsTest, PortWithoutCountersHasNoCounterSeries) {
  Write("roce-9port", [](testing::HostSpec& s) {
    s.FindRdma("mlx5_4")->ports[0].counters.clear();
    s.FindRdma("mlx5_4")->ports[0].hw_counters.clear();
  });
  ASSERT_FALSE(fs::exists(PortDir("mlx5_4") / "counters"));
  const Scrape m = Run();
  for (const std::string& s : m.With("device=\"mlx5_4\"")) {
    EXPECT_FALSE(absl::StrContains(s.substr(0, s.find('{')), "_total")) << s;
  }
  EXPECT_EQ(m["fabric_port_state_id" + P("mlx5_4")], "4");
  EXPECT_EQ(m["fabric_port_read_errors" + P("mlx5_4")], "0");
  EXPECT_NE(m["fabric_port_link_downed_total" + P("mlx5_5")], "absent");
}

TEST_F(HostMetricsTest, StateAndRateAreReadAtScrapeTime) {
  Write("roce-9port");
  // After the inventory was taken: mlx5_5 goes down and mlx5_6 retrains at 200 Gb/s.
  Overwrite(PortDir("mlx5_5") / "state", "1: DOWN\n");
  Overwrite(PortDir("mlx5_5") / "phys_state", "3: Disabled\n");
  Overwrite(PortDir("mlx5_6") / "rate", "200 Gb/sec (4X HDR)\n");
  const Scrape m = Run();
  EXPECT_EQ(m["fabric_port_state" + P("mlx5_5", ",state=\"DOWN\"")], "1");
  EXPECT_EQ(m["fabric_port_state" + P("mlx5_5", ",state=\"ACTIVE\"")], "0");
  EXPECT_EQ(m["fabric_port_state_id" + P("mlx5_5")], "1");
  EXPECT_EQ(m["fabric_port_physical_state_id" + P("mlx5_5", ",phys_state=\"Disabled\"")], "3");
  EXPECT_EQ(m["fabric_port_physical_state_id" + P("mlx5_5", ",phys_state=\"LinkUp\"")], "absent");
  EXPECT_EQ(m["fabric_port_rate_bytes_per_second" + P("mlx5_6")], "25000000000");
  EXPECT_EQ(m["fabric_port_read_errors" + P("mlx5_5")], "0");
}

TEST_F(HostMetricsTest, UnreadableStateAndRateAreCounted) {
  Write("roce-9port");
  Overwrite(PortDir("mlx5_7") / "state", "banana\n");
  Overwrite(PortDir("mlx5_7") / "phys_state", "9: Warp\n");
  fs::remove(PortDir("mlx5_7") / "rate");
  fs::create_directory(PortDir("mlx5_7") / "rate");
  const Scrape m = Run();
  EXPECT_THAT(m.With("fabric_port_state{device=\"mlx5_7\""), IsEmpty());
  EXPECT_THAT(m.With("fabric_port_state_id{device=\"mlx5_7\""), IsEmpty());
  EXPECT_THAT(m.With("fabric_port_physical_state_id{device=\"mlx5_7\""), IsEmpty());
  EXPECT_EQ(m["fabric_port_rate_bytes_per_second" + P("mlx5_7")], "absent");
  EXPECT_EQ(m["fabric_port_read_errors" + P("mlx5_7")], "3");
  EXPECT_NE(m["fabric_port_data_received_bytes_total" + P("mlx5_7")], "absent");
}

TEST_F(HostMetricsTest, InfiniBandHost) {
  Write("dgx-h100-ib");
  const Scrape m = Run();
  const std::string p = P("mlx5_0");
  const v1::RdmaDevice& dev = Device("mlx5_0");
  ASSERT_EQ(dev.ports_size(), 1);
  EXPECT_EQ(
      m[absl::StrCat("fabric_port_info{device=\"mlx5_0\",port=\"1\",link_layer=\"InfiniBand\",",
                     dev.ports(0).netdev().empty()
                         ? ""
                         : absl::StrCat("netdev=\"", dev.ports(0).netdev(), "\","),
                     "pci=\"0000:18:00.0\"}")],
      "1");
  EXPECT_EQ(m["fabric_port_roce_v2_ipv4_gid_index" + p], "absent");
  EXPECT_EQ(m["fabric_port_gid_entries" + p], absl::StrCat(dev.ports(0).gids_size()));
  EXPECT_EQ(m["fabric_port_state_id" + p], "4");
  EXPECT_NE(m["fabric_port_data_received_bytes_total" + p], "absent");
  // SR-IOV VFs are RDMA devices too.
  EXPECT_EQ(m["fabric_rdma_devices"], absl::StrCat(host_.rdma_devices_size()));
  EXPECT_EQ(m["fabric_accelerators"], "8");
}

TEST_F(HostMetricsTest, PrefixOnlyGidSlotsAreNotEntries) {
  Write("ib-prefix-gids");  // 128 slots per port: one port GID, 127 subnet prefixes alone.
  const Scrape m = Run();
  EXPECT_EQ(m["fabric_port_gid_entries" + P("mlx5_0")], "1");
  EXPECT_EQ(m["fabric_port_gid_entries" + P("mlx5_1")], "1");
}

TEST_F(HostMetricsTest, BnxtLevelsAreGauges) {
  Write("amd-mi300x-bnxt");
  const Scrape m = Run();
  EXPECT_NE(m["fabric_port_hw_gauge" + P("bnxt_re0", ",counter=\"active_qps\"")], "absent");
  EXPECT_NE(m["fabric_port_hw_gauge" + P("bnxt_re0", ",counter=\"watermark_qps\"")], "absent");
  EXPECT_EQ(m["fabric_port_hw_counter_total" + P("bnxt_re0", ",counter=\"active_qps\"")], "absent");
  EXPECT_NE(m["fabric_port_hw_counter_total" + P("bnxt_re0", ",counter=\"rx_bytes\"")], "absent");
  EXPECT_EQ(m.types.at("fabric_port_hw_gauge"), "gauge");
  // The Tenstorrent card is an accelerator like the GPUs.
  EXPECT_NE(m["fabric_pcie_link_width{pci=\"0000:c6:00.0\",role=\"accelerator\"}"], "absent");
  EXPECT_EQ(m["fabric_accelerators"], "9");
}

TEST_F(HostMetricsTest, BrokenHostStillScrapes) {
  Write("broken");
  const Scrape m = Run();
  // mlx5_2's state ("banana") and rate ("fast") are garbage: counted, the port still exported.
  EXPECT_EQ(m["fabric_port_read_errors" + P("mlx5_2")], "2");
  EXPECT_NE(m["fabric_port_link_downed_total" + P("mlx5_2")], "absent");
  EXPECT_THAT(m.With("\"mlx5_9\""), IsEmpty());  // A dangling class link: no device.
  EXPECT_EQ(m["fabric_port_state_id" + P("mlx5_1")], "4");
}

TEST_F(HostMetricsTest, EveryExampleHostRendersValidText) {
  for (const std::string& name : testing::ExampleHostNames()) {
    SCOPED_TRACE(name);
    TearDown();
    Write(name);
    const Scrape m = Run();
    EXPECT_THAT(m.series, Contains(Key("fabric_rdma_devices")));
    for (const auto& [family, type] : m.types) {
      EXPECT_TRUE(type == "gauge" || type == "counter") << family;
      EXPECT_EQ(type == "counter", absl::EndsWith(family, "_total")) << family;
      EXPECT_TRUE(absl::StartsWith(family, "fabric_")) << family;
    }
  }
}

TEST(HostMetrics, EmptyHost) {
  HostFsImpl sys("/nonexistent-sysfs-root");
  Exposition e;
  AppendHostMetrics(v1::Host(), sys, &e);
  EXPECT_EQ(e.Render(),
            "# HELP fabric_rdma_devices RDMA devices (SR-IOV VFs and software devices included).\n"
            "# TYPE fabric_rdma_devices gauge\n"
            "fabric_rdma_devices 0\n"
            "# HELP fabric_accelerators GPUs and other accelerators, servers' management displays "
            "excepted.\n"
            "# TYPE fabric_accelerators gauge\n"
            "fabric_accelerators 0\n");
}

}  // namespace
}  // namespace fabric::metrics
