// Example hosts for the GID layouts beyond IPv4-mapped RoCE, built with the helpers of hosts.cc.
//
// ipv6-roce (v6-node-02, 6.8.0-45-generic, NUMA 0-1): an IPv6-only RoCE back end.
//   pci0000:00: 0000:00:1c.0 root port -> 0000:01:00.0 Intel I210 eno1 192.168.100.22/24, default
//   route via 192.168.100.1. Per GPU root complex R: R:01.0 root port -> R+1:00.0 switch up ->
//   R+2:00.0 down -> NIC at R+3:00.0, R+2:01.0 down -> GPU (H100 SXM) at R+4:00.0.
//   GPU  BDF           NIC     BDF           netdev       global IPv6 (SLAAC)         RC   NUMA
//   0    0000:19:00.0  mlx5_0  0000:18:00.0  enp24s0np0   2001:db8:a00:1:e42:a1ff:fe03:0  0x15 0
//   1    0000:9b:00.0  mlx5_1  0000:9a:00.0  enp154s0np0  2001:db8:a00:2:e42:a1ff:fe03:1  0x97 1
//   MACs 0c:42:a1:03:00:0<i>; no IPv4 on the back end. GIDs as the kernel fills them: 0/1
//   link-local (RoCE v1, v2), 2/3 the global address (RoCE v1, v2); routes fe80::/64 and the
//   /64 of the global address on each back-end netdev.
//
// ib-prefix-gids (ib-node-11, 5.4.0-182-generic, NUMA 0-1): an older InfiniBand host whose
//   ports list all 128 GID slots: index 0 the port GID, 1..127 the subnet prefix alone
//   (fe80:0000:0000:0000:0000:0000:0000:0000), as captured from ConnectX-6 HCAs.
//   pci0000:00 as on ipv6-roce (eno1 192.168.100.23/24). GPU/NIC pairs as on ipv6-roce:
//   GPU  BDF           NIC     BDF           IPoIB netdev  LID  port GUID            RC   NUMA
//   0    0000:19:00.0  mlx5_0  0000:18:00.0  ibp24s0       0x11 b859:9f03:00c4:1a20  0x15 0
//   1    0000:9b:00.0  mlx5_1  0000:9a:00.0  ibp154s0      0x12 b859:9f03:00c4:1a21  0x97 1
//   A100 SXM4 GPUs, ConnectX-6 HCAs at 200 Gb/sec (4X HDR), SM at LID 0x1.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tests/hosts/hosts.h"
#include "tests/hosts/hosts_internal.h"

namespace fabric::testing::hosts_internal {
namespace {

constexpr PciIds kConnectX6 = {0x15b3, 0x101b,      0x020700,         0x15b3,
                               0x0007, "mlx5_core", "16.0 GT/s PCIe", 16};
constexpr PciIds kA100Sxm4 = {0x10de, 0x20b2,   0x030200,         0x10de,
                              0x1463, "nvidia", "16.0 GT/s PCIe", 16};
constexpr int kRoots[] = {0x15, 0x97};

}  // namespace

void AddI210FrontEnd(HostSpec& s, int last_octet) {
  AddLoopback(s);
  s.root_complexes.push_back({RcName(0, 0), 0});
  const std::string rp =
      Add(s, Bdf(0, 0, 0x1c, 0), RcName(0, 0), PciRole::kRootPort, kIntelPchRootPort);
  s.pci.back().current_link = {"2.5 GT/s PCIe", 1};
  Add(s, Bdf(0, 0x01, 0, 0), rp, PciRole::kEndpoint, kIntelI210);
  s.netdevs.push_back(Ethernet("eno1", Bdf(0, 0x01, 0, 0),
                               Mac(0x3c, 0xec, 0xef, 0x02, 0x00, last_octet), 1500, 1000));
  AddConnected(s, "eno1", Ip(192, 168, 100, last_octet), 24);
  AddDefault(s, "eno1", "192.168.100.1");
}

HostSpec Ipv6Roce() {
  HostSpec s;
  s.hostname = "v6-node-02";
  s.osrelease = "6.8.0-45-generic";
  s.numa_nodes = {0, 1};
  s.nvidia_version = kProprietaryNvidiaVersion;
  AddI210FrontEnd(s, 22);
  for (int g = 0; g < 2; ++g) {
    const int r = kRoots[g];
    const auto [nic_port, gpu_port] = AddSwitch(s, 0, r, g, kIntelRootPort);
    RoceNic nic;
    nic.bdf = Bdf(0, r + 3, 0, 0);
    nic.parent = nic_port;
    nic.rdma = absl::StrCat("mlx5_", g);
    nic.netdev = absl::StrCat("enp", r + 3, "s0np0");
    nic.mac = Mac(0x0c, 0x42, 0xa1, 0x03, 0x00, g);
    nic.uverbs = g;
    AddRoceNic(s, nic);  // No IPv4: GIDs 0/1 link-local only.
    // SLAAC: the /64 of the back-end network and the modified EUI-64 of the MAC.
    const std::string ll = LinkLocalGidFromMac(nic.mac);
    const std::string global =
        absl::StrCat(absl::StrFormat("2001:0db8:0a00:%04x", g + 1), ll.substr(19));
    std::vector<GidSpec>& gids = s.rdma.back().ports[0].gids;
    gids.push_back({2, global, "IB/RoCE v1", nic.netdev});
    gids.push_back({3, global, "RoCE v2", nic.netdev});
    s.ipv6_routes.push_back({nic.netdev, "fe80::", 64, "::", 256, std::nullopt});
    s.ipv6_routes.push_back(
        {nic.netdev, absl::StrFormat("2001:db8:a00:%x::", g + 1), 64, "::", 256, std::nullopt});
    AddGpu(s, Bdf(0, r + 4, 0, 0), gpu_port, kH100Sxm);
  }
  s.modules = MlxNvidiaModules(/*peermem=*/true, /*open_nvidia=*/false);
  return s;
}

HostSpec IbPrefixGids() {
  HostSpec s;
  s.hostname = "ib-node-11";
  s.osrelease = "5.4.0-182-generic";
  s.numa_nodes = {0, 1};
  s.nvidia_version = kProprietaryNvidiaVersion;
  AddI210FrontEnd(s, 23);
  for (int g = 0; g < 2; ++g) {
    const int r = kRoots[g];
    const auto [nic_port, gpu_port] = AddSwitch(s, 0, r, g, kIntelRootPort);
    const std::string bdf = Add(s, Bdf(0, r + 3, 0, 0), nic_port, PciRole::kEndpoint, kConnectX6);
    AddGpu(s, Bdf(0, r + 4, 0, 0), gpu_port, kA100Sxm4);

    const std::string name = absl::StrCat("mlx5_", g);
    const std::string guid = absl::StrFormat("b859:9f03:00c4:1a%02x", 0x20 + g);
    RdmaDeviceSpec dev =
        Mlx5(name, bdf, guid, "MT4123", "20.31.1014", "MT_0000000223", s.hostname, g);
    RdmaPortSpec p;
    p.rate = "200 Gb/sec (4X HDR)";
    p.link_layer = "InfiniBand";
    p.lid = static_cast<uint32_t>(0x11 + g);
    p.sm_lid = 1;
    p.cap_mask = "0xa651e848";
    p.gid_table_size = 128;
    p.gids.push_back({0, LinkLocalGidFromGuid(guid), "IB/RoCE v1", ""});
    for (int i = 1; i < 128; ++i) {
      p.gids.push_back({i, "fe80:0000:0000:0000:0000:0000:0000:0000", "IB/RoCE v1", ""});
    }
    p.counters = IbPortCounters(Seed(name));
    p.hw_counters = Mlx5HwCounters(Seed(name));
    dev.ports.push_back(std::move(p));
    s.rdma.push_back(std::move(dev));

    // IPoIB: the hardware address is the QPN followed by the port GID.
    NetdevSpec ib = Ethernet(absl::StrCat("ibp", r + 3, "s0"), bdf, "", 2044, 200000);
    std::string addr = absl::StrFormat("00:00:10:%02x:fe:80:00:00:00:00:00:00", 0x48 + g);
    const std::string hex =
        absl::StrCat(guid.substr(0, 4), guid.substr(5, 4), guid.substr(10, 4), guid.substr(15, 4));
    for (size_t i = 0; i < hex.size(); i += 2) absl::StrAppend(&addr, ":", hex.substr(i, 2));
    ib.mac = addr;
    ib.type = 32;
    s.netdevs.push_back(ib);
  }
  s.modules = MlxNvidiaModules(/*peermem=*/true, /*open_nvidia=*/false);
  return s;
}

}  // namespace fabric::testing::hosts_internal
