// The example hosts. Bus numbers follow depth-first enumeration (every bridge's secondary bus is
// the next free number), names follow the kernel's and systemd's rules, IDs are the real ones.
//
// roce-9port (hostname roce-node-03, 6.1.0-18-amd64, NUMA 0-1, 32 CPUs per node)
//   pci0000:00 NUMA 0
//     0000:00:01.0 root port -> 0000:01:00.0 ConnectX-6 Dx mlx5_0 eth0 10.0.60.3/24 (default
//                               route via 10.0.60.1), 100 Gb/sec (4X EDR), uverbs0
//     0000:00:1c.0 root port -> 0000:02:00.0 ASPEED PCIe-to-PCI bridge -> 0000:03:00.0 ASPEED VGA
//   Per GPU root complex B (0x15, 0x37 on NUMA 0; 0x97, 0xb7 on NUMA 1):
//     B:01.0 root port -> B+1:00.0 switch upstream -> B+2:00.0 and B+2:01.0 downstream;
//     B+2:00.0 -> B+3:00.0 2nd switch up -> B+4:00.0 (GPU 2q, at B+5:00.0)
//                                         B+4:01.0 (NIC mlx5_{2q+1}, at B+6:00.0)
//     B+2:01.0 -> B+7:00.0 2nd switch up -> B+8:00.0 (GPU 2q+1, at B+9:00.0)
//                                         B+8:01.0 (NIC mlx5_{2q+2}, at B+10:00.0)
//   GPU  BDF           NIC     BDF           netdev IPv4            root complex NUMA
//   0    0000:1a:00.0  mlx5_1  0000:1b:00.0  eth1   25.11.128.11/24 pci0000:15   0
//   1    0000:1e:00.0  mlx5_2  0000:1f:00.0  eth2   25.11.128.12/24 pci0000:15   0
//   2    0000:3c:00.0  mlx5_3  0000:3d:00.0  eth3   25.11.128.13/24 pci0000:37   0
//   3    0000:40:00.0  mlx5_4  0000:41:00.0  eth4   25.11.128.14/24 pci0000:37   0
//   4    0000:9c:00.0  mlx5_5  0000:9d:00.0  eth5   25.11.128.15/24 pci0000:97   1
//   5    0000:a0:00.0  mlx5_6  0000:a1:00.0  eth6   25.11.128.16/24 pci0000:97   1
//   6    0000:bc:00.0  mlx5_7  0000:bd:00.0  eth7   25.11.128.17/24 pci0000:b7   1
//   7    0000:c0:00.0  mlx5_8  0000:c1:00.0  eth8   25.11.128.18/24 pci0000:b7   1
//   mlx5_i has uverbs<i>, MAC 0c:42:a1:01:00:0<i>. macvlan0 (virtual, lower eth3, MAC
//   0c:42:a1:01:10:03, 25.11.129.50/24) has GIDs 4 (RoCE v1) and 5 (RoCE v2) on mlx5_3.
//
// dgx-h100-ib (dgx-07, 5.15.0-105-generic, NUMA 0-1)
//   pci0000:00: 0000:00:1c.0 root port -> 0000:01:00.0 Intel I210 eno1 192.168.100.21/24,
//   default route via 192.168.100.1. Per GPU root complex R: R:01.0 root port -> R+1:00.0 switch
//   up -> R+2:00.0 down -> NIC at R+3:00.0, R+2:01.0 down -> GPU at R+4:00.0.
//   GPU  BDF           NIC      BDF           IPoIB netdev  LID  root complex NUMA
//   0    0000:19:00.0  mlx5_0   0000:18:00.0  ibp24s0       0x1  pci0000:15   0
//   1    0000:41:00.0  mlx5_3   0000:40:00.0  ibp64s0       0x2  pci0000:3d   0
//   2    0000:50:00.0  mlx5_4   0000:4f:00.0  ibp79s0       0x3  pci0000:4c   0
//   3    0000:5f:00.0  mlx5_5   0000:5e:00.0  ibp94s0       0x4  pci0000:5b   0
//   4    0000:9b:00.0  mlx5_6   0000:9a:00.0  ibp154s0      0x5  pci0000:97   1
//   5    0000:c1:00.0  mlx5_9   0000:c0:00.0  ibp192s0      0x6  pci0000:bd   1
//   6    0000:cf:00.0  mlx5_10  0000:ce:00.0  ibp206s0      0x7  pci0000:cb   1
//   7    0000:dd:00.0  mlx5_11  0000:dc:00.0  ibp220s0      0x8  pci0000:d9   1
//   Storage (RoCE, 200 Gb/sec (4X HDR)), each R:01.0 root port -> NIC at R+1:00.0:
//   mlx5_1 0000:26:00.0 enp38s0f0np0 10.50.1.21/24 pci0000:25 NUMA 0 (SR-IOV PF, 8 total, 4 on)
//   mlx5_2 0000:2e:00.0 enp46s0np0   10.50.2.21/24 pci0000:2d NUMA 0
//   mlx5_7 0000:a6:00.0 enp166s0np0  10.50.7.21/24 pci0000:a5 NUMA 1
//   mlx5_8 0000:ae:00.0 enp174s0np0  10.50.8.21/24 pci0000:ad NUMA 1
//   VFs of mlx5_1: 0000:26:00.1..0000:26:00.4 = mlx5_12..mlx5_15, enp38s0f0v0..v3 (no IPv4).
//   uverbs<N> for mlx5_<N>.
//   NVIDIA driver procfs: driver/nvidia/gpus/<GPU BDF>/information per GPU (Device Minor = GPU
//   number, UUIDs in kUuids: GPU 0 is GPU-c15521b1-b3dc-a50a-9daa-37e51b591d75).
//
// amd-mi300x-bnxt (mi300-12, 6.8.0-45-generic, NUMA 0-1)
//   pci0000:00: 0000:00:01.1 root port -> 0000:01:00.0 BCM5720 eno8303 172.16.5.12/24, default
//   route via 172.16.5.1. GPU/NIC pairs as on dgx-h100-ib (NIC R+3:00.0, GPU R+4:00.0):
//   GPU  BDF           NIC       BDF           netdev    IPv4           root complex NUMA
//   0    0000:09:00.0  bnxt_re0  0000:08:00.0  ens21np0  10.224.0.5/24  pci0000:05   0
//   1    0000:19:00.0  bnxt_re1  0000:18:00.0  ens22np0  10.224.1.5/24  pci0000:15   0
//   2    0000:69:00.0  bnxt_re2  0000:68:00.0  ens23np0  10.224.2.5/24  pci0000:65   0
//   3    0000:79:00.0  bnxt_re3  0000:78:00.0  ens24np0  10.224.3.5/24  pci0000:75   0
//   4    0000:89:00.0  bnxt_re4  0000:88:00.0  ens25np0  10.224.4.5/24  pci0000:85   1
//   5    0000:99:00.0  bnxt_re5  0000:98:00.0  ens26np0  10.224.5.5/24  pci0000:95   1
//   6    0000:e9:00.0  bnxt_re6  0000:e8:00.0  ens27np0  10.224.6.5/24  pci0000:e5   1
//   7    0000:f9:00.0  bnxt_re7  0000:f8:00.0  ens28np0  10.224.7.5/24  pci0000:f5   1
//   Tenstorrent 0000:c6:00.0 behind root port 0000:c5:01.0, pci0000:c5, NUMA 1, no NIC.
//   Each MI300X has amdgpu's unique_id (kUniqueIds; GPU 0: 5c54e05b42a9ba21, which ROCm names
//   GPU-5c54e05b42a9ba21).
//   bnxt_re0..3: GIDs 0..3 as roce-9port; bnxt_re4..7: 0 = link-local RoCE v2, 1 = IPv4 RoCE v2.
//
// many-hcas (wide-01, 6.1.0-18-amd64, NUMA 0 only)
//   mlx5_i on root complex R = 0x10 * (i + 1). Alone: R:01.0 root port -> NIC at R+1:00.0.
//   Paired with a GPU: R:01.0 -> R+1:00.0 switch up -> R+2:00.0 down -> NIC at R+3:00.0,
//   R+2:01.0 down -> GPU at R+4:00.0.
//   NIC      BDF           netdev        IPv4             GPU (BDF)
//   mlx5_0   0000:11:00.0  enp17s0np0    10.9.0.4/24      front end, default via 10.9.0.1
//   mlx5_1   0000:23:00.0  enp35s0np0    25.12.0.2/24     GPU0 0000:24:00.0
//   mlx5_2   0000:33:00.0  enp51s0np0    25.12.0.3/24     GPU3 0000:34:00.0  port DOWN/Disabled,
//                                                         netdev down, no speed, no route
//   mlx5_3   0000:41:00.0  enp65s0np0    25.12.0.4/24
//   mlx5_4   0000:51:00.0  enp81s0np0    25.12.0.5/24
//   mlx5_5   0000:61:00.0  enp97s0np0    25.12.0.6/24
//   mlx5_6   0000:71:00.0  enp113s0np0   25.12.0.7/24
//   mlx5_7   0000:81:00.0  enp129s0np0   25.12.0.8/24
//   mlx5_8   0000:91:00.0  enp145s0np0   25.12.0.9/24
//   mlx5_9   0000:a1:00.0  enp161s0np0   25.12.0.10/24
//   mlx5_10  0000:b3:00.0  enp179s0np0   25.12.0.11/24    GPU1 0000:b4:00.0
//   mlx5_11  0000:c3:00.0  enp195s0np0   25.12.0.12/24    GPU2 0000:c4:00.0
//
// ipv6-roce and ib-prefix-gids (GID layouts beyond IPv4-mapped RoCE): hosts_gid_layouts.cc.
// sriov-512vf (8 PFs x 64 VFs, some VFs in pods): hosts_sriov.cc.
//
// Every host has a virtual `lo` (ifindex 1) and IPv6 routes: ::1 on lo, fe80::/64 on each
// netdev with an IPv4 address, a default via fe80::1 on the front-end netdev.
#include "tests/hosts/hosts.h"

#include <algorithm>
#include <fstream>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "agent/common/status.h"
#include "agent/common/strings.h"
#include "tests/hosts/hosts_internal.h"

namespace fabric::testing {
// The helpers are shared with the example hosts in other files (hosts_internal.h).
namespace hosts_internal {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------------
// The device catalog (PciIds: hosts_internal.h).

constexpr PciIds kIntelRootPort = {0x8086, 0x352a, 0x060400, 0x8086, 0x0000, "pcieport"};
constexpr PciIds kIntelPchRootPort = {0x8086, 0x1bbc,     0x060400,        0x8086,
                                      0x0000, "pcieport", "8.0 GT/s PCIe", 1};
constexpr PciIds kAmdRootPort = {0x1022, 0x14ab, 0x060400, 0x1022, 0x1453, "pcieport"};
constexpr PciIds kSwitchPort = {0x1000, 0xc030, 0x060400, 0x1000, 0x0000, "pcieport"};
constexpr PciIds kAspeedBridge = {0x1a03, 0x1150, 0x060400, 0x1a03, 0x1150, "", "5.0 GT/s PCIe", 1};
constexpr PciIds kAspeedVga = {0x1a03, 0x2000, 0x030000, 0x1a03, 0x2000, "ast"};
constexpr PciIds kConnectX6Dx = {0x15b3, 0x101d,      0x020000,         0x15b3,
                                 0x0016, "mlx5_core", "16.0 GT/s PCIe", 16};
constexpr PciIds kConnectX7 = {0x15b3, 0x1021, 0x020000, 0x15b3, 0x0041, "mlx5_core"};
constexpr PciIds kConnectX7Vf = {0x15b3, 0x101e, 0x020000, 0x15b3, 0x0041, "mlx5_core"};
constexpr PciIds kH100Sxm = {0x10de, 0x2330, 0x030200, 0x10de, 0x16c1, "nvidia"};
constexpr PciIds kH100Pcie = {0x10de, 0x2331, 0x030200, 0x10de, 0x1626, "nvidia"};
constexpr PciIds kMi300x = {0x1002, 0x74a1, 0x120000, 0x1002, 0x74a1, "amdgpu"};
constexpr PciIds kThor2 = {0x14e4, 0x1760, 0x020000, 0x14e4, 0xa760, "bnxt_en"};
constexpr PciIds kTenstorrent = {0x1e52, 0xb140,        0x120000,         0x1e52,
                                 0x0008, "tenstorrent", "16.0 GT/s PCIe", 16};
constexpr PciIds kIntelI210 = {0x8086, 0x1533, 0x020000, 0x15d9, 0x1533, "igb", "2.5 GT/s PCIe", 1};
constexpr PciIds kBcm5720 = {0x14e4, 0x165f, 0x020000, 0x1028, 0x08ff, "tg3", "5.0 GT/s PCIe", 1};

constexpr char kProprietaryNvidiaVersion[] =
    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.161.07  Sat Feb 17 22:55:48 UTC 2024\n"
    "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14) \n";
constexpr char kOpenNvidiaVersion[] =
    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build  "
    "(dvs-builder@U16-I3-B03-4-3)  Tue Mar  5 22:15:33 UTC 2024\n"
    "GCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)\n";

std::string Bdf(int domain, int bus, int dev, int fn) {
  return absl::StrFormat("%04x:%02x:%02x.%x", domain, bus, dev, fn);
}
std::string RcName(int domain, int bus) { return absl::StrFormat("pci%04x:%02x", domain, bus); }

PciFunctionSpec Function(std::string bdf, std::string parent, PciRole role, const PciIds& ids) {
  PciFunctionSpec f;
  f.bdf = std::move(bdf);
  f.parent = std::move(parent);
  f.role = role;
  f.vendor = ids.vendor;
  f.device = ids.device;
  f.class_code = ids.class_code;
  f.subsystem_vendor = ids.subsystem_vendor;
  f.subsystem_device = ids.subsystem_device;
  f.driver = ids.driver;
  f.current_link = {ids.speed, ids.width};
  f.max_link = {ids.speed, ids.width};
  return f;
}

// Adds a function and returns its BDF.
std::string Add(HostSpec& s, std::string bdf, std::string parent, PciRole role, const PciIds& ids) {
  s.pci.push_back(Function(bdf, std::move(parent), role, ids));
  return bdf;
}

void AddRootComplex(HostSpec& s, int domain, int bus, int numa) {
  s.root_complexes.push_back({RcName(domain, bus), numa});
}

// A root complex at `rc_bus` with root port rc:01.0; its endpoint goes on bus rc+1.
std::string AddRootPort(HostSpec& s, int domain, int rc_bus, int numa, const PciIds& port) {
  AddRootComplex(s, domain, rc_bus, numa);
  return Add(s, Bdf(domain, rc_bus, 1, 0), RcName(domain, rc_bus), PciRole::kRootPort, port);
}

// A root complex at `rc_bus`, root port rc:01.0, switch upstream port (rc+1):00.0 and downstream
// ports (rc+2):00.0 (endpoint on bus rc+3) and (rc+2):01.0 (endpoint on bus rc+4).
std::pair<std::string, std::string> AddSwitch(HostSpec& s, int domain, int rc_bus, int numa,
                                              const PciIds& port) {
  const std::string rp = AddRootPort(s, domain, rc_bus, numa, port);
  const std::string up =
      Add(s, Bdf(domain, rc_bus + 1, 0, 0), rp, PciRole::kSwitchUpstream, kSwitchPort);
  return {Add(s, Bdf(domain, rc_bus + 2, 0, 0), up, PciRole::kSwitchDownstream, kSwitchPort),
          Add(s, Bdf(domain, rc_bus + 2, 1, 0), up, PciRole::kSwitchDownstream, kSwitchPort)};
}

std::string Mac(int a, int b, int c, int d, int e, int f) {
  return absl::StrFormat("%02x:%02x:%02x:%02x:%02x:%02x", a, b, c, d, e, f);
}

void AddLoopback(HostSpec& s) {
  NetdevSpec lo;
  lo.name = "lo";
  lo.mac = "00:00:00:00:00:00";
  lo.mtu = 65536;
  lo.operstate = "unknown";
  lo.type = 772;
  s.netdevs.push_back(lo);
  s.ipv6_routes.push_back({"lo", "::1", 128, "::", 0, 0x80200001});
}

NetdevSpec Ethernet(std::string name, std::string pci, std::string mac, int mtu,
                    std::optional<int64_t> speed) {
  NetdevSpec n;
  n.name = std::move(name);
  n.pci = std::move(pci);
  n.mac = std::move(mac);
  n.mtu = mtu;
  n.speed_mbps = speed;
  return n;
}

// A connected IPv4 route for `address`/`prefix_len`, and the netdev's IPv6 link-local route.
void AddConnected(HostSpec& s, const std::string& iface, uint32_t address, int prefix_len) {
  const uint32_t mask = prefix_len == 0 ? 0 : ~uint32_t{0} << (32 - prefix_len);
  const uint32_t net = address & mask;
  s.ipv4_routes.push_back(
      {iface,
       absl::StrFormat("%d.%d.%d.%d", net >> 24, (net >> 16) & 0xff, (net >> 8) & 0xff, net & 0xff),
       prefix_len, "0.0.0.0", 0, std::nullopt});
  s.ipv6_routes.push_back({iface, "fe80::", 64, "::", 256, std::nullopt});
}

void AddDefault(HostSpec& s, const std::string& iface, const std::string& gateway) {
  s.ipv4_routes.insert(s.ipv4_routes.begin(), {iface, "0.0.0.0", 0, gateway, 0, std::nullopt});
  s.ipv6_routes.push_back({iface, "::", 0, "fe80::1", 1024, std::nullopt});
}

uint32_t Ip(int a, int b, int c, int d) {
  return (static_cast<uint32_t>(a) << 24) | (static_cast<uint32_t>(b) << 16) |
         (static_cast<uint32_t>(c) << 8) | static_cast<uint32_t>(d);
}
std::string IpText(uint32_t ip) {
  return absl::StrFormat("%d.%d.%d.%d", ip >> 24, (ip >> 16) & 0xff, (ip >> 8) & 0xff, ip & 0xff);
}

// RoCE GIDs as the kernel fills them for a netdev: link-local (v1, v2), then per IPv4 address
// the mapped GID (v1, v2). Entries from `first` on, the first `limit` only.
std::vector<GidSpec> RoceGids(const std::string& mac, const std::string& ipv4,
                              const std::string& ndev, int first, int limit) {
  std::vector<GidSpec> gids;
  const std::string ll = LinkLocalGidFromMac(mac);
  gids.push_back({first, ll, "IB/RoCE v1", ndev});
  gids.push_back({first + 1, ll, "RoCE v2", ndev});
  if (!ipv4.empty()) {
    gids.push_back({first + 2, Ipv4MappedGid(ipv4), "IB/RoCE v1", ndev});
    gids.push_back({first + 3, Ipv4MappedGid(ipv4), "RoCE v2", ndev});
  }
  if (static_cast<int>(gids.size()) > limit) gids.resize(static_cast<size_t>(std::max(0, limit)));
  return gids;
}

RdmaPortSpec RocePort(std::string rate, std::vector<GidSpec> gids, CounterList hw_counters,
                      uint64_t seed, int gid_table_size) {
  RdmaPortSpec p;
  p.rate = std::move(rate);
  p.link_layer = "Ethernet";
  p.gid_table_size = gid_table_size;
  p.gids = std::move(gids);
  p.counters = IbPortCounters(seed);
  p.hw_counters = std::move(hw_counters);
  return p;
}

RdmaDeviceSpec Mlx5(std::string name, std::string pci, std::string guid, const char* hca_type,
                    const char* fw_ver, const char* board_id, const std::string& hostname,
                    int uverbs) {
  RdmaDeviceSpec r;
  r.name = std::move(name);
  r.pci = std::move(pci);
  r.node_guid = std::move(guid);
  r.hca_type = hca_type;
  r.fw_ver = fw_ver;
  r.board_id = board_id;
  r.node_desc = absl::StrCat(hostname, " ", r.name);
  r.uverbs = uverbs;
  return r;
}

ModuleSpec Module(std::string name, int64_t size, std::vector<std::string> used_by,
                  std::string taint, std::string version) {
  ModuleSpec m;
  m.name = std::move(name);
  m.size = size;
  m.refcount = static_cast<int>(used_by.size());
  m.used_by = std::move(used_by);
  m.taint = std::move(taint);
  m.version = std::move(version);
  return m;
}

uint64_t Seed(std::string_view name) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a: stable, distinct counter values per device.
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h % 100000;
}

void AddRoceNic(HostSpec& s, const RoceNic& nic) {
  s.pci.push_back(Function(nic.bdf, nic.parent, PciRole::kEndpoint, nic.ids));
  s.netdevs.push_back(Ethernet(nic.netdev, nic.bdf, nic.mac, nic.mtu, nic.speed_mbps));
  const std::string ip = nic.ipv4 == 0 ? "" : IpText(nic.ipv4);
  RdmaDeviceSpec r = Mlx5(nic.rdma, nic.bdf, Mlx5GuidFromMac(nic.mac), nic.hca_type, nic.fw_ver,
                          nic.board_id, s.hostname, nic.uverbs);
  r.ports.push_back(RocePort(nic.rate, RoceGids(nic.mac, ip, nic.netdev),
                             Mlx5HwCounters(Seed(nic.rdma)), Seed(nic.rdma)));
  s.rdma.push_back(std::move(r));
  if (nic.ipv4 != 0) AddConnected(s, nic.netdev, nic.ipv4, nic.prefix_len);
}

void AddGpu(HostSpec& s, std::string bdf, std::string parent, const PciIds& ids) {
  Add(s, std::move(bdf), std::move(parent), PciRole::kEndpoint, ids);
}

// proc/driver/nvidia/gpus/<bdf>/information as the driver prints it (nv-procfs.c).
std::string NvidiaGpuInformation(std::string_view model, std::string_view uuid,
                                 std::string_view bdf, int minor, int irq) {
  return absl::StrFormat(
      "Model: \t\t %s\nIRQ:   \t\t %d\nGPU UUID: \t %s\nVideo BIOS: \t 96.00.99.00.01\n"
      "Bus Type: \t PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\n"
      "Bus Location: \t %s\nDevice Minor: \t %d\nGPU Firmware: \t 535.161.07\n"
      "GPU Excluded:\t No\n",
      model, irq, uuid, bdf, minor);
}

std::vector<ModuleSpec> MlxNvidiaModules(bool peermem, bool open_nvidia) {
  std::vector<ModuleSpec> m;
  m.push_back(Module("mlx5_ib", 491520, {}));
  m.push_back(Module("ib_uverbs", 184320, {"mlx5_ib"}));
  m.push_back(Module("mlx5_core", 2412544, {"mlx5_ib"}));
  std::vector<std::string> ib_core_users = {"ib_uverbs", "mlx5_ib"};
  if (peermem) {
    m.push_back(Module("nvidia_peermem", 16384, {}, "OE"));
    ib_core_users.push_back("nvidia_peermem");
  }
  m.push_back(Module("ib_core", 462848, ib_core_users));
  m.push_back(
      Module("nvidia", 56799232,
             peermem ? std::vector<std::string>{"nvidia_peermem"} : std::vector<std::string>{},
             open_nvidia ? "OE" : "POE", open_nvidia ? "550.54.15" : "535.161.07"));
  return m;
}

// The front-end NIC of the RoCE hosts: a ConnectX-6 Dx (mlx5_0, eth0) at 0000:01:00.0 below
// `parent`, carrying the default route via `gateway`.
void AddFrontEndNic(HostSpec& s, const std::string& parent, std::string mac, uint32_t ipv4,
                    const std::string& gateway) {
  RoceNic fe;
  fe.bdf = Bdf(0, 0x01, 0, 0);
  fe.parent = parent;
  fe.ids = kConnectX6Dx;
  fe.rdma = "mlx5_0";
  fe.netdev = "eth0";
  fe.mac = std::move(mac);
  fe.ipv4 = ipv4;
  fe.mtu = 1500;
  fe.speed_mbps = 100000;
  fe.rate = "100 Gb/sec (4X EDR)";
  fe.hca_type = "MT4125";
  fe.fw_ver = "22.39.1002";
  fe.board_id = "MT_0000000359";
  AddRoceNic(s, fe);
  AddDefault(s, "eth0", gateway);
}

// ---------------------------------------------------------------------------------------------
// roce-9port.

constexpr int kRoceGpuRootBuses[] = {0x15, 0x37, 0x97, 0xb7};

HostSpec Roce9Port() {
  HostSpec s;
  s.hostname = "roce-node-03";
  s.osrelease = "6.1.0-18-amd64";
  s.numa_nodes = {0, 1};
  s.nvidia_version = kProprietaryNvidiaVersion;
  AddLoopback(s);

  AddRootComplex(s, 0, 0x00, 0);
  const std::string rp0 = Add(s, Bdf(0, 0, 1, 0), RcName(0, 0), PciRole::kRootPort, kIntelRootPort);
  s.pci.back().current_link = {"16.0 GT/s PCIe", 16};  // Trained to the Gen4 NIC below.
  AddFrontEndNic(s, rp0, Mac(0x0c, 0x42, 0xa1, 0x01, 0x00, 0x00), Ip(10, 0, 60, 3), "10.0.60.1");

  // The BMC's display: a PCIe-to-PCI bridge with a conventional PCI VGA function below.
  const std::string rp1 =
      Add(s, Bdf(0, 0, 0x1c, 0), RcName(0, 0), PciRole::kRootPort, kIntelPchRootPort);
  s.pci.back().current_link = {"5.0 GT/s PCIe", 1};
  const std::string aspeed = Add(s, Bdf(0, 0x02, 0, 0), rp1, PciRole::kPciBridge, kAspeedBridge);
  Add(s, Bdf(0, 0x03, 0, 0), aspeed, PciRole::kEndpoint, kAspeedVga);
  s.pci.back().pcie = false;

  for (int q = 0; q < 4; ++q) {
    const int b = kRoceGpuRootBuses[q];
    const auto [ds0, ds1] = AddSwitch(s, 0, b, q < 2 ? 0 : 1, kIntelRootPort);
    for (int h = 0; h < 2; ++h) {
      const int base = b + 3 + 4 * h;
      const std::string up =
          Add(s, Bdf(0, base, 0, 0), h == 0 ? ds0 : ds1, PciRole::kSwitchUpstream, kSwitchPort);
      const std::string gpu_port =
          Add(s, Bdf(0, base + 1, 0, 0), up, PciRole::kSwitchDownstream, kSwitchPort);
      const std::string nic_port =
          Add(s, Bdf(0, base + 1, 1, 0), up, PciRole::kSwitchDownstream, kSwitchPort);
      AddGpu(s, Bdf(0, base + 2, 0, 0), gpu_port, kH100Sxm);
      const int i = 2 * q + h + 1;
      RoceNic nic;
      nic.bdf = Bdf(0, base + 3, 0, 0);
      nic.parent = nic_port;
      nic.rdma = absl::StrCat("mlx5_", i);
      nic.netdev = absl::StrCat("eth", i);
      nic.mac = Mac(0x0c, 0x42, 0xa1, 0x01, 0x00, i);
      nic.ipv4 = Ip(25, 11, 128, 10 + i);
      nic.uverbs = i;
      AddRoceNic(s, nic);
    }
  }

  // A macvlan on eth3 (as a container's interface): its addresses become GIDs of mlx5_3.
  NetdevSpec mv = Ethernet("macvlan0", "", Mac(0x0c, 0x42, 0xa1, 0x01, 0x10, 0x03), 4200, 400000);
  mv.lower = "eth3";
  mv.devtype = "macvlan";
  s.netdevs.push_back(mv);
  RdmaDeviceSpec* mlx5_3 = s.FindRdma("mlx5_3");
  const std::string mv_gid = Ipv4MappedGid("25.11.129.50");
  mlx5_3->ports[0].gids.push_back({4, mv_gid, "IB/RoCE v1", "macvlan0"});
  mlx5_3->ports[0].gids.push_back({5, mv_gid, "RoCE v2", "macvlan0"});
  AddConnected(s, "macvlan0", Ip(25, 11, 129, 50), 24);

  s.modules = MlxNvidiaModules(/*peermem=*/true, /*open_nvidia=*/false);
  return s;
}

// ---------------------------------------------------------------------------------------------
// dgx-h100-ib.

HostSpec DgxH100Ib() {
  HostSpec s;
  s.hostname = "dgx-07";
  s.osrelease = "5.15.0-105-generic";
  s.numa_nodes = {0, 1};
  s.cpus_per_node = 56;
  s.nvidia_version = kOpenNvidiaVersion;
  AddLoopback(s);

  AddRootComplex(s, 0, 0x00, 0);
  const std::string rp =
      Add(s, Bdf(0, 0, 0x1c, 0), RcName(0, 0), PciRole::kRootPort, kIntelPchRootPort);
  s.pci.back().current_link = {"2.5 GT/s PCIe", 1};
  Add(s, Bdf(0, 0x01, 0, 0), rp, PciRole::kEndpoint, kIntelI210);
  s.netdevs.push_back(
      Ethernet("eno1", Bdf(0, 0x01, 0, 0), Mac(0x3c, 0xec, 0xef, 0x02, 0x00, 0x01), 1500, 1000));
  AddConnected(s, "eno1", Ip(192, 168, 100, 21), 24);
  AddDefault(s, "eno1", "192.168.100.1");

  // Compute fabric: one InfiniBand NIC per GPU under the same switch.
  constexpr int kRoots[] = {0x15, 0x3d, 0x4c, 0x5b, 0x97, 0xbd, 0xcb, 0xd9};
  constexpr int kNames[] = {0, 3, 4, 5, 6, 9, 10, 11};
  // GPU UUIDs as the NVIDIA driver reports them (procfs information), in PCI order.
  constexpr const char* kUuids[] = {
      "GPU-c15521b1-b3dc-a50a-9daa-37e51b591d75", "GPU-3f372617-f0ba-ef3a-86f0-ce2ea6ec39c1",
      "GPU-4a800646-417a-8105-bc31-99944567ceb1", "GPU-732242fd-a890-2e32-1297-9bfcbbeb508f",
      "GPU-df7142dc-af29-e6f8-7774-4cca4d909eb2", "GPU-e8af30f7-c70b-53bf-64d0-b50f658c6762",
      "GPU-deeda8b2-3927-f7d6-4375-d0341e4f6f2a", "GPU-cecf4f4e-5ba8-0780-50ce-f798e6c648e7",
  };
  for (int g = 0; g < 8; ++g) {
    const int r = kRoots[g];
    const auto [nic_port, gpu_port] = AddSwitch(s, 0, r, g < 4 ? 0 : 1, kIntelRootPort);
    const std::string bdf = Add(s, Bdf(0, r + 3, 0, 0), nic_port, PciRole::kEndpoint, kConnectX7);
    s.pci.back().subsystem_device = 0x0040;
    AddGpu(s, Bdf(0, r + 4, 0, 0), gpu_port, kH100Sxm);
    s.nvidia_gpu_information.emplace_back(Bdf(0, r + 4, 0, 0),
                                          NvidiaGpuInformation("NVIDIA H100 80GB HBM3", kUuids[g],
                                                               Bdf(0, r + 4, 0, 0), g, 0x1a0 + g));

    const int n = kNames[g];
    const std::string name = absl::StrCat("mlx5_", n);
    const std::string guid = absl::StrFormat("a088:c203:00b2:%02x00", 0x10 + n);
    RdmaDeviceSpec dev =
        Mlx5(name, bdf, guid, "MT4129", "28.39.1002", "MT_0000000838", s.hostname, n);
    RdmaPortSpec p;
    p.rate = "400 Gb/sec (4X NDR)";
    p.link_layer = "InfiniBand";
    p.lid = static_cast<uint32_t>(g + 1);
    p.sm_lid = 1;
    p.cap_mask = "0xa651e848";
    p.gid_table_size = 128;
    p.gids.push_back({0, LinkLocalGidFromGuid(guid), "IB/RoCE v1", ""});
    p.counters = IbPortCounters(Seed(name));
    p.hw_counters = Mlx5HwCounters(Seed(name));
    dev.ports.push_back(std::move(p));
    s.rdma.push_back(std::move(dev));

    // IPoIB: the hardware address is the QPN followed by the port GID.
    NetdevSpec ib = Ethernet(absl::StrCat("ibp", r + 3, "s0"), bdf, "", 2044, 400000);
    std::string addr = absl::StrFormat("00:00:10:%02x:fe:80:00:00:00:00:00:00", 0x40 + g);
    const std::string hex =
        absl::StrCat(guid.substr(0, 4), guid.substr(5, 4), guid.substr(10, 4), guid.substr(15, 4));
    for (size_t i = 0; i < hex.size(); i += 2) absl::StrAppend(&addr, ":", hex.substr(i, 2));
    ib.mac = addr;
    ib.type = 32;
    s.netdevs.push_back(ib);
  }

  // Storage fabric: RoCE NICs on their own root complexes; mlx5_1 has four VFs enabled.
  constexpr int kStorageRoots[] = {0x25, 0x2d, 0xa5, 0xad};
  constexpr int kStorageNames[] = {1, 2, 7, 8};
  for (int k = 0; k < 4; ++k) {
    const int r = kStorageRoots[k];
    const int n = kStorageNames[k];
    RoceNic nic;
    nic.bdf = Bdf(0, r + 1, 0, 0);
    nic.parent = AddRootPort(s, 0, r, k < 2 ? 0 : 1, kIntelRootPort);
    nic.rdma = absl::StrCat("mlx5_", n);
    nic.netdev =
        n == 1 ? absl::StrCat("enp", r + 1, "s0f0np0") : absl::StrCat("enp", r + 1, "s0np0");
    nic.mac = Mac(0x0c, 0x42, 0xa1, 0x02, 0x00, n);
    nic.ipv4 = Ip(10, 50, n, 21);
    nic.mtu = 9000;
    nic.speed_mbps = 200000;
    nic.rate = "200 Gb/sec (4X HDR)";
    nic.uverbs = n;
    AddRoceNic(s, nic);
  }
  PciFunctionSpec* pf = s.FindPci("0000:26:00.0");
  pf->sriov = SriovSpec{8, {}, 1, 1, kConnectX7Vf.device};
  const PciLinkSpec pf_link = pf->max_link;
  for (int v = 0; v < 4; ++v) {
    const std::string vf = Bdf(0, 0x26, 0, 1 + v);
    s.FindPci("0000:26:00.0")->sriov->vfs.push_back(vf);
    PciFunctionSpec f = Function(vf, "0000:25:01.0", PciRole::kEndpoint, kConnectX7Vf);
    // A VF's Link Status register reads zero: the kernel prints "Unknown" and width 0.
    f.current_link = {"Unknown", 0};
    f.max_link = pf_link;
    s.pci.push_back(f);
    const std::string name = absl::StrCat("mlx5_", 12 + v);
    const std::string netdev = absl::StrCat("enp38s0f0v", v);
    const std::string mac = Mac(0x0c, 0x42, 0xa1, 0x02, 0x10, v);
    s.netdevs.push_back(Ethernet(netdev, vf, mac, 1500, 200000));
    RdmaDeviceSpec dev = Mlx5(name, vf, Mlx5GuidFromMac(mac), "MT4126", "28.39.1002",
                              "MT_0000000838", s.hostname, 12 + v);
    dev.ports.push_back(RocePort("200 Gb/sec (4X HDR)", RoceGids(mac, "", netdev),
                                 Mlx5HwCounters(Seed(name)), Seed(name)));
    s.rdma.push_back(std::move(dev));
  }

  s.modules = MlxNvidiaModules(/*peermem=*/false, /*open_nvidia=*/true);
  return s;
}

// ---------------------------------------------------------------------------------------------
// amd-mi300x-bnxt.

HostSpec AmdMi300xBnxt() {
  HostSpec s;
  s.hostname = "mi300-12";
  s.osrelease = "6.8.0-45-generic";
  s.numa_nodes = {0, 1};
  s.cpus_per_node = 96;
  AddLoopback(s);

  AddRootComplex(s, 0, 0x00, 0);
  const std::string rp = Add(s, Bdf(0, 0, 1, 1), RcName(0, 0), PciRole::kRootPort, kAmdRootPort);
  s.pci.back().current_link = {"5.0 GT/s PCIe", 1};
  Add(s, Bdf(0, 0x01, 0, 0), rp, PciRole::kEndpoint, kBcm5720);
  s.netdevs.push_back(
      Ethernet("eno8303", Bdf(0, 0x01, 0, 0), Mac(0xb0, 0x7b, 0x25, 0x03, 0x00, 0x01), 1500, 1000));
  AddConnected(s, "eno8303", Ip(172, 16, 5, 12), 24);
  AddDefault(s, "eno8303", "172.16.5.1");

  constexpr int kRoots[] = {0x05, 0x15, 0x65, 0x75, 0x85, 0x95, 0xe5, 0xf5};
  // amdgpu's unique_id of each GPU, in PCI order (ROCm names the GPU GPU-<unique_id>).
  constexpr const char* kUniqueIds[] = {
      "5c54e05b42a9ba21", "a1fa7d4acde560db", "842a2f9da1b4ba07", "293a9acc2652f8ff",
      "aa59c1698d242349", "467c0714a9fbd797", "02b7075d2a3a0c78", "11e760a5a6d5b30a",
  };
  for (int g = 0; g < 8; ++g) {
    const int r = kRoots[g];
    const auto [nic_port, gpu_port] = AddSwitch(s, 0, r, g < 4 ? 0 : 1, kAmdRootPort);
    const std::string bdf = Add(s, Bdf(0, r + 3, 0, 0), nic_port, PciRole::kEndpoint, kThor2);
    AddGpu(s, Bdf(0, r + 4, 0, 0), gpu_port, kMi300x);
    s.pci.back().attributes.emplace_back("unique_id", kUniqueIds[g]);

    const std::string name = absl::StrCat("bnxt_re", g);
    const std::string netdev = absl::StrCat("ens", 21 + g, "np0");
    const std::string mac = Mac(0xbc, 0x97, 0xe1, 0x03, 0x00, g);
    const uint32_t ip = Ip(10, 224, g, 5);
    s.netdevs.push_back(Ethernet(netdev, bdf, mac, 4200, 400000));
    AddConnected(s, netdev, ip, 24);
    RdmaDeviceSpec dev;
    dev.name = name;
    dev.pci = bdf;
    dev.node_guid = Eui64GuidFromMac(mac);
    dev.fw_ver = "230.0.133.0";
    dev.hca_type = "0x1760";
    dev.board_id = "BCM957608A4160C";
    dev.node_desc = absl::StrCat(s.hostname, " ", name);
    dev.uverbs = g;
    std::vector<GidSpec> gids;
    if (g < 4) {
      gids = RoceGids(mac, IpText(ip), netdev);
    } else {
      // Only RoCE v2 entries: the IPv4 RoCE v2 GID sits at index 1, not 3.
      gids.push_back({0, LinkLocalGidFromMac(mac), "RoCE v2", netdev});
      gids.push_back({1, Ipv4MappedGid(IpText(ip)), "RoCE v2", netdev});
    }
    dev.ports.push_back(
        RocePort("400 Gb/sec (4X NDR)", gids, BnxtReHwCounters(Seed(name)), Seed(name)));
    s.rdma.push_back(std::move(dev));
  }

  // An accelerator of another vendor, with no NIC near it.
  const std::string tt_port = AddRootPort(s, 0, 0xc5, 1, kAmdRootPort);
  s.pci.back().current_link = {"16.0 GT/s PCIe", 16};
  Add(s, Bdf(0, 0xc6, 0, 0), tt_port, PciRole::kEndpoint, kTenstorrent);

  s.modules.push_back(Module("bnxt_re", 425984, {}));
  s.modules.push_back(Module("ib_uverbs", 184320, {"bnxt_re"}));
  s.modules.push_back(Module("ib_core", 462848, {"ib_uverbs", "bnxt_re"}));
  s.modules.push_back(Module("bnxt_en", 413696, {"bnxt_re"}));
  s.modules.push_back(Module("amdgpu", 17891328, {}, "", "6.8.5"));
  return s;
}

// ---------------------------------------------------------------------------------------------
// many-hcas.

HostSpec ManyHcas() {
  HostSpec s;
  s.hostname = "wide-01";
  s.osrelease = "6.1.0-18-amd64";
  s.numa_nodes = {0};
  s.cpus_per_node = 64;
  s.nvidia_version = kProprietaryNvidiaVersion;
  AddLoopback(s);

  // mlx5_N -> the GPU sharing its switch. mlx5_10 and mlx5_11 make "mlx5_1" a prefix trap.
  const std::pair<int, int> kPaired[] = {{1, 0}, {10, 1}, {11, 2}, {2, 3}};
  for (int i = 0; i < 12; ++i) {
    const int r = 0x10 * (i + 1);
    const auto paired = std::find_if(std::begin(kPaired), std::end(kPaired),
                                     [&](const auto& p) { return p.first == i; });
    RoceNic nic;
    if (paired != std::end(kPaired)) {
      const auto [nic_port, gpu_port] = AddSwitch(s, 0, r, 0, kIntelRootPort);
      nic.bdf = Bdf(0, r + 3, 0, 0);
      nic.parent = nic_port;
      AddGpu(s, Bdf(0, r + 4, 0, 0), gpu_port, kH100Pcie);
    } else {
      nic.bdf = Bdf(0, r + 1, 0, 0);
      nic.parent = AddRootPort(s, 0, r, 0, kIntelRootPort);
    }
    const int bus = paired != std::end(kPaired) ? r + 3 : r + 1;
    nic.rdma = absl::StrCat("mlx5_", i);
    nic.netdev = absl::StrCat("enp", bus, "s0np0");
    nic.mac = Mac(0x0c, 0x42, 0xa1, 0x04, 0x00, i);
    nic.ipv4 = i == 0 ? Ip(10, 9, 0, 4) : Ip(25, 12, 0, i + 1);
    nic.mtu = i == 0 ? 1500 : 4200;
    nic.uverbs = i;
    AddRoceNic(s, nic);
    if (i == 0) AddDefault(s, nic.netdev, "10.9.0.1");
  }

  // mlx5_2's link is down: the port keeps its last rate, the netdev has no speed and, being
  // down, no connected route.
  RdmaPortSpec& down = s.FindRdma("mlx5_2")->ports[0];
  down.state = "1: DOWN";
  down.phys_state = "3: Disabled";
  NetdevSpec* down_netdev = s.FindNetdev("enp51s0np0");
  down_netdev->operstate = "down";
  down_netdev->speed_mbps.reset();
  std::erase_if(s.ipv4_routes, [](const Ipv4RouteSpec& r) { return r.iface == "enp51s0np0"; });
  std::erase_if(s.ipv6_routes, [](const Ipv6RouteSpec& r) { return r.iface == "enp51s0np0"; });

  s.modules.push_back(Module("nvidia_peermem", 16384, {}, "OE"));
  s.modules.push_back(Module("mlx5_ib", 491520, {}));
  s.modules.push_back(Module("mlx5_core", 2412544, {"mlx5_ib"}));
  s.modules.push_back(Module("nvidia", 56799232, {"nvidia_peermem"}, "POE", "535.161.07"));
  return s;
}

// ---------------------------------------------------------------------------------------------
// pcie-2x2: two GPUs and two compute NICs under each of four PCIe switches (as on HGX boards
// with a Broadcom PEX switch per GPU pair), plus a front-end NIC carrying the default route.
// Each GPU is PIX to both NICs of its switch: only the host-wide pairing tells them apart.

HostSpec Pcie2x2() {
  HostSpec s;
  s.hostname = "hgx-2x2-05";
  s.osrelease = "6.1.0-18-amd64";
  s.numa_nodes = {0, 1};
  s.nvidia_version = kProprietaryNvidiaVersion;
  AddLoopback(s);

  AddRootComplex(s, 0, 0x00, 0);
  AddFrontEndNic(s, Add(s, Bdf(0, 0, 1, 0), RcName(0, 0), PciRole::kRootPort, kIntelRootPort),
                 Mac(0x0c, 0x42, 0xa1, 0x05, 0x00, 0x00), Ip(10, 0, 70, 5), "10.0.70.1");

  constexpr int kRoots[] = {0x10, 0x30, 0x90, 0xb0};
  for (int q = 0; q < 4; ++q) {
    const int r = kRoots[q];
    const std::string rp = AddRootPort(s, 0, r, q < 2 ? 0 : 1, kIntelRootPort);
    const std::string up = Add(s, Bdf(0, r + 1, 0, 0), rp, PciRole::kSwitchUpstream, kSwitchPort);
    std::string down[4];
    for (int d = 0; d < 4; ++d) {
      down[d] = Add(s, Bdf(0, r + 2, d, 0), up, PciRole::kSwitchDownstream, kSwitchPort);
    }
    AddGpu(s, Bdf(0, r + 3, 0, 0), down[0], kH100Sxm);
    AddGpu(s, Bdf(0, r + 4, 0, 0), down[1], kH100Sxm);
    for (int k = 0; k < 2; ++k) {
      const int i = 2 * q + k + 1;
      RoceNic nic;
      nic.bdf = Bdf(0, r + 5 + k, 0, 0);
      nic.parent = down[2 + k];
      nic.rdma = absl::StrCat("mlx5_", i);
      nic.netdev = absl::StrCat("eth", i);
      nic.mac = Mac(0x0c, 0x42, 0xa1, 0x05, 0x00, i);
      nic.ipv4 = Ip(25, 13, i, 5);
      nic.uverbs = i;
      AddRoceNic(s, nic);
    }
  }
  s.modules = MlxNvidiaModules(/*peermem=*/true, /*open_nvidia=*/false);
  return s;
}

// ---------------------------------------------------------------------------------------------
// BreakTree.

absl::Status Overwrite(const fs::path& path, std::string_view content) {
  std::error_code ec;
  if (!fs::is_regular_file(fs::symlink_status(path, ec))) {
    return absl::NotFoundError(absl::StrCat("BreakTree: ", path.string(), " is not a file"));
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("BreakTree: cannot write ", path.string()));
  return absl::OkStatus();
}

absl::Status Append(const fs::path& path, std::string_view content) {
  std::error_code ec;
  if (!fs::is_regular_file(fs::symlink_status(path, ec))) {
    return absl::NotFoundError(absl::StrCat("BreakTree: ", path.string(), " is not a file"));
  }
  std::ofstream out(path, std::ios::binary | std::ios::app);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("BreakTree: cannot append to ", path.string()));
  return absl::OkStatus();
}

absl::Status RemovePath(const fs::path& path, bool recursive) {
  std::error_code ec;
  const bool existed = fs::exists(fs::symlink_status(path, ec));
  if (!existed) return absl::NotFoundError(absl::StrCat("BreakTree: no ", path.string()));
  if (recursive) {
    fs::remove_all(path, ec);
  } else {
    fs::remove(path, ec);
  }
  if (ec) {
    return absl::InternalError(
        absl::StrCat("BreakTree: remove ", path.string(), ": ", ec.message()));
  }
  return absl::OkStatus();
}

// Replaces whatever is at `link` (or nothing) with a symbolic link to `target`.
absl::Status PutLink(const fs::path& link, const std::string& target) {
  std::error_code ec;
  if (fs::exists(fs::symlink_status(link, ec))) {
    fs::remove(link, ec);
    if (ec) return absl::InternalError(absl::StrCat("BreakTree: remove ", link.string()));
  }
  fs::create_symlink(target, link, ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("BreakTree: symlink ", link.string(), ": ", ec.message()));
  }
  return absl::OkStatus();
}

}  // namespace hosts_internal

using namespace hosts_internal;  // NOLINT: the example hosts and their helpers

CounterList IbPortCounters(uint64_t seed) {
  static constexpr const char* kNames[] = {
      "VL15_dropped",
      "excessive_buffer_overrun_errors",
      "link_downed",
      "link_error_recovery",
      "local_link_integrity_errors",
      "multicast_rcv_packets",
      "multicast_xmit_packets",
      "port_rcv_constraint_errors",
      "port_rcv_data",
      "port_rcv_errors",
      "port_rcv_packets",
      "port_rcv_remote_physical_errors",
      "port_rcv_switch_relay_errors",
      "port_xmit_constraint_errors",
      "port_xmit_data",
      "port_xmit_discards",
      "port_xmit_packets",
      "port_xmit_wait",
      "symbol_error",
      "unicast_rcv_packets",
      "unicast_xmit_packets",
  };
  CounterList out;
  uint64_t i = 0;
  for (const char* name : kNames) {
    const std::string_view n = name;
    // Traffic counters count; error counters stay at zero, as on a healthy port.
    const bool traffic = n.find("data") != std::string_view::npos ||
                         n.find("packets") != std::string_view::npos || n == "port_xmit_wait";
    out.emplace_back(name, traffic ? (seed + 1) * 1000003 + ++i * 7919 : 0);
  }
  return out;
}

CounterList Mlx5HwCounters(uint64_t seed) {
  static constexpr const char* kNames[] = {
      "duplicate_request",
      "implied_nak_seq_err",
      "lifespan",
      "local_ack_timeout_err",
      "np_cnp_sent",
      "np_ecn_marked_roce_packets",
      "out_of_buffer",
      "out_of_sequence",
      "packet_seq_err",
      "req_cqe_error",
      "req_cqe_flush_error",
      "req_remote_access_errors",
      "req_remote_invalid_request",
      "req_rnr_retries_exceeded",
      "req_transport_retries_exceeded",
      "resp_cqe_error",
      "resp_cqe_flush_error",
      "resp_local_length_error",
      "resp_remote_access_errors",
      "rnr_nak_retry_err",
      "roce_adp_retrans",
      "roce_adp_retrans_to",
      "roce_slow_restart",
      "roce_slow_restart_cnps",
      "roce_slow_restart_trans",
      "rp_cnp_handled",
      "rp_cnp_ignored",
      "rx_atomic_requests",
      "rx_dct_connect",
      "rx_icrc_encapsulated",
      "rx_read_requests",
      "rx_write_requests",
  };
  CounterList out;
  uint64_t i = 0;
  for (const char* name : kNames) {
    const std::string_view n = name;
    uint64_t v = 0;
    if (n == "lifespan") {
      v = 10;
    } else if (n.find("requests") != std::string_view::npos ||
               n.find("cnp") != std::string_view::npos || n.find("ecn") != std::string_view::npos) {
      v = (seed + 1) * 101 + ++i * 13;
    }
    out.emplace_back(name, v);
  }
  return out;
}

CounterList BnxtReHwCounters(uint64_t seed) {
  static constexpr const char* kNames[] = {
      "active_ahs",
      "active_cqs",
      "active_mrs",
      "active_mws",
      "active_pds",
      "active_qps",
      "active_rc_qps",
      "active_srqs",
      "active_ud_qps",
      "bad_resp_err",
      "dup_req",
      "local_protection_err",
      "local_qp_op_err",
      "max_retry_exceeded",
      "mem_mgmt_op_err",
      "missing_resp",
      "recoverable_errors",
      "remote_access_err",
      "remote_invalid_req_err",
      "remote_op_err",
      "res_exceed_max",
      "res_length_mismatch",
      "rnr_naks_rcvd",
      "rx_bytes",
      "rx_cnp_pkts",
      "rx_ecn_marked_pkts",
      "rx_out_of_sequence",
      "rx_pkts",
      "rx_roce_discards",
      "rx_roce_errors",
      "seq_err_naks_rcvd",
      "to_retransmits",
      "tx_bytes",
      "tx_cnp_pkts",
      "tx_pkts",
      "tx_roce_discards",
      "tx_roce_errors",
      "unrecoverable_err",
      "watermark_qps",
  };
  CounterList out;
  uint64_t i = 0;
  for (const char* name : kNames) {
    const std::string_view n = name;
    uint64_t v = 0;
    if (n.find("bytes") != std::string_view::npos || n.find("pkts") != std::string_view::npos) {
      v = (seed + 1) * 1000003 + ++i * 7919;
    } else if (n.substr(0, 7) == "active_" || n.substr(0, 10) == "watermark_") {
      v = 1 + seed % 7;
    }
    out.emplace_back(name, v);
  }
  return out;
}

std::string ExampleHostTestName(std::string name) {
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

std::vector<std::string> ExampleHostNames() {
  return {"roce-9port",  "dgx-h100-ib",        "amd-mi300x-bnxt",   "many-hcas",
          "broken",      "ipv6-roce",          "ib-prefix-gids",    "pcie-2x2",
          "sriov-512vf", "amd-mi300x-pollara", "mixed-h100-mi300x", "cloud-vm-flat"};
}

absl::StatusOr<HostSpec> ExampleHost(std::string_view name) {
  if (name == "roce-9port") return Roce9Port();
  if (name == "dgx-h100-ib") return DgxH100Ib();
  if (name == "amd-mi300x-bnxt") return AmdMi300xBnxt();
  if (name == "many-hcas") return ManyHcas();
  if (name == "ipv6-roce") return Ipv6Roce();
  if (name == "ib-prefix-gids") return IbPrefixGids();
  if (name == "pcie-2x2") return Pcie2x2();
  if (name == "sriov-512vf") return Sriov512Vf();
  if (name == "amd-mi300x-pollara") return AmdMi300xPollara();
  if (name == "mixed-h100-mi300x") return MixedH100Mi300x();
  if (name == "cloud-vm-flat") return CloudVmFlat();
  if (name == "broken") {
    HostSpec s = Roce9Port();
    s.after_write = BreakTree;
    return s;
  }
  return absl::NotFoundError(absl::StrCat("no example host \"", Av(name), "\""));
}

absl::Status WriteExampleHost(std::string_view name, const std::filesystem::path& dir) {
  absl::StatusOr<HostSpec> spec = ExampleHost(name);
  if (!spec.ok()) return spec.status();
  return WriteHost(*spec, dir);
}

HostSpec LargeHost(int pfs, int vfs_per_pf, int gid_table_size) {
  pfs = std::clamp(pfs, 1, 2048);
  vfs_per_pf = std::clamp(vfs_per_pf, 0, 252);
  gid_table_size = std::clamp(gid_table_size, 1, 4096);
  HostSpec s;
  s.hostname = "large-01";
  s.osrelease = "6.1.0-18-amd64";
  s.numa_nodes = {0, 1};
  s.cpus_per_node = 64;
  s.nvidia_version = kProprietaryNvidiaVersion;
  AddLoopback(s);

  for (int p = 0; p < pfs; ++p) {
    // 32 root complexes per domain, 7 buses each: root port, switch up, switch down, PF, GPU.
    const int domain = p / 32;
    const int r = 0x10 + (p % 32) * 7;
    const int numa = p < (pfs + 1) / 2 ? 0 : 1;
    const auto [nic_port, gpu_port] = AddSwitch(s, domain, r, numa, kIntelRootPort);
    if (p % 4 == 0) AddGpu(s, Bdf(domain, r + 4, 0, 0), gpu_port, kH100Sxm);
    const int bus = r + 3;
    const std::string stem = domain == 0 ? absl::StrCat("enp", bus, "s0f0")
                                         : absl::StrCat("enP", domain, "p", bus, "s0f0");
    const std::string pf_bdf = Bdf(domain, bus, 0, 0);
    std::vector<RoceNic> nics;
    RoceNic pf;
    pf.bdf = pf_bdf;
    pf.parent = nic_port;
    pf.rdma = absl::StrCat("mlx5_", p);
    pf.netdev = stem + "np0";
    pf.mac = Mac(0x0c, 0x42, 0xa2, (p >> 8) & 0xff, p & 0xff, 0);
    pf.ipv4 = Ip(10, 64 + p / 256, p % 256, 1);
    pf.uverbs = p;
    nics.push_back(pf);
    for (int j = 0; j < vfs_per_pf; ++j) {
      // With ARI the VF routing IDs run on past function 7: PF + offset 1 + j.
      const int rid = 1 + j;
      const int n = pfs + p * vfs_per_pf + j;
      RoceNic vf = pf;
      vf.bdf = Bdf(domain, bus, rid >> 3, rid & 7);
      vf.ids = kConnectX7Vf;
      vf.hca_type = "MT4126";
      vf.rdma = absl::StrCat("mlx5_", n);
      vf.netdev = absl::StrCat(stem, "v", j);
      vf.mac = Mac(0x0c, 0x42, 0xa2, (p >> 8) & 0xff, p & 0xff, 1 + j);
      vf.ipv4 = Ip(10, 64 + p / 256, p % 256, 2 + j);
      vf.uverbs = n;
      nics.push_back(vf);
    }
    for (const RoceNic& nic : nics) {
      AddRoceNic(s, nic);
      RdmaPortSpec& port = s.rdma.back().ports[0];
      port.gid_table_size = gid_table_size;
      if (static_cast<int>(port.gids.size()) > gid_table_size) {
        port.gids.resize(static_cast<size_t>(gid_table_size));
      }
    }
    PciFunctionSpec* pf_spec = s.FindPci(pf_bdf);
    if (vfs_per_pf > 0) {
      SriovSpec sriov;
      sriov.total_vfs = std::max(8, vfs_per_pf);
      sriov.vf_device = kConnectX7Vf.device;
      for (size_t k = 1; k < nics.size(); ++k) sriov.vfs.push_back(nics[k].bdf);
      pf_spec->sriov = std::move(sriov);
      const PciLinkSpec pf_link = pf_spec->max_link;
      for (size_t k = 1; k < nics.size(); ++k) {
        PciFunctionSpec* vf = s.FindPci(nics[k].bdf);
        vf->current_link = {"Unknown", 0};
        vf->max_link = pf_link;
      }
    }
  }
  s.modules = MlxNvidiaModules(/*peermem=*/true, /*open_nvidia=*/false);
  return s;
}

absl::Status BreakTree(const std::filesystem::path& dir) {
  const HostSpec spec = Roce9Port();
  const fs::path sys = dir / "sys";
  auto rdma_dir = [&](std::string_view name) -> absl::StatusOr<fs::path> {
    absl::StatusOr<std::string> p = RdmaDevicePath(spec, name);
    if (!p.ok()) return p.status();
    return sys / *p;
  };
  auto pci_dir = [&](std::string_view bdf) -> absl::StatusOr<fs::path> {
    absl::StatusOr<std::string> p = PciFunctionPath(spec, bdf);
    if (!p.ok()) return p.status();
    return sys / *p;
  };
  auto port1 = [&](std::string_view name) -> absl::StatusOr<fs::path> {
    absl::StatusOr<fs::path> d = rdma_dir(name);
    if (!d.ok()) return d.status();
    return *d / "ports" / "1";
  };

  // a. fw_ver removed (through the class link, which resolves to the device directory).
  FABRIC_RETURN_IF_ERROR(RemovePath(sys / "class/infiniband/mlx5_1/fw_ver", false));
  // b. rate and state not parseable.
  absl::StatusOr<fs::path> p2 = port1("mlx5_2");
  if (!p2.ok()) return p2.status();
  FABRIC_RETURN_IF_ERROR(Overwrite(*p2 / "rate", "fast\n"));
  FABRIC_RETURN_IF_ERROR(Overwrite(*p2 / "state", "banana\n"));
  // c. a GID that is no GID.
  absl::StatusOr<fs::path> p3 = port1("mlx5_3");
  if (!p3.ok()) return p3.status();
  FABRIC_RETURN_IF_ERROR(Overwrite(*p3 / "gids/3", "zzzz\n"));
  // d. NUMA node not a number, link width empty.
  const RdmaDeviceSpec* mlx5_4 = spec.FindRdma("mlx5_4");
  absl::StatusOr<fs::path> f4 = pci_dir(mlx5_4->pci);
  if (!f4.ok()) return f4.status();
  FABRIC_RETURN_IF_ERROR(Overwrite(*f4 / "numa_node", "abc\n"));
  FABRIC_RETURN_IF_ERROR(Overwrite(*f4 / "current_link_width", ""));
  // e. no gid_attrs at all.
  absl::StatusOr<fs::path> p5 = port1("mlx5_5");
  if (!p5.ok()) return p5.status();
  FABRIC_RETURN_IF_ERROR(RemovePath(*p5 / "gid_attrs", true));
  // f. a class entry for a device that is not there.
  const fs::path mlx5_9 = sys / "class/infiniband/mlx5_9";
  std::error_code ec;
  if (fs::exists(fs::symlink_status(mlx5_9, ec))) {
    return absl::FailedPreconditionError("BreakTree: mlx5_9 already exists");
  }
  FABRIC_RETURN_IF_ERROR(
      PutLink(mlx5_9, "../../devices/pci0000:ff/0000:ff:00.0/infiniband/mlx5_9"));
  // g. a device link to a missing PCI function.
  absl::StatusOr<fs::path> d6 = rdma_dir("mlx5_6");
  if (!d6.ok()) return d6.status();
  FABRIC_RETURN_IF_ERROR(RemovePath(*d6 / "device", false));
  FABRIC_RETURN_IF_ERROR(PutLink(*d6 / "device", "../../../0000:ee:00.0"));
  // h. GPU 0's class code not hex.
  absl::StatusOr<fs::path> gpu0 = pci_dir("0000:1a:00.0");
  if (!gpu0.ok()) return gpu0.status();
  FABRIC_RETURN_IF_ERROR(Overwrite(*gpu0 / "class", "0xZZ\n"));
  // i. a class/net link that climbs out of the root.
  FABRIC_RETURN_IF_ERROR(RemovePath(sys / "class/net/eth7", false));
  FABRIC_RETURN_IF_ERROR(PutLink(sys / "class/net/eth7", "../../../../../../../../etc"));
  // j. a garbage line in the routing table.
  FABRIC_RETURN_IF_ERROR(Append(dir / "proc/net/route", "garbage line\n"));
  // k. a link loop.
  FABRIC_RETURN_IF_ERROR(PutLink(sys / "bus/pci/devices/0000:aa:00.0", "0000:aa:00.0"));
  // l. an unknown GID type.
  absl::StatusOr<fs::path> p8 = port1("mlx5_8");
  if (!p8.ok()) return p8.status();
  FABRIC_RETURN_IF_ERROR(Overwrite(*p8 / "gid_attrs/types/3", "RoCE v9\n"));
  return absl::OkStatus();
}

}  // namespace fabric::testing
