#include "tests/hosts/builder.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/hosts/hosts.h"
#include "tests/testing/subprocess.h"

namespace fabric::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

constexpr char kZeroGid[] = "0000:0000:0000:0000:0000:0000:0000:0000\n";

// Each test writes below its own mkdtemp directory, removed afterwards.
class HostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // tmpfs when it has room: sriov-512vf alone is about 95,000 files, minutes on a busy disk.
    const std::string tmp = MakeTempDir("testhosts");
    ASSERT_FALSE(tmp.empty()) << std::strerror(errno);
    tmp_ = tmp;
    dir_ = tmp_ / "host";
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(tmp_, ec);
  }

  void Write(std::string_view name) {
    absl::StatusOr<HostSpec> spec = ExampleHost(name);
    ASSERT_TRUE(spec.ok()) << spec.status();
    absl::Status st = WriteHost(*spec, dir_);
    ASSERT_TRUE(st.ok()) << st;
  }

  fs::path Sys(std::string_view rel) const { return dir_ / "sys" / rel; }
  fs::path Proc(std::string_view rel) const { return dir_ / "proc" / rel; }

  static std::string Read(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    if (!in) return "<unreadable>";
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }
  std::string ReadSys(std::string_view rel) const { return Read(Sys(rel)); }

  static std::string ReadLink(const fs::path& p) {
    std::error_code ec;
    fs::path t = fs::read_symlink(p, ec);
    return ec ? "<not a link>" : t.string();
  }

  static bool Exists(const fs::path& p) {
    std::error_code ec;
    return fs::exists(fs::symlink_status(p, ec));
  }

  // The directory a path resolves to, relative to dir/sys; "<error>" when it does not resolve.
  std::string Resolve(std::string_view rel) const {
    std::error_code ec;
    const fs::path real = fs::canonical(Sys(rel), ec);
    if (ec) return "<error: " + ec.message() + ">";
    const fs::path root = fs::canonical(dir_ / "sys", ec);
    return real.lexically_relative(root).string();
  }

  static std::vector<std::string> List(const fs::path& d) {
    std::vector<std::string> names;
    std::error_code ec;
    for (fs::directory_iterator it(d, ec), end; !ec && it != end; it.increment(ec)) {
      names.push_back(it->path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  // Every symbolic link in the tree that is absolute or does not resolve inside the root.
  std::vector<std::string> BadLinks() const {
    std::vector<std::string> bad;
    std::error_code ec;
    const fs::path root = fs::canonical(dir_, ec);
    for (fs::recursive_directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
      if (!it->is_symlink()) continue;
      std::error_code lec;
      const fs::path target = fs::read_symlink(it->path(), lec);
      if (lec || target.is_absolute()) {
        bad.push_back(it->path().string() + " is absolute");
        continue;
      }
      std::error_code rec;
      const fs::path real = fs::canonical(it->path(), rec);
      const std::string rel = real.lexically_relative(root).string();
      if (rec || rel.empty() || rel.substr(0, 2) == "..") {
        bad.push_back(it->path().string() + " -> " + target.string() + " does not resolve inside");
      }
    }
    if (ec) bad.push_back("walk failed: " + ec.message());
    return bad;
  }

  fs::path tmp_;
  fs::path dir_;
};

// ---------------------------------------------------------------------------------------------
// Every example host.

TEST_F(HostTest, ExampleHostNamesInOrder) {
  EXPECT_THAT(ExampleHostNames(),
              ElementsAre("roce-9port", "dgx-h100-ib", "amd-mi300x-bnxt", "many-hcas", "broken",
                          "ipv6-roce", "ib-prefix-gids", "pcie-2x2", "sriov-512vf",
                          "amd-mi300x-pollara", "mixed-h100-mi300x", "cloud-vm-flat"));
  EXPECT_EQ(ExampleHost("no-such-host").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(HostTest, EveryExampleHostWritesAConsistentTree) {
  for (const std::string& name : ExampleHostNames()) {
    SCOPED_TRACE(name);
    dir_ = tmp_ / name;
    absl::StatusOr<HostSpec> spec = ExampleHost(name);
    ASSERT_TRUE(spec.ok()) << spec.status();
    absl::Status st = WriteHost(*spec, dir_);
    ASSERT_TRUE(st.ok()) << st;
    EXPECT_EQ(Read(Proc("sys/kernel/hostname")), spec->hostname + "\n");
    EXPECT_EQ(Read(Proc("sys/kernel/osrelease")), spec->osrelease + "\n");
    if (name == "broken") continue;  // Its damage is checked below.

    EXPECT_THAT(BadLinks(), IsEmpty());
    EXPECT_THAT(List(Sys("class/infiniband")), SizeIs(spec->rdma.size()));
    EXPECT_THAT(List(Sys("class/net")), SizeIs(spec->netdevs.size()));
    for (const RdmaDeviceSpec& r : spec->rdma) {
      EXPECT_EQ(Resolve("class/infiniband/" + r.name), *RdmaDevicePath(*spec, r.name));
      EXPECT_EQ(ReadSys("class/infiniband/" + r.name + "/node_guid"), r.node_guid + "\n");
      if (!r.pci.empty()) {
        EXPECT_EQ(Resolve("class/infiniband/" + r.name + "/device"),
                  *PciFunctionPath(*spec, r.pci));
      }
      if (r.uverbs) {
        const std::string u = "class/infiniband_verbs/uverbs" + std::to_string(*r.uverbs);
        EXPECT_EQ(ReadSys(u + "/ibdev"), r.name + "\n");
      }
    }
    for (const NetdevSpec& n : spec->netdevs) {
      EXPECT_EQ(Resolve("class/net/" + n.name), *NetdevPath(*spec, n.name));
      EXPECT_EQ(Exists(Sys("class/net/" + n.name + "/device")), !n.pci.empty()) << n.name;
    }
    for (const PciFunctionSpec& f : spec->pci) {
      EXPECT_EQ(Resolve("bus/pci/devices/" + f.bdf), *PciFunctionPath(*spec, f.bdf));
      if (!f.driver.empty()) {
        EXPECT_EQ(Resolve("bus/pci/devices/" + f.bdf + "/driver"), "bus/pci/drivers/" + f.driver);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// roce-9port in detail.

constexpr char kMlx5_1Dir[] =
    "devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0/0000:19:01.0/"
    "0000:1b:00.0";

TEST_F(HostTest, RoceRdmaDeviceLayout) {
  Write("roce-9port");
  EXPECT_EQ(ReadLink(Sys("class/infiniband/mlx5_1")),
            std::string("../../") + kMlx5_1Dir + "/infiniband/mlx5_1");
  const std::string dev = std::string(kMlx5_1Dir) + "/infiniband/mlx5_1";
  EXPECT_EQ(ReadLink(Sys(dev + "/device")), "../../../0000:1b:00.0");
  EXPECT_EQ(ReadLink(Sys(dev + "/subsystem")), "../../../../../../../../../../class/infiniband");
  EXPECT_EQ(ReadSys(dev + "/node_guid"), "0c42:a103:0001:0001\n");
  EXPECT_EQ(ReadSys(dev + "/fw_ver"), "28.39.1002\n");
  EXPECT_EQ(ReadSys(dev + "/hca_type"), "MT4129\n");
  EXPECT_EQ(ReadSys(dev + "/node_type"), "1: CA\n");
  EXPECT_FALSE(Exists(Sys(dev + "/parent")));
  const std::string port = dev + "/ports/1";
  EXPECT_EQ(ReadSys(port + "/state"), "4: ACTIVE\n");
  EXPECT_EQ(ReadSys(port + "/phys_state"), "5: LinkUp\n");
  EXPECT_EQ(ReadSys(port + "/rate"), "400 Gb/sec (4X NDR)\n");
  EXPECT_EQ(ReadSys(port + "/link_layer"), "Ethernet\n");
  EXPECT_EQ(ReadSys(port + "/lid"), "0x0\n");
  EXPECT_EQ(ReadSys(port + "/sm_lid"), "0x0\n");
  EXPECT_EQ(ReadSys(port + "/pkeys/0"), "0xffff\n");
  EXPECT_EQ(ReadSys(port + "/pkeys/127"), "0x0000\n");
  EXPECT_FALSE(Exists(Sys(port + "/pkeys/128")));
  EXPECT_GE(List(Sys(port + "/counters")).size(), 15u);
  EXPECT_GE(List(Sys(port + "/hw_counters")).size(), 30u);
  EXPECT_EQ(ReadSys(port + "/hw_counters/lifespan"), "10\n");
  EXPECT_EQ(ReadSys(port + "/counters/symbol_error"), "0\n");
  EXPECT_EQ(ReadSys("class/infiniband/mlx5_0/ports/1/rate"), "100 Gb/sec (4X EDR)\n");
  EXPECT_EQ(ReadSys("class/infiniband/mlx5_0/hca_type"), "MT4125\n");
}

TEST_F(HostTest, RoceGidTable) {
  Write("roce-9port");
  const std::string port = "class/infiniband/mlx5_1/ports/1";
  EXPECT_THAT(List(Sys(port + "/gids")), SizeIs(256));
  EXPECT_EQ(ReadSys(port + "/gids/0"), "fe80:0000:0000:0000:0e42:a1ff:fe01:0001\n");
  EXPECT_EQ(ReadSys(port + "/gids/1"), "fe80:0000:0000:0000:0e42:a1ff:fe01:0001\n");
  EXPECT_EQ(ReadSys(port + "/gids/2"), "0000:0000:0000:0000:0000:ffff:190b:800b\n");
  EXPECT_EQ(ReadSys(port + "/gids/3"), "0000:0000:0000:0000:0000:ffff:190b:800b\n");
  EXPECT_EQ(ReadSys(port + "/gids/4"), kZeroGid);
  EXPECT_EQ(ReadSys(port + "/gids/255"), kZeroGid);
  EXPECT_EQ(ReadSys(port + "/gid_attrs/types/0"), "IB/RoCE v1\n");
  EXPECT_EQ(ReadSys(port + "/gid_attrs/types/1"), "RoCE v2\n");
  EXPECT_EQ(ReadSys(port + "/gid_attrs/types/2"), "IB/RoCE v1\n");
  EXPECT_EQ(ReadSys(port + "/gid_attrs/types/3"), "RoCE v2\n");
  EXPECT_EQ(ReadSys(port + "/gid_attrs/ndevs/3"), "eth1\n");
  EXPECT_THAT(List(Sys(port + "/gid_attrs/types")), ElementsAre("0", "1", "2", "3"));
  EXPECT_THAT(List(Sys(port + "/gid_attrs/ndevs")), ElementsAre("0", "1", "2", "3"));

  // The macvlan's addresses are GIDs of mlx5_3, naming the macvlan.
  const std::string p3 = "class/infiniband/mlx5_3/ports/1";
  EXPECT_EQ(ReadSys(p3 + "/gids/3"), "0000:0000:0000:0000:0000:ffff:190b:800d\n");
  EXPECT_EQ(ReadSys(p3 + "/gids/4"), "0000:0000:0000:0000:0000:ffff:190b:8132\n");
  EXPECT_EQ(ReadSys(p3 + "/gid_attrs/types/4"), "IB/RoCE v1\n");
  EXPECT_EQ(ReadSys(p3 + "/gid_attrs/types/5"), "RoCE v2\n");
  EXPECT_EQ(ReadSys(p3 + "/gid_attrs/ndevs/4"), "macvlan0\n");
  EXPECT_EQ(ReadSys(p3 + "/gid_attrs/ndevs/5"), "macvlan0\n");
  EXPECT_EQ(ReadSys(p3 + "/gid_attrs/ndevs/3"), "eth3\n");
}

TEST_F(HostTest, RocePciFunctions) {
  Write("roce-9port");
  const std::string f = kMlx5_1Dir;
  EXPECT_EQ(ReadSys(f + "/vendor"), "0x15b3\n");
  EXPECT_EQ(ReadSys(f + "/device"), "0x1021\n");
  EXPECT_EQ(ReadSys(f + "/class"), "0x020000\n");
  EXPECT_EQ(ReadSys(f + "/numa_node"), "0\n");
  EXPECT_EQ(ReadSys(f + "/local_cpulist"), "0-31\n");
  EXPECT_EQ(ReadSys(f + "/local_cpus"), "00000000,ffffffff\n");
  EXPECT_EQ(ReadSys(f + "/current_link_speed"), "32.0 GT/s PCIe\n");
  EXPECT_EQ(ReadSys(f + "/current_link_width"), "16\n");
  EXPECT_EQ(ReadSys(f + "/max_link_speed"), "32.0 GT/s PCIe\n");
  EXPECT_EQ(ReadSys(f + "/max_link_width"), "16\n");
  EXPECT_THAT(ReadSys(f + "/uevent"), HasSubstr("DRIVER=mlx5_core\nPCI_CLASS=20000\n"));
  EXPECT_EQ(ReadLink(Sys(f + "/driver")), "../../../../../../../../bus/pci/drivers/mlx5_core");
  EXPECT_EQ(ReadLink(Sys(f + "/subsystem")), "../../../../../../../../bus/pci");
  EXPECT_EQ(ReadLink(Sys("bus/pci/devices/0000:1b:00.0")), std::string("../../../") + f);
  EXPECT_EQ(ReadLink(Sys("bus/pci/drivers/mlx5_core/0000:1b:00.0")),
            std::string("../../../../") + f);
  EXPECT_EQ(Resolve("bus/pci/drivers/mlx5_core/module"), "module/mlx5_core");
  EXPECT_TRUE(fs::is_directory(Sys(f + "/power")));

  const std::string config = ReadSys(f + "/config");
  ASSERT_EQ(config.size(), 256u);
  EXPECT_EQ(static_cast<uint8_t>(config[0]), 0xb3);
  EXPECT_EQ(static_cast<uint8_t>(config[1]), 0x15);
  EXPECT_EQ(static_cast<uint8_t>(config[0x0b]), 0x02);  // Network controller.
  EXPECT_EQ(static_cast<uint8_t>(config[0x40]), 0x10);  // PCIe capability.
  EXPECT_EQ(static_cast<uint8_t>(config[0x52]), 0x05);  // 32 GT/s ...
  EXPECT_EQ(static_cast<uint8_t>(config[0x53]), 0x01);  // ... x16.

  // The GPU beside it, and the bridges above.
  const std::string gpu =
      "devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0/0000:19:00.0/"
      "0000:1a:00.0";
  EXPECT_EQ(ReadSys(gpu + "/class"), "0x030200\n");
  EXPECT_EQ(ReadSys(gpu + "/device"), "0x2330\n");
  EXPECT_EQ(ReadLink(Sys(gpu + "/driver")), "../../../../../../../../bus/pci/drivers/nvidia");
  EXPECT_EQ(ReadSys("devices/pci0000:15/0000:15:01.0/class"), "0x060400\n");
  EXPECT_EQ(ReadSys("devices/pci0000:15/0000:15:01.0/secondary_bus_number"), "22\n");
  EXPECT_EQ(ReadSys("devices/pci0000:15/0000:15:01.0/subordinate_bus_number"), "31\n");
  EXPECT_TRUE(Exists(Sys("devices/pci0000:15/uevent")));
  EXPECT_TRUE(fs::is_directory(Sys("devices/pci0000:15/power")));
  EXPECT_EQ(ReadSys("devices/pci0000:97/0000:97:01.0/numa_node"), "1\n");
  EXPECT_EQ(ReadSys("bus/pci/devices/0000:9c:00.0/local_cpulist"), "32-63\n");

  // The BMC display: a conventional PCI function without link attributes.
  EXPECT_EQ(Resolve("bus/pci/devices/0000:03:00.0"),
            "devices/pci0000:00/0000:00:1c.0/0000:02:00.0/0000:03:00.0");
  EXPECT_EQ(ReadSys("bus/pci/devices/0000:03:00.0/class"), "0x030000\n");
  EXPECT_FALSE(Exists(Sys("bus/pci/devices/0000:03:00.0/current_link_speed")));
  EXPECT_EQ(ReadSys("bus/pci/devices/0000:02:00.0/class"), "0x060400\n");
}

TEST_F(HostTest, RoceNetdevs) {
  Write("roce-9port");
  const std::string eth1 = std::string(kMlx5_1Dir) + "/net/eth1";
  EXPECT_EQ(ReadLink(Sys("class/net/eth1")), "../../" + eth1);
  EXPECT_EQ(ReadLink(Sys(eth1 + "/device")), "../../../0000:1b:00.0");
  EXPECT_EQ(ReadSys(eth1 + "/address"), "0c:42:a1:01:00:01\n");
  EXPECT_EQ(ReadSys(eth1 + "/mtu"), "4200\n");
  EXPECT_EQ(ReadSys(eth1 + "/operstate"), "up\n");
  EXPECT_EQ(ReadSys(eth1 + "/speed"), "400000\n");
  EXPECT_EQ(ReadSys(eth1 + "/dev_port"), "0\n");
  EXPECT_EQ(ReadSys(eth1 + "/carrier"), "1\n");
  EXPECT_EQ(ReadSys(eth1 + "/type"), "1\n");
  EXPECT_EQ(ReadSys(eth1 + "/ifindex"), "3\n");  // lo, eth0, eth1.
  EXPECT_TRUE(Exists(Sys(eth1 + "/statistics/rx_bytes")));
  EXPECT_EQ(ReadSys("class/net/eth0/speed"), "100000\n");
  EXPECT_EQ(ReadSys("class/net/eth0/mtu"), "1500\n");

  EXPECT_EQ(ReadLink(Sys("class/net/lo")), "../../devices/virtual/net/lo");
  EXPECT_EQ(ReadSys("class/net/lo/ifindex"), "1\n");
  EXPECT_FALSE(Exists(Sys("class/net/lo/speed")));
  EXPECT_FALSE(Exists(Sys("class/net/lo/device")));

  EXPECT_EQ(ReadLink(Sys("class/net/macvlan0")), "../../devices/virtual/net/macvlan0");
  EXPECT_FALSE(Exists(Sys("class/net/macvlan0/device")));
  EXPECT_EQ(Resolve("class/net/macvlan0/lower_eth3"), Resolve("class/net/eth3"));
  EXPECT_EQ(Resolve("class/net/eth3/upper_macvlan0"), "devices/virtual/net/macvlan0");
  EXPECT_THAT(ReadSys("class/net/macvlan0/uevent"), HasSubstr("DEVTYPE=macvlan\n"));
}

TEST_F(HostTest, RoceUverbsModulesNuma) {
  Write("roce-9port");
  EXPECT_EQ(ReadSys("class/infiniband_verbs/abi_version"), "6\n");
  EXPECT_EQ(ReadLink(Sys("class/infiniband_verbs/uverbs1")),
            std::string("../../") + kMlx5_1Dir + "/infiniband_verbs/uverbs1");
  EXPECT_EQ(ReadSys("class/infiniband_verbs/uverbs1/ibdev"), "mlx5_1\n");
  EXPECT_EQ(ReadSys("class/infiniband_verbs/uverbs1/abi_version"), "1\n");
  EXPECT_EQ(ReadSys("class/infiniband_verbs/uverbs1/dev"), "231:193\n");
  EXPECT_EQ(ReadLink(Sys("class/infiniband_verbs/uverbs1/device")), "../../../0000:1b:00.0");
  EXPECT_THAT(List(Sys("class/infiniband_verbs")), SizeIs(10));  // uverbs0-8, abi_version.

  EXPECT_EQ(ReadSys("module/nvidia_peermem/refcnt"), "0\n");
  EXPECT_EQ(ReadSys("module/ib_core/refcnt"), "3\n");
  EXPECT_EQ(ReadLink(Sys("module/ib_core/holders/mlx5_ib")), "../../mlx5_ib");
  for (const char* m : {"mlx5_core", "mlx5_ib", "ib_core", "ib_uverbs", "nvidia"}) {
    EXPECT_TRUE(fs::is_directory(Sys(std::string("module/") + m))) << m;
  }
  EXPECT_EQ(ReadSys("devices/system/node/online"), "0-1\n");
  EXPECT_TRUE(fs::is_directory(Sys("devices/system/node/node0")));
  EXPECT_EQ(ReadSys("devices/system/node/node1/cpulist"), "32-63\n");
}

TEST_F(HostTest, RoceProcFiles) {
  Write("roce-9port");
  const std::string route = Read(Proc("net/route"));
  std::vector<std::string> lines;
  std::istringstream in(route);
  for (std::string line; std::getline(in, line);) {
    EXPECT_EQ(line.size(), 127u) << "the kernel pads each line to 127 columns: " << line;
    lines.push_back(line.substr(0, line.find_last_not_of(' ') + 1));
  }
  ASSERT_GE(lines.size(), 4u);
  EXPECT_EQ(lines[0],
            "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT");
  EXPECT_EQ(lines[1], "eth0\t00000000\t013C000A\t0003\t0\t0\t0\t00000000\t0\t0\t0");
  EXPECT_EQ(lines[2], "eth0\t003C000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0");
  EXPECT_EQ(lines[3], "eth1\t00800B19\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0");
  EXPECT_THAT(route, HasSubstr("macvlan0\t00810B19\t00000000\t0001"));

  const std::string route6 = Read(Proc("net/ipv6_route"));
  EXPECT_THAT(route6, HasSubstr("00000000000000000000000000000000 00 "
                                "00000000000000000000000000000000 00 "
                                "fe800000000000000000000000000001 00000400 00000001 00000000 "
                                "00000003     eth0\n"));
  EXPECT_THAT(route6, HasSubstr("00000000000000000000000000000001 80 "
                                "00000000000000000000000000000000 00 "
                                "00000000000000000000000000000000 00000000 00000001 00000000 "
                                "80200001       lo\n"));

  const std::string modules = Read(Proc("modules"));
  EXPECT_THAT(modules, HasSubstr("nvidia_peermem 16384 0 - Live 0x0000000000000000 (OE)\n"));
  EXPECT_THAT(modules, HasSubstr("mlx5_core 2412544 1 mlx5_ib, Live 0x0000000000000000\n"));
  EXPECT_THAT(Read(Proc("driver/nvidia/version")), HasSubstr("535.161.07"));
}

// ---------------------------------------------------------------------------------------------
// The other hosts.

TEST_F(HostTest, DgxInfiniBandAndSriov) {
  Write("dgx-h100-ib");
  EXPECT_EQ(Resolve("class/infiniband/mlx5_0"),
            "devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0/"
            "infiniband/mlx5_0");
  EXPECT_EQ(Resolve("bus/pci/devices/0000:19:00.0"),
            "devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0/0000:19:00.0");
  const std::string port = "class/infiniband/mlx5_0/ports/1";
  EXPECT_EQ(ReadSys(port + "/link_layer"), "InfiniBand\n");
  EXPECT_EQ(ReadSys(port + "/lid"), "0x1\n");
  EXPECT_EQ(ReadSys(port + "/sm_lid"), "0x1\n");
  EXPECT_EQ(ReadSys("class/infiniband/mlx5_11/ports/1/lid"), "0x8\n");
  EXPECT_THAT(List(Sys(port + "/gids")), SizeIs(128));
  const std::string guid = ReadSys("class/infiniband/mlx5_0/node_guid");
  EXPECT_EQ(ReadSys(port + "/gids/0"), "fe80:0000:0000:0000:" + guid);
  EXPECT_EQ(ReadSys(port + "/gid_attrs/types/0"), "IB/RoCE v1\n");
  EXPECT_FALSE(Exists(Sys(port + "/gid_attrs/ndevs/0")));
  EXPECT_EQ(ReadSys("class/net/ibp24s0/type"), "32\n");
  EXPECT_EQ(Resolve("class/net/ibp24s0/device"), Resolve("class/infiniband/mlx5_0/device"));
  const std::string ipoib_addr = ReadSys("class/net/ibp24s0/address");
  EXPECT_EQ(std::count(ipoib_addr.begin(), ipoib_addr.end(), ':'), 19) << ipoib_addr;

  // Storage NIC mlx5_1 with four VFs.
  const std::string pf = "bus/pci/devices/0000:26:00.0";
  EXPECT_EQ(ReadSys(pf + "/sriov_totalvfs"), "8\n");
  EXPECT_EQ(ReadSys(pf + "/sriov_numvfs"), "4\n");
  EXPECT_EQ(ReadLink(Sys(pf + "/virtfn0")), "../0000:26:00.1");
  EXPECT_EQ(ReadLink(Sys(pf + "/virtfn3")), "../0000:26:00.4");
  EXPECT_FALSE(Exists(Sys(pf + "/virtfn4")));
  EXPECT_EQ(ReadLink(Sys("bus/pci/devices/0000:26:00.2/physfn")), "../0000:26:00.0");
  EXPECT_EQ(ReadSys("bus/pci/devices/0000:26:00.2/device"), "0x101e\n");
  EXPECT_EQ(ReadSys("bus/pci/devices/0000:26:00.2/current_link_speed"), "Unknown\n");
  EXPECT_EQ(Resolve("class/infiniband/mlx5_13/device"),
            "devices/pci0000:25/0000:25:01.0/0000:26:00.2");
  EXPECT_THAT(List(Sys("class/infiniband/mlx5_13/ports/1/gid_attrs/types")), ElementsAre("0", "1"));
  EXPECT_EQ(ReadSys("class/infiniband/mlx5_1/ports/1/rate"), "200 Gb/sec (4X HDR)\n");
  EXPECT_EQ(ReadSys("class/net/eno1/device/vendor"), "0x8086\n");

  EXPECT_EQ(Read(Proc("driver/nvidia/version")),
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build  "
            "(dvs-builder@U16-I3-B03-4-3)  Tue Mar  5 22:15:33 UTC 2024\n"
            "GCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)\n");
  EXPECT_THAT(Read(Proc("modules")), ::testing::Not(HasSubstr("peermem")));
  EXPECT_FALSE(Exists(Sys("module/nvidia_peermem")));
  EXPECT_THAT(Read(Proc("net/route")), HasSubstr("eno1\t00000000\t0164A8C0\t0003"));
}

TEST_F(HostTest, AmdGidLayoutsAndOtherAccelerators) {
  Write("amd-mi300x-bnxt");
  EXPECT_EQ(ReadSys("class/infiniband/bnxt_re0/hca_type"), "0x1760\n");
  EXPECT_EQ(ReadSys("class/infiniband/bnxt_re0/fw_ver"), "230.0.133.0\n");
  EXPECT_EQ(ReadSys("class/infiniband/bnxt_re0/ports/1/gid_attrs/types/3"), "RoCE v2\n");
  EXPECT_EQ(ReadSys("class/infiniband/bnxt_re0/ports/1/gids/3"),
            "0000:0000:0000:0000:0000:ffff:0ae0:0005\n");
  const std::string p4 = "class/infiniband/bnxt_re4/ports/1";
  EXPECT_THAT(List(Sys(p4 + "/gid_attrs/types")), ElementsAre("0", "1"));
  EXPECT_EQ(ReadSys(p4 + "/gid_attrs/types/0"), "RoCE v2\n");
  EXPECT_EQ(ReadSys(p4 + "/gids/1"), "0000:0000:0000:0000:0000:ffff:0ae0:0405\n");
  EXPECT_EQ(ReadSys(p4 + "/gids/2"), kZeroGid);
  EXPECT_GE(List(Sys(p4 + "/hw_counters")).size(), 30u);
  EXPECT_EQ(ReadSys("bus/pci/devices/0000:09:00.0/class"), "0x120000\n");
  EXPECT_EQ(ReadSys("bus/pci/devices/0000:09:00.0/vendor"), "0x1002\n");
  EXPECT_EQ(ReadSys("bus/pci/devices/0000:c6:00.0/vendor"), "0x1e52\n");
  EXPECT_EQ(ReadSys("bus/pci/devices/0000:c6:00.0/numa_node"), "1\n");
  EXPECT_EQ(Resolve("class/net/eno8303/device/driver"), "bus/pci/drivers/tg3");
  EXPECT_FALSE(Exists(Sys("class/infiniband/eno8303")));
}

TEST_F(HostTest, ManyHcasDownPortAndPrefixTrap) {
  Write("many-hcas");
  EXPECT_THAT(List(Sys("class/infiniband")), SizeIs(12));
  EXPECT_EQ(ReadSys("devices/system/node/online"), "0\n");
  const std::string p2 = "class/infiniband/mlx5_2/ports/1";
  EXPECT_EQ(ReadSys(p2 + "/state"), "1: DOWN\n");
  EXPECT_EQ(ReadSys(p2 + "/phys_state"), "3: Disabled\n");
  EXPECT_EQ(ReadSys(p2 + "/rate"), "400 Gb/sec (4X NDR)\n");
  EXPECT_EQ(ReadSys("class/net/enp51s0np0/operstate"), "down\n");
  EXPECT_FALSE(Exists(Sys("class/net/enp51s0np0/speed")));
  // GPU1 shares a switch with mlx5_10, not with mlx5_1.
  EXPECT_EQ(Resolve("bus/pci/devices/0000:b4:00.0"),
            "devices/pci0000:b0/0000:b0:01.0/0000:b1:00.0/0000:b2:01.0/0000:b4:00.0");
  EXPECT_EQ(Resolve("class/infiniband/mlx5_10/device"),
            "devices/pci0000:b0/0000:b0:01.0/0000:b1:00.0/0000:b2:00.0/0000:b3:00.0");
  EXPECT_THAT(Read(Proc("net/route")), HasSubstr("enp17s0np0\t00000000\t0100090A\t0003"));
  EXPECT_THAT(Read(Proc("net/route")), ::testing::Not(HasSubstr("enp51s0np0")));
  EXPECT_THAT(Read(Proc("modules")), HasSubstr("nvidia_peermem "));
}

TEST_F(HostTest, BrokenTreeHasEveryDamage) {
  Write("broken");
  const std::string mlx = "class/infiniband/";
  EXPECT_FALSE(Exists(Sys(mlx + "mlx5_1/fw_ver")));  // a
  EXPECT_EQ(ReadSys(mlx + "mlx5_1/hca_type"), "MT4129\n");
  EXPECT_EQ(ReadSys(mlx + "mlx5_2/ports/1/rate"), "fast\n");  // b
  EXPECT_EQ(ReadSys(mlx + "mlx5_2/ports/1/state"), "banana\n");
  EXPECT_EQ(ReadSys(mlx + "mlx5_3/ports/1/gids/3"), "zzzz\n");   // c
  EXPECT_EQ(ReadSys(mlx + "mlx5_4/device/numa_node"), "abc\n");  // d
  EXPECT_EQ(ReadSys(mlx + "mlx5_4/device/current_link_width"), "");
  EXPECT_FALSE(Exists(Sys(mlx + "mlx5_5/ports/1/gid_attrs")));  // e
  EXPECT_TRUE(Exists(Sys(mlx + "mlx5_5/ports/1/gids/0")));
  EXPECT_EQ(ReadLink(Sys(mlx + "mlx5_9")),  // f
            "../../devices/pci0000:ff/0000:ff:00.0/infiniband/mlx5_9");
  EXPECT_FALSE(fs::exists(Sys(mlx + "mlx5_9")));
  EXPECT_EQ(ReadLink(Sys(mlx + "mlx5_6/device")), "../../../0000:ee:00.0");  // g
  EXPECT_FALSE(fs::exists(Sys(mlx + "mlx5_6/device")));
  EXPECT_EQ(ReadSys("bus/pci/devices/0000:1a:00.0/class"), "0xZZ\n");         // h
  EXPECT_EQ(ReadLink(Sys("class/net/eth7")), "../../../../../../../../etc");  // i
  EXPECT_TRUE(Exists(Sys(mlx + "mlx5_7/device/net/eth7/address")));
  const std::string route = Read(Proc("net/route"));  // j
  EXPECT_TRUE(route.ends_with("\ngarbage line\n")) << route;
  EXPECT_EQ(ReadLink(Sys("bus/pci/devices/0000:aa:00.0")), "0000:aa:00.0");  // k
  std::error_code ec;
  (void)fs::canonical(Sys("bus/pci/devices/0000:aa:00.0"), ec);
  EXPECT_TRUE(ec) << "a link loop must not resolve";
  EXPECT_EQ(ReadSys(mlx + "mlx5_8/ports/1/gid_attrs/types/3"), "RoCE v9\n");  // l
  // Untouched neighbours stay intact.
  EXPECT_EQ(ReadSys(mlx + "mlx5_8/ports/1/gid_attrs/types/2"), "IB/RoCE v1\n");
  EXPECT_EQ(ReadSys(mlx + "mlx5_1/ports/1/state"), "4: ACTIVE\n");
}

TEST_F(HostTest, BreakTreeNeedsARoceTree) {
  ASSERT_TRUE(WriteExampleHost("many-hcas", dir_).ok());
  EXPECT_FALSE(BreakTree(dir_).ok());
}

// ---------------------------------------------------------------------------------------------
// Variants and errors.

TEST_F(HostTest, VariantsFromAMutatedSpec) {
  HostSpec spec = *ExampleHost("roce-9port");
  RdmaDeviceSpec* mlx5_2 = spec.FindRdma("mlx5_2");
  ASSERT_NE(mlx5_2, nullptr);
  mlx5_2->ports[0].state = "1: DOWN";
  spec.FindNetdev("eth2")->operstate = "down";
  spec.FindNetdev("eth2")->speed_mbps.reset();
  // Move mlx5_1's IPv4 RoCE v2 GID from index 3 to 7.
  spec.FindRdma("mlx5_1")->ports[0].gids[3].index = 7;
  // Drop mlx5_4's NIC: its netdev and RDMA device go with it.
  ASSERT_TRUE(spec.RemovePci("0000:41:00.0"));
  EXPECT_EQ(spec.FindRdma("mlx5_4"), nullptr);
  EXPECT_EQ(spec.FindNetdev("eth4"), nullptr);
  ASSERT_TRUE(spec.RemoveModule("nvidia_peermem"));
  ASSERT_TRUE(WriteHost(spec, dir_).ok());

  EXPECT_EQ(ReadSys("class/infiniband/mlx5_2/ports/1/state"), "1: DOWN\n");
  EXPECT_EQ(ReadSys("class/net/eth2/carrier"), "0\n");
  EXPECT_FALSE(Exists(Sys("class/net/eth2/speed")));
  EXPECT_EQ(ReadSys("class/infiniband/mlx5_1/ports/1/gids/3"), kZeroGid);
  EXPECT_EQ(ReadSys("class/infiniband/mlx5_1/ports/1/gids/7"),
            "0000:0000:0000:0000:0000:ffff:190b:800b\n");
  EXPECT_EQ(ReadSys("class/infiniband/mlx5_1/ports/1/gid_attrs/types/7"), "RoCE v2\n");
  EXPECT_FALSE(Exists(Sys("class/infiniband/mlx5_4")));
  EXPECT_FALSE(Exists(Sys("class/net/eth4")));
  EXPECT_FALSE(Exists(Sys("bus/pci/devices/0000:41:00.0")));
  EXPECT_TRUE(Exists(Sys("bus/pci/devices/0000:40:00.0")));  // GPU 3 stays.
  EXPECT_FALSE(Exists(Sys("module/nvidia_peermem")));
  EXPECT_THAT(Read(Proc("modules")), HasSubstr("nvidia 56799232 0 - Live"));
  EXPECT_THAT(BadLinks(), IsEmpty());
}

TEST_F(HostTest, RemovingALowerNetdevTakesItsUppersAndGids) {
  HostSpec spec = *ExampleHost("roce-9port");
  ASSERT_TRUE(spec.RemoveNetdev("eth3"));
  EXPECT_EQ(spec.FindNetdev("macvlan0"), nullptr);
  EXPECT_THAT(spec.FindRdma("mlx5_3")->ports[0].gids, IsEmpty());
  for (const Ipv4RouteSpec& r : spec.ipv4_routes) EXPECT_NE(r.iface, "macvlan0");
  EXPECT_TRUE(WriteHost(spec, dir_).ok());
  EXPECT_FALSE(spec.RemoveNetdev("eth3"));
  EXPECT_FALSE(spec.RemovePci("0000:77:00.0"));
}

TEST_F(HostTest, SoftwareRdmaDevice) {
  HostSpec spec = *ExampleHost("many-hcas");
  NetdevSpec veth;
  veth.name = "veth0";
  veth.mac = "02:42:ac:11:00:02";
  spec.netdevs.push_back(veth);
  RdmaDeviceSpec rxe;
  rxe.name = "rxe0";
  rxe.parent = "veth0";
  rxe.node_guid = "0042:acff:fe11:0002";
  rxe.hca_type = "";
  rxe.uverbs = 12;
  RdmaPortSpec port;
  port.rate = "10 Gb/sec (1X QDR)";
  port.gids.push_back({0, LinkLocalGidFromMac(veth.mac), "RoCE v2", "veth0"});
  rxe.ports.push_back(port);
  spec.rdma.push_back(rxe);
  ASSERT_TRUE(WriteHost(spec, dir_).ok());

  EXPECT_EQ(ReadLink(Sys("class/infiniband/rxe0")), "../../devices/virtual/infiniband/rxe0");
  EXPECT_EQ(ReadSys("class/infiniband/rxe0/parent"), "veth0\n");
  EXPECT_FALSE(Exists(Sys("class/infiniband/rxe0/device")));
  EXPECT_EQ(ReadSys("class/infiniband/rxe0/ports/1/gid_attrs/ndevs/0"), "veth0\n");
  EXPECT_EQ(Resolve("class/infiniband_verbs/uverbs12"),
            "devices/virtual/infiniband_verbs/uverbs12");
  EXPECT_FALSE(Exists(Sys("class/infiniband_verbs/uverbs12/device")));
  EXPECT_EQ(ReadLink(Sys("class/net/veth0")), "../../devices/virtual/net/veth0");
  EXPECT_THAT(BadLinks(), IsEmpty());

  // Dropping the netdev drops the software device on it.
  EXPECT_TRUE(spec.RemoveNetdev("veth0"));
  EXPECT_EQ(spec.FindRdma("rxe0"), nullptr);
}

TEST_F(HostTest, RefusesANonEmptyDirectory) {
  fs::create_directories(dir_);
  std::ofstream(dir_ / "leftover") << "x";
  absl::Status st = WriteExampleHost("roce-9port", dir_);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("not empty"));
  EXPECT_FALSE(Exists(dir_ / "sys"));

  // A second write over a written host fails the same way.
  const fs::path again = tmp_ / "again";
  ASSERT_TRUE(WriteExampleHost("many-hcas", again).ok());
  EXPECT_EQ(WriteExampleHost("many-hcas", again).code(), absl::StatusCode::kFailedPrecondition);

  // A file where the directory should be.
  EXPECT_FALSE(WriteExampleHost("many-hcas", dir_ / "leftover").ok());

  // An existing empty directory is fine.
  const fs::path empty = tmp_ / "empty";
  fs::create_directories(empty);
  EXPECT_TRUE(WriteExampleHost("many-hcas", empty).ok());
}

TEST_F(HostTest, RejectsInconsistentSpecs) {
  const HostSpec base = *ExampleHost("roce-9port");
  struct Case {
    const char* what;
    std::function<void(HostSpec&)> change;
  };
  const Case cases[] = {
      {"unknown parent", [](HostSpec& s) { s.FindPci("0000:1b:00.0")->parent = "0000:77:00.0"; }},
      {"endpoint as parent",
       [](HostSpec& s) { s.FindPci("0000:1b:00.0")->parent = "0000:1a:00.0"; }},
      {"bad BDF", [](HostSpec& s) { s.FindPci("0000:1b:00.0")->bdf = "0000:1B:00.0"; }},
      {"wrong root bus", [](HostSpec& s) { s.FindPci("0000:15:01.0")->bdf = "0000:16:01.0"; }},
      {"netdev on unknown function",
       [](HostSpec& s) { s.FindNetdev("eth1")->pci = "0000:77:00.0"; }},
      {"GID outside the table",
       [](HostSpec& s) { s.FindRdma("mlx5_1")->ports[0].gids[0].index = 256; }},
      {"GID index twice", [](HostSpec& s) { s.FindRdma("mlx5_1")->ports[0].gids[1].index = 0; }},
      {"GID on unknown netdev",
       [](HostSpec& s) { s.FindRdma("mlx5_1")->ports[0].gids[0].ndev = "x"; }},
      {"duplicate RDMA name", [](HostSpec& s) { s.FindRdma("mlx5_2")->name = "mlx5_1"; }},
      {"duplicate uverbs", [](HostSpec& s) { s.FindRdma("mlx5_2")->uverbs = 1; }},
      {"duplicate ifindex", [](HostSpec& s) { s.FindNetdev("eth1")->ifindex = 1; }},
      {"route on unknown netdev", [](HostSpec& s) { s.ipv4_routes[0].iface = "nope"; }},
      {"route with host bits", [](HostSpec& s) { s.ipv4_routes[1].destination = "10.0.60.3"; }},
      {"unknown lower", [](HostSpec& s) { s.FindNetdev("macvlan0")->lower = "eth99"; }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    HostSpec spec = base;
    c.change(spec);
    const fs::path d = tmp_ / "invalid";
    absl::Status st = WriteHost(spec, d);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_FALSE(Exists(d)) << "nothing is written for an invalid spec";
    std::error_code ec;
    fs::remove_all(d, ec);
  }
}

TEST_F(HostTest, AfterWriteRunsAndItsErrorIsReturned) {
  HostSpec spec = *ExampleHost("many-hcas");
  fs::path seen;
  spec.after_write = [&](const fs::path& d) {
    seen = d;
    return absl::DataLossError("hook failed");
  };
  EXPECT_EQ(WriteHost(spec, dir_).code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(seen, dir_);
}

// ---------------------------------------------------------------------------------------------
// Large hosts.

TEST_F(HostTest, SmallLargeHost) {
  const HostSpec spec = LargeHost(4, 3, 16);
  EXPECT_THAT(spec.rdma, SizeIs(16));
  ASSERT_TRUE(WriteHost(spec, dir_).ok());
  EXPECT_THAT(List(Sys("class/infiniband")), SizeIs(16));
  EXPECT_THAT(List(Sys("class/infiniband/mlx5_0/ports/1/gids")), SizeIs(16));
  EXPECT_EQ(ReadSys("class/infiniband/mlx5_0/ports/1/gid_attrs/types/3"), "RoCE v2\n");
  // mlx5_4.. are the VFs of PF 0, siblings of it.
  EXPECT_EQ(ReadLink(Sys("class/infiniband/mlx5_4/device/physfn")), "../0000:13:00.0");
  EXPECT_EQ(ReadSys("bus/pci/devices/0000:13:00.0/sriov_numvfs"), "3\n");
  EXPECT_EQ(Resolve("bus/pci/devices/0000:13:00.0/virtfn2"),
            Resolve("class/infiniband/mlx5_6/device"));
  EXPECT_EQ(ReadSys("bus/pci/devices/0000:14:00.0/class"), "0x030200\n");  // GPU under PF 0.
  EXPECT_FALSE(Exists(Sys("bus/pci/devices/0000:1b:00.0")));               // None under PF 1.
  EXPECT_EQ(ReadSys("class/infiniband/mlx5_3/device/numa_node"), "1\n");
  EXPECT_THAT(BadLinks(), IsEmpty());

  // More than 32 PFs go to a second PCI domain; VFs past function 7 use ARI routing IDs.
  HostSpec wide = LargeHost(33, 9, 4);
  EXPECT_NE(wide.FindPci("0001:10:01.0"), nullptr);
  EXPECT_NE(wide.FindPci("0000:13:01.1"), nullptr);
  for (RdmaDeviceSpec& r : wide.rdma) {  // Fewer files: the layout is what is checked.
    r.ports[0].pkey_table_size = 1;
    r.ports[0].counters.clear();
    r.ports[0].hw_counters.clear();
  }
  dir_ = tmp_ / "wide";
  ASSERT_TRUE(WriteHost(wide, dir_).ok());
  EXPECT_EQ(Resolve("class/infiniband/mlx5_32/device"),
            "devices/pci0001:10/0001:10:01.0/0001:11:00.0/0001:12:00.0/0001:13:00.0");
  EXPECT_EQ(ReadLink(Sys("bus/pci/devices/0000:13:00.0/virtfn8")), "../0000:13:01.1");
  EXPECT_FALSE(Exists(Sys("class/infiniband/mlx5_32/ports/1/counters")));
}

// The benchmark's host. Only its spec is checked here: writing its ~150k files takes about 2 s on
// tmpfs but minutes on a slow disk; the write path is the one SmallLargeHost and the mid-size
// host below exercise.
TEST(LargeHostSpecTest, DefaultHas256RdmaDevicesWithDistinctNames) {
  const HostSpec spec = LargeHost(32, 7, 256);
  ASSERT_THAT(spec.rdma, SizeIs(256));
  std::set<std::string> bdfs;
  for (const PciFunctionSpec& f : spec.pci) bdfs.insert(f.bdf);
  EXPECT_EQ(bdfs.size(), spec.pci.size());
  std::set<std::string> netdevs;
  for (const NetdevSpec& n : spec.netdevs) netdevs.insert(n.name);
  EXPECT_EQ(netdevs.size(), spec.netdevs.size());
  std::set<int> uverbs;
  std::set<std::string> addresses;
  for (const RdmaDeviceSpec& r : spec.rdma) {
    ASSERT_TRUE(r.uverbs.has_value());
    uverbs.insert(*r.uverbs);
    ASSERT_THAT(r.ports, SizeIs(1));
    EXPECT_EQ(r.ports[0].gid_table_size, 256);
    ASSERT_THAT(r.ports[0].gids, SizeIs(4));
    addresses.insert(r.ports[0].gids[3].gid);
  }
  EXPECT_EQ(uverbs.size(), 256u);
  EXPECT_EQ(addresses.size(), 256u) << "every netdev has its own IPv4 address";
  EXPECT_EQ(spec.FindRdma("mlx5_32")->pci, "0000:13:00.1");  // The first VF of PF 0.
}

TEST_F(HostTest, MidSizeLargeHostWrites) {
  const auto start = std::chrono::steady_clock::now();
  const HostSpec spec = LargeHost(8, 3, 64);
  ASSERT_THAT(spec.rdma, SizeIs(32));
  ASSERT_TRUE(WriteHost(spec, dir_).ok());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  RecordProperty("write_seconds", std::to_string(seconds));
  EXPECT_THAT(List(Sys("class/infiniband")), SizeIs(32));
  EXPECT_THAT(List(Sys("class/infiniband/mlx5_31/ports/1/gids")), SizeIs(64));
  EXPECT_EQ(ReadSys("class/infiniband_verbs/uverbs31/ibdev"), "mlx5_31\n");
  EXPECT_EQ(ReadSys("class/infiniband/mlx5_7/device/numa_node"), "1\n");
}

// ---------------------------------------------------------------------------------------------
// Text helpers.

TEST(GidTextTest, Helpers) {
  EXPECT_EQ(Ipv4MappedGid("25.11.128.11"), "0000:0000:0000:0000:0000:ffff:190b:800b");
  EXPECT_EQ(Ipv4MappedGid("25.11.128"), "");
  EXPECT_EQ(LinkLocalGidFromMac("0c:42:a1:00:00:01"), "fe80:0000:0000:0000:0e42:a1ff:fe00:0001");
  EXPECT_EQ(LinkLocalGidFromMac("0c:42:a1:00:00"), "");
  EXPECT_EQ(LinkLocalGidFromGuid("a088:c203:0045:0a00"), "fe80:0000:0000:0000:a088:c203:0045:0a00");
  EXPECT_EQ(Mlx5GuidFromMac("0c:42:a1:67:8e:3c"), "0c42:a103:0067:8e3c");
  EXPECT_EQ(Eui64GuidFromMac("bc:97:e1:5e:00:01"), "be97:e1ff:fe5e:0001");
  EXPECT_EQ(Eui64GuidFromMac("zz:97:e1:5e:00:01"), "");
}

}  // namespace
}  // namespace fabric::testing
