// Example hosts for the NIC and GPU vendors beyond NVIDIA's, and a cloud VM's flat PCI tree,
// built with the helpers of hosts.cc.
//
// amd-mi300x-pollara (mi300-31, 6.8.0-60-generic, NUMA 0-1): 8 MI300X and 8 AMD Pensando
//   Pollara 400 AI NICs (ionic, RDMA devices ionic_0..7), pairs as on amd-mi300x-bnxt (per root
//   complex R: R:01.0 root port -> switch; NIC at R+3:00.0, GPU at R+4:00.0), R = 0x05 + 0x10*i.
//   Front end as on ipv6-roce (eno1 192.168.100.31/24). ionic_i: netdev enp<R+3>s0np0, MAC
//   00:ae:cd:07:00:0i, 10.230.<i>.31/24; ionic's GID table holds RoCE v2 entries only: 0 the
//   link-local, 1 the IPv4-mapped one (AMD's recipes say "index 1"). amdgpu exports dma-buf on
//   6.8: GPUDirect through dma-buf.
//
// mixed-h100-mi300x (mix-03, 6.8.0-60-generic, NUMA 0-1): GPUs of two vendors in one host:
//   GPUs 0-1 H100 SXM (NVIDIA open kernel module 550, nvidia_peermem loaded), GPUs 2-3 MI300X
//   (amdgpu), each under its own switch beside a ConnectX-7 port (per root complex R = 0x15,
//   0x35, 0x95, 0xb5: NIC at R+3:00.0, GPU at R+4:00.0). The four ports are two dual-port
//   adapters: mlx5_0/mlx5_1 share system image GUID 0c42:a103:0007:0000 (mlx5_0's node GUID),
//   mlx5_2/mlx5_3 0c42:a103:0007:0002. mlx5_i: enp<R+3>s0np0, MAC
//   0c:42:a1:07:00:0i, 10.240.<i>.3/24, GIDs at 0..3 as roce-9port. Front end as on ipv6-roce (eno1
//   192.168.100.33/24).
//
// cloud-vm-flat (gpu-vm-5, 6.8.0-1021-azure, NUMA 0-1): a cloud GPU shape as its VM sees it:
//   8 H100 SXM and 8 ConnectX-7 VFs (RoCE) passed through, each alone in its own PCI domain on a
//   root bus, no root port or switch above it (Hyper-V's vPCI): GPU i at 0001+i:00:00.0, mlx5_i
//   at 0101+i:00:00.0 (NUMA 0 for i < 4, else 1), enP<257+i>s1 with MAC 00:0d:3a:05:00:0i and
//   10.250.<i>.5/24, GIDs at 0..3 as roce-9port. Front end as on ipv6-roce (eno1
//   192.168.100.35/24). Its NCCL topology file (CloudVmTopologyXml) is written beside the tree.
#include <filesystem>
#include <fstream>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tests/hosts/hosts.h"
#include "tests/hosts/hosts_internal.h"

namespace fabric::testing::hosts_internal {
namespace {

// AMD Pensando (vendor 1dd8) DSC Ethernet controller, bound to ionic.
constexpr PciIds kPollara = {0x1dd8, 0x1002,  0x020000,         0x1dd8,
                             0x5201, "ionic", "32.0 GT/s PCIe", 16};

}  // namespace

HostSpec AmdMi300xPollara() {
  HostSpec s;
  s.hostname = "mi300-31";
  s.osrelease = "6.8.0-60-generic";
  s.numa_nodes = {0, 1};
  s.cpus_per_node = 96;
  AddI210FrontEnd(s, 31);
  for (int g = 0; g < 8; ++g) {
    const int r = 0x05 + 0x10 * g;
    const auto [nic_port, gpu_port] = AddSwitch(s, 0, r, g < 4 ? 0 : 1, kAmdRootPort);
    const std::string bdf = Add(s, Bdf(0, r + 3, 0, 0), nic_port, PciRole::kEndpoint, kPollara);
    AddGpu(s, Bdf(0, r + 4, 0, 0), gpu_port, kMi300x);
    s.pci.back().attributes.emplace_back("unique_id", absl::StrFormat("7d31a0c4e2f9%04x", g));

    const std::string name = absl::StrCat("ionic_", g);
    const std::string netdev = absl::StrFormat("enp%ds0np0", r + 3);
    const std::string mac = Mac(0x00, 0xae, 0xcd, 0x07, 0x00, g);
    const uint32_t ip = Ip(10, 230, g, 31);
    s.netdevs.push_back(Ethernet(netdev, bdf, mac, 9000, 400000));
    AddConnected(s, netdev, ip, 24);
    RdmaDeviceSpec dev;
    dev.name = name;
    dev.pci = bdf;
    dev.node_guid = Eui64GuidFromMac(mac);
    dev.fw_ver = "1.117.1-a-3";
    dev.hca_type = "POLLARA-1Q400P";
    dev.board_id = "DSP-POLLARA-1Q400P";
    dev.node_desc = absl::StrCat(s.hostname, " ", name);
    dev.uverbs = g;
    const std::vector<GidSpec> gids = {{0, LinkLocalGidFromMac(mac), "RoCE v2", netdev},
                                       {1, Ipv4MappedGid(IpText(ip)), "RoCE v2", netdev}};
    dev.ports.push_back(RocePort("400 Gb/sec (4X NDR)", gids, {}, Seed(name)));
    s.rdma.push_back(std::move(dev));
  }
  s.modules.push_back(Module("ionic_rdma", 229376, {}));
  s.modules.push_back(Module("ib_uverbs", 184320, {"ionic_rdma"}));
  s.modules.push_back(Module("ib_core", 462848, {"ib_uverbs", "ionic_rdma"}));
  s.modules.push_back(Module("ionic", 303104, {"ionic_rdma"}));
  s.modules.push_back(Module("amdgpu", 17891328, {}, "", "6.12.12"));
  return s;
}

HostSpec MixedH100Mi300x() {
  HostSpec s;
  s.hostname = "mix-03";
  s.osrelease = "6.8.0-60-generic";
  s.numa_nodes = {0, 1};
  s.cpus_per_node = 64;
  AddI210FrontEnd(s, 33);
  constexpr int kMixedRoots[] = {0x15, 0x35, 0x95, 0xb5};
  for (int g = 0; g < 4; ++g) {
    const int r = kMixedRoots[g];
    const auto [nic_port, gpu_port] = AddSwitch(s, 0, r, g < 2 ? 0 : 1, kAmdRootPort);
    RoceNic nic;
    nic.bdf = Bdf(0, r + 3, 0, 0);
    nic.parent = nic_port;
    nic.rdma = absl::StrCat("mlx5_", g);
    nic.netdev = absl::StrFormat("enp%ds0np0", r + 3);
    nic.mac = Mac(0x0c, 0x42, 0xa1, 0x07, 0x00, g);
    nic.ipv4 = Ip(10, 240, g, 3);
    nic.uverbs = g;
    AddRoceNic(s, nic);
    // Two dual-port adapters: each port's function has its adapter's system image GUID, the
    // first port's node GUID.
    s.rdma.back().sys_image_guid = s.rdma[s.rdma.size() - 1 - g % 2].node_guid;
    AddGpu(s, Bdf(0, r + 4, 0, 0), gpu_port, g < 2 ? kH100Sxm : kMi300x);
    if (g >= 2) s.pci.back().attributes.emplace_back("unique_id", absl::StrFormat("4be1%012x", g));
  }
  s.nvidia_version = kOpenNvidiaVersion;
  s.modules = MlxNvidiaModules(/*peermem=*/true, /*open_nvidia=*/true);
  s.modules.push_back(Module("amdgpu", 17891328, {}, "", "6.12.12"));
  return s;
}

HostSpec CloudVmFlat() {
  HostSpec s;
  s.hostname = "gpu-vm-5";
  s.osrelease = "6.8.0-1021-azure";
  s.numa_nodes = {0, 1};
  s.cpus_per_node = 48;
  AddI210FrontEnd(s, 35);
  for (int i = 0; i < 8; ++i) {
    const int gpu_domain = 0x0001 + i, nic_domain = 0x0101 + i;
    AddRootComplex(s, gpu_domain, 0, i < 4 ? 0 : 1);
    AddGpu(s, Bdf(gpu_domain, 0, 0, 0), RcName(gpu_domain, 0), kH100Sxm);
    AddRootComplex(s, nic_domain, 0, i < 4 ? 0 : 1);
    RoceNic nic;
    nic.bdf = Bdf(nic_domain, 0, 0, 0);
    nic.parent = RcName(nic_domain, 0);
    nic.ids = kConnectX7Vf;
    nic.rdma = absl::StrCat("mlx5_", i);
    nic.netdev = absl::StrFormat("enP%ds1", nic_domain);
    nic.mac = Mac(0x00, 0x0d, 0x3a, 0x05, 0x00, i);
    nic.ipv4 = Ip(10, 250, i, 5);
    nic.uverbs = i;
    AddRoceNic(s, nic);
  }
  s.nvidia_version = kOpenNvidiaVersion;
  s.modules = MlxNvidiaModules(/*peermem=*/false, /*open_nvidia=*/true);
  s.after_write = [](const std::filesystem::path& dir) -> absl::Status {
    const std::filesystem::path file = dir / kCloudVmTopologyFile;
    std::error_code ec;
    std::filesystem::create_directories(file.parent_path(), ec);
    std::ofstream out(file);
    out << CloudVmTopologyXml();
    out.close();
    if (ec || !out) return absl::InternalError(absl::StrCat("cannot write ", file.string()));
    return absl::OkStatus();
  };
  return s;
}

}  // namespace fabric::testing::hosts_internal

namespace fabric::testing {

std::string CloudVmTopologyXml() {
  std::string xml = "<system version=\"1\">\n";
  for (int numa = 0; numa < 2; ++numa) {
    absl::StrAppendFormat(&xml,
                          "  <cpu numaid=\"%d\" affinity=\"%s\" arch=\"x86_64\" "
                          "vendor=\"GenuineIntel\" familyid=\"6\" modelid=\"143\">\n",
                          numa,
                          numa == 0 ? "00000000,0000ffff,ffffffff" : "ffffffff,ffff0000,00000000");
    for (int i = 4 * numa; i < 4 * numa + 4; ++i) {
      absl::StrAppendFormat(&xml,
                            "    <pci busid=\"ffff:ff:%02x.0\" class=\"0x060400\" "
                            "link_speed=\"32.0 GT/s PCIe\" link_width=\"16\">\n"
                            "      <pci busid=\"%04x:00:00.0\" class=\"0x030200\" "
                            "link_speed=\"32.0 GT/s PCIe\" link_width=\"16\"/>\n"
                            "      <pci busid=\"%04x:00:00.0\" class=\"0x020700\" "
                            "link_speed=\"32.0 GT/s PCIe\" link_width=\"16\"/>\n"
                            "    </pci>\n",
                            i + 1, 0x0001 + i, 0x0101 + i);
    }
    xml += "  </cpu>\n";
  }
  xml += "</system>\n";
  return xml;
}

}  // namespace fabric::testing
