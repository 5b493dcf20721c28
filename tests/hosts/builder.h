// Writes realistic Linux sysfs and procfs trees for tests: the kernel's directory layout, its file
// formats and its relative symbolic links (computed the way kernfs computes them), so that
// discovery code reading through a root directory cannot tell a written tree from a real host.
//
// A HostSpec is a plain, mutable description of a host. Tests start from an example host
// (hosts.h), change what they need (a port down, a GID moved, a device dropped) and write it:
//
//   HostSpec spec = *ExampleHost("roce-9port");
//   spec.FindRdma("mlx5_2")->ports[0].state = "1: DOWN";
//   ASSERT_TRUE(WriteHost(spec, dir).ok());
//
// Text fields hold what the kernel prints without the trailing newline; WriteHost adds it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace fabric::testing {

// Where a PCI function sits in the hierarchy. Only bridges may have children. The role also sets
// the header type and the PCIe port type in `config`.
enum class PciRole {
  kEndpoint,
  kRootPort,
  kSwitchUpstream,
  kSwitchDownstream,
  kPciBridge,  // PCIe-to-PCI bridge (such as a BMC's); its children are conventional PCI.
};

// One side of a PCIe link, as current_link_* / max_link_* print it.
struct PciLinkSpec {
  std::string speed = "32.0 GT/s PCIe";  // "Unknown" where the link status reads zero (VFs).
  int width = 16;
};

// A host bridge: sys/devices/pci<domain>:<bus>.
struct RootComplexSpec {
  std::string name;   // "pci0000:15".
  int numa_node = 0;  // -1: no affinity. The functions below inherit it.
};

// The PF side of SR-IOV. The VFs are siblings of the PF (same parent directory); each gets a
// `physfn` link back.
struct SriovSpec {
  int total_vfs = 0;
  std::vector<std::string> vfs;  // BDFs of the enabled VFs, virtfn0 first; sriov_numvfs = size.
  int offset = 1;
  int stride = 1;
  uint16_t vf_device = 0;  // sriov_vf_device.
};

// One PCI function: sys/devices/pci.../<bridges>/<bdf>.
struct PciFunctionSpec {
  std::string bdf;     // "0000:1b:00.0", lower case.
  std::string parent;  // A root complex ("pci0000:15") or the BDF of the bridge above.
  PciRole role = PciRole::kEndpoint;
  uint16_t vendor = 0;
  uint16_t device = 0;
  uint32_t class_code = 0;  // 24 bits, e.g. 0x020000; bridges 0x060400.
  uint16_t subsystem_vendor = 0;
  uint16_t subsystem_device = 0;
  uint8_t revision = 0;
  std::string driver;            // Bound driver; empty: unbound (no `driver` link).
  std::optional<int> numa_node;  // Unset: the root complex's.
  bool pcie = true;              // Conventional PCI functions have no link attributes.
  PciLinkSpec current_link;
  PciLinkSpec max_link;
  int irq = 0;
  std::optional<SriovSpec> sriov;  // Set on an SR-IOV PF.
  // Driver attributes beyond the PCI core's, as (file, text) pairs: amdgpu's "unique_id".
  std::vector<std::pair<std::string, std::string>> attributes;
  // Has the AER capability: aer_dev_correctable, aer_dev_nonfatal and aer_dev_fatal, all counts
  // zero. Written for PCIe functions only, and never for VFs (modelled without the capability).
  bool aer = true;
};

// A network interface: <pci function>/net/<name> (<pci function>/<virtio>/net/<name> for
// virtio-net), or devices/virtual/net/<name> without one.
struct NetdevSpec {
  std::string name;
  std::string pci;        // BDF of the function it sits on; empty: a virtual netdev.
  std::string virtio;     // virtio-net: the virtio device between function and netdev ("virtio2").
  std::string mac;        // `address`: 6 bytes for Ethernet, 20 for IPoIB.
  std::string broadcast;  // Empty: the usual one for `type`.
  int mtu = 1500;
  std::string operstate = "up";
  std::optional<int64_t> speed_mbps;  // Unset: no `speed` file (link down, virtual).
  int ifindex = 0;                    // 0: its position in HostSpec::netdevs, plus one.
  int dev_port = 0;                   // Port number minus one on multi-port functions.
  int type = 1;                       // ARPHRD_*: 1 Ethernet, 32 InfiniBand, 772 loopback.
  std::string lower;    // Upper devices (macvlan, VLAN): the netdev below; links lower_/upper_.
  std::string devtype;  // uevent DEVTYPE, e.g. "macvlan"; empty: none.
};

// A populated GID table entry. Entries not listed read as the zero GID and have no attributes.
struct GidSpec {
  int index = 0;
  std::string gid;   // Kernel text: eight groups of four hex digits.
  std::string type;  // gid_attrs/types: "IB/RoCE v1" or "RoCE v2".
  std::string ndev;  // gid_attrs/ndevs; empty: no ndevs file (InfiniBand).
};

using CounterList = std::vector<std::pair<std::string, uint64_t>>;

// ports/<number>/ of an RDMA device.
struct RdmaPortSpec {
  int number = 1;
  std::string state = "4: ACTIVE";
  std::string phys_state = "5: LinkUp";
  std::string rate = "400 Gb/sec (4X NDR)";
  std::string link_layer = "Ethernet";
  uint32_t lid = 0;  // Printed "0x%x", as the kernel does.
  uint32_t sm_lid = 0;
  int lid_mask_count = 0;
  int sm_sl = 0;
  std::string cap_mask = "0x04010000";
  int gid_table_size = 256;  // gids/0 .. gids/<size-1> all exist.
  std::vector<GidSpec> gids;
  int pkey_table_size = 128;  // pkeys/0 is 0xffff, the rest 0x0000.
  CounterList counters;       // counters/; empty: no directory.
  CounterList hw_counters;    // hw_counters/; empty: no directory.
};

// An RDMA device: <pci function>/infiniband/<name>, or devices/virtual/infiniband/<name> for a
// software device (rxe, siw), which has a `parent` file instead of a `device` link.
struct RdmaDeviceSpec {
  std::string name;
  std::string pci;     // BDF; empty: a software device.
  std::string parent;  // Software devices: the netdev they run on.
  std::string node_guid;
  std::string sys_image_guid;  // Empty: node_guid.
  std::string fw_ver;
  std::string hca_type;
  std::string node_type = "1: CA";
  std::string board_id;
  std::string node_desc;
  std::vector<RdmaPortSpec> ports;
  std::optional<int> uverbs;  // K of infiniband_verbs/uverbs<K>; unset: none.
  // With uverbs on a CA (not iWARP): infiniband_mad/umad<K> per port, numbered in write order,
  // as ib_umad registers them.
  bool umad = true;
};

// A kernel module: sys/module/<name>/ and, unless built in, a /proc/modules line.
struct ModuleSpec {
  std::string name;
  int64_t size = 16384;
  int refcount = 0;
  std::vector<std::string> used_by;  // Modules depending on it (holders/).
  std::string taint;                 // /proc/modules flags, e.g. "OE"; empty: none.
  std::string version;               // sys/module/<name>/version; empty: no file.
  bool builtin = false;              // Built in: a sys/module directory only.
};

// A /proc/net/route line.
struct Ipv4RouteSpec {
  std::string iface;
  std::string destination = "0.0.0.0";
  int prefix_len = 0;
  std::string gateway = "0.0.0.0";
  int metric = 0;
  std::optional<uint32_t> flags;  // Unset: RTF_UP, plus RTF_GATEWAY with a gateway.
};

// A /proc/net/ipv6_route line.
struct Ipv6RouteSpec {
  std::string iface;
  std::string destination = "::";
  int prefix_len = 0;
  std::string next_hop = "::";
  uint32_t metric = 1024;
  std::optional<uint32_t> flags;  // Unset: RTF_UP, plus RTF_GATEWAY with a next hop.
};

struct HostSpec {
  // procfs.
  std::string hostname;
  std::string osrelease;
  std::vector<Ipv4RouteSpec> ipv4_routes;
  std::vector<Ipv6RouteSpec> ipv6_routes;
  std::optional<std::string> nvidia_version;  // proc/driver/nvidia/version, verbatim.
  // proc/driver/nvidia/gpus/<bdf>/information, as (BDF, text verbatim) pairs.
  std::vector<std::pair<std::string, std::string>> nvidia_gpu_information;
  // proc/sys files as (path under proc/sys, value) pairs, e.g. ("net/ipv4/conf/all/arp_ignore",
  // "0"); none by default, as in a container without /proc/sys/net.
  std::vector<std::pair<std::string, std::string>> sysctls;

  // sysfs.
  std::vector<int> numa_nodes = {0};  // Online nodes.
  int cpus_per_node = 32;             // Node N has CPUs [N*cpus_per_node, (N+1)*cpus_per_node).
  std::vector<RootComplexSpec> root_complexes;
  std::vector<PciFunctionSpec> pci;
  std::vector<NetdevSpec> netdevs;
  std::vector<RdmaDeviceSpec> rdma;
  std::vector<ModuleSpec> modules;  // Both sys/module and /proc/modules.

  // Runs after the tree is written, on the host directory: damage no spec can express (the
  // "broken" example host uses it).
  std::function<absl::Status(const std::filesystem::path& dir)> after_write;

  // Lookups; nullptr when absent.
  RootComplexSpec* FindRootComplex(std::string_view name);
  PciFunctionSpec* FindPci(std::string_view bdf);
  const PciFunctionSpec* FindPci(std::string_view bdf) const;
  NetdevSpec* FindNetdev(std::string_view name);
  const NetdevSpec* FindNetdev(std::string_view name) const;
  RdmaDeviceSpec* FindRdma(std::string_view name);
  const RdmaDeviceSpec* FindRdma(std::string_view name) const;
  ModuleSpec* FindModule(std::string_view name);

  // Removals keep the spec consistent, as the kernel would on hot unplug. False when absent.
  // A PCI function goes with the functions below it, its VFs, and everything on them.
  bool RemovePci(std::string_view bdf);
  // A netdev goes with its upper devices, the GID entries and routes naming them, and the
  // software RDMA devices on them.
  bool RemoveNetdev(std::string_view name);
  // Only the RDMA device (as when its RDMA driver is unloaded); netdevs stay.
  bool RemoveRdma(std::string_view name);
  bool RemoveModule(std::string_view name);
};

// Writes dir/sys/... and dir/proc/... for `spec`, creating `dir`. Fails with InvalidArgument on
// an inconsistent spec (unknown parent, duplicate name, GID index outside the table, ...) and
// with FailedPrecondition when `dir` exists and is not an empty directory.
absl::Status WriteHost(const HostSpec& spec, const std::filesystem::path& dir);

// Where WriteHost puts things, relative to dir/sys (as a sysfs root sees them), e.g.
// "devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0".
absl::StatusOr<std::string> PciFunctionPath(const HostSpec& spec, std::string_view bdf);
absl::StatusOr<std::string> NetdevPath(const HostSpec& spec, std::string_view name);
absl::StatusOr<std::string> RdmaDevicePath(const HostSpec& spec, std::string_view name);

// GID and GUID text as the kernel prints it. Each returns "" for malformed input, which WriteHost
// rejects as a GID.
// "25.11.128.11" -> "0000:0000:0000:0000:0000:ffff:190b:800b".
std::string Ipv4MappedGid(std::string_view ipv4);
// fe80::/64 with the modified EUI-64 of a MAC: "0c:42:a1:00:00:01" ->
// "fe80:0000:0000:0000:0e42:a1ff:fe00:0001".
std::string LinkLocalGidFromMac(std::string_view mac);
// fe80::/64 with a port GUID (InfiniBand): "a088:c203:0045:0a00" ->
// "fe80:0000:0000:0000:a088:c203:0045:0a00".
std::string LinkLocalGidFromGuid(std::string_view guid);
// The node GUID mlx5 derives from a MAC: "0c:42:a1:67:8e:3c" -> "0c42:a103:0067:8e3c".
std::string Mlx5GuidFromMac(std::string_view mac);
// The modified EUI-64 of a MAC as a GUID (bnxt_re): "bc:97:e1:5e:00:01" -> "be97:e1ff:fe5e:0001".
std::string Eui64GuidFromMac(std::string_view mac);

}  // namespace fabric::testing
