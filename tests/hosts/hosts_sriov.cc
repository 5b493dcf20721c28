// sriov-512vf (sriov-node-04, 6.5.0-35-generic, NUMA 0-1, 64 CPUs per node): an SR-IOV RoCE host
// of the size pod networks run, 8 ConnectX-7 PFs with 64 VFs each (520 RDMA devices), built with
// the helpers of hosts.cc. The host the targeted-refresh work (issue 18) is measured on.
//
//   pci0000:00: 0000:00:1c.0 root port -> 0000:01:00.0 Intel I210 eno1 192.168.100.24/24, default
//   route via 192.168.100.1 (as on ipv6-roce).
//   PF p (0..7) on root complex R = kSriovRoots[p] (NUMA 0 for p < 4): R:01.0 root port ->
//   R+1:00.0 switch up -> R+2:00.0 down -> PF at R+3:00.0, R+2:01.0 down -> GPU p (H100 SXM) at
//   R+4:00.0.
//   PF p: mlx5_<p>, enp<R+3>s0f0np0, MAC 0c:42:a1:05:0p:00, 10.70.<p>.4/24, 400 Gb/sec, GIDs
//   0..3 as on roce-9port, 256 slots.
//   VF j (0..63) of PF p: with ARI at R+3:<(1+j)/8>.<(1+j)%8>, mlx5_<8 + 64p + j>,
//   enp<R+3>s0f0v<j>, MAC 0c:42:a1:05:0p:<j+1>, no IPv4 on the host: GIDs 0/1 link-local,
//   kVfGidSlots slots and one pkey (VF tables are the PF's in size on real ConnectX; smaller
//   ones keep the every-example-host tests quick, and a refresh cares about entries, not slots).
//   VFs 0..kPodVfs-1 of each PF are in pods: their netdevs live in the pod's network namespace,
//   so the host lists no netdev and no route for them (HostSpec::RemoveNetdev), while the RDMA
//   device (shared RDMA namespace mode) keeps its GIDs, link-local and the pod's IPv4
//   10.128.<p>.<j+2> at 2/3, without gid_attrs/ndevs entries (the netdev is not in this
//   namespace).
#include "absl/strings/str_cat.h"
#include "tests/hosts/hosts_internal.h"

namespace fabric::testing::hosts_internal {
namespace {

constexpr int kSriovRoots[] = {0x15, 0x2d, 0x45, 0x5d, 0x97, 0xaf, 0xc7, 0xdf};
constexpr int kPfs = 8;
constexpr int kVfsPerPf = 64;
constexpr int kPodVfs = 16;
constexpr int kVfGidSlots = 16;

}  // namespace

HostSpec Sriov512Vf() {
  HostSpec s;
  s.hostname = "sriov-node-04";
  s.osrelease = "6.5.0-35-generic";
  s.numa_nodes = {0, 1};
  s.cpus_per_node = 64;
  s.nvidia_version = kProprietaryNvidiaVersion;
  AddI210FrontEnd(s, 24);
  for (int p = 0; p < kPfs; ++p) {
    const int r = kSriovRoots[p];
    const int bus = r + 3;
    const auto [nic_port, gpu_port] = AddSwitch(s, 0, r, p < kPfs / 2 ? 0 : 1, kIntelRootPort);
    const std::string stem = absl::StrCat("enp", bus, "s0f0");
    RoceNic pf;
    pf.bdf = Bdf(0, bus, 0, 0);
    pf.parent = nic_port;
    pf.rdma = absl::StrCat("mlx5_", p);
    pf.netdev = stem + "np0";
    pf.mac = Mac(0x0c, 0x42, 0xa1, 0x05, p, 0);
    pf.ipv4 = Ip(10, 70, p, 4);
    pf.uverbs = p;
    AddRoceNic(s, pf);
    AddGpu(s, Bdf(0, r + 4, 0, 0), gpu_port, kH100Sxm);

    SriovSpec sriov;
    sriov.total_vfs = 127;  // NUM_OF_VFS as set in the firmware (mlxconfig).
    sriov.vf_device = kConnectX7Vf.device;
    const PciLinkSpec pf_link = s.FindPci(pf.bdf)->max_link;
    for (int j = 0; j < kVfsPerPf; ++j) {
      const int rid = 1 + j;  // ARI: VF routing IDs run on past function 7.
      const int n = kPfs + p * kVfsPerPf + j;
      RoceNic vf = pf;
      vf.bdf = Bdf(0, bus, rid >> 3, rid & 7);
      vf.ids = kConnectX7Vf;
      vf.hca_type = "MT4126";
      vf.rdma = absl::StrCat("mlx5_", n);
      vf.netdev = absl::StrCat(stem, "v", j);
      vf.mac = Mac(0x0c, 0x42, 0xa1, 0x05, p, 1 + j);
      const bool in_pod = j < kPodVfs;
      vf.ipv4 = in_pod ? Ip(10, 128, p, 2 + j) : 0;
      vf.uverbs = n;
      AddRoceNic(s, vf);
      sriov.vfs.push_back(vf.bdf);
      PciFunctionSpec* f = s.FindPci(vf.bdf);
      f->current_link = {"Unknown", 0};  // A VF's Link Status register reads zero.
      f->max_link = pf_link;
      RdmaPortSpec& port = s.rdma.back().ports[0];
      port.gid_table_size = kVfGidSlots;
      port.pkey_table_size = 1;  // RoCE uses pkey 0 only; 128 files a VF would triple the tree.
      if (in_pod) {
        std::vector<GidSpec> gids = port.gids;
        s.RemoveNetdev(vf.netdev);  // Moved into the pod: gone with its GIDs and routes.
        for (GidSpec& g : gids) g.ndev.clear();
        s.FindRdma(vf.rdma)->ports[0].gids = std::move(gids);
      }
    }
    s.FindPci(pf.bdf)->sriov = std::move(sriov);
  }
  s.modules = MlxNvidiaModules(/*peermem=*/true, /*open_nvidia=*/false);
  return s;
}

}  // namespace fabric::testing::hosts_internal
