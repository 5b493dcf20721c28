// Named example hosts for tests: realistic machines (bus numbers, IDs, names and addresses as a
// real host of that kind shows them) and a generator for large hosts. hosts.cc documents every
// PCI address, name and address chosen.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tests/hosts/builder.h"

namespace fabric::testing {

// "roce-9port", "dgx-h100-ib", "amd-mi300x-bnxt", "many-hcas", "broken", "ipv6-roce",
// "ib-prefix-gids", "pcie-2x2", "sriov-512vf", in that order. ipv6-roce and ib-prefix-gids are real
// GID layouts beyond IPv4-mapped RoCE (hosts_gid_layouts.cc): IPv6-only RoCE (link-local and global
// IPv6 GIDs, no IPv4-mapped one) and InfiniBand ports whose 128 slots hold one real GID and 127
// subnet-prefix-only entries. pcie-2x2 has two GPUs and two NICs per PCIe switch. sriov-512vf has
// 8 PFs with 64 VFs each, 16 VFs per PF in pods (hosts_sriov.cc).
std::vector<std::string> ExampleHostNames();
// `name` as a test name part (GoogleTest takes [A-Za-z0-9_]): "roce-9port" is "roce_9port".
std::string ExampleHostTestName(std::string name);

// The spec of an example host; NotFound for an unknown name. "broken" is roce-9port with
// after_write = BreakTree, so WriteHost of it writes the damaged tree.
absl::StatusOr<HostSpec> ExampleHost(std::string_view name);

// cloud-vm-flat's NCCL topology file, as its cloud publishes one per VM shape: four GPU-NIC
// pairs per NUMA node, each pair alone under a virtual PCIe switch (ffff:ff:0N.0), GPU i with
// mlx5_i. WriteHost of cloud-vm-flat writes it to DIR/kCloudVmTopologyFile.
std::string CloudVmTopologyXml();
inline constexpr char kCloudVmTopologyFile[] = "opt/microsoft/ndv5-topo.xml";

// WriteHost(ExampleHost(name), dir).
absl::Status WriteExampleHost(std::string_view name, const std::filesystem::path& dir);

// `pfs` ConnectX-7 RoCE PFs, each on its own root complex behind a root port and a switch (32
// per PCI domain, first half NUMA 0, second half NUMA 1), one H100 per 4 PFs under the PF's
// switch, `vfs_per_pf` VFs per PF each with an RDMA device and a netdev. RDMA devices are
// mlx5_0..mlx5_<pfs-1> for the PFs, then the VFs PF by PF. Every port has `gid_table_size` GID
// slots with entries 0..3 populated as on roce-9port (fewer if the table is smaller); every
// netdev has its own IPv4 address. Arguments are clamped: pfs to [1, 2048], vfs_per_pf to
// [0, 252], gid_table_size to [1, 4096]. LargeHost(32, 7, 256) has 256 RDMA devices.
HostSpec LargeHost(int pfs, int vfs_per_pf, int gid_table_size);

// Damages a freshly written roce-9port tree in `dir`, as hosts in the field are damaged:
//   a. sys/class/infiniband/mlx5_1/fw_ver removed.
//   b. mlx5_2 ports/1/rate is "fast\n"; ports/1/state is "banana\n".
//   c. mlx5_3 ports/1/gids/3 is "zzzz\n".
//   d. mlx5_4's PCI function (0000:41:00.0): numa_node is "abc\n", current_link_width is
//      empty.
//   e. mlx5_5 ports/1/gid_attrs removed entirely (as in some containers).
//   f. sys/class/infiniband/mlx5_9 is a dangling link to
//      ../../devices/pci0000:ff/0000:ff:00.0/infiniband/mlx5_9.
//   g. mlx5_6's infiniband/mlx5_6/device link dangles: ../../../0000:ee:00.0.
//   h. GPU 0's (0000:1a:00.0) class is "0xZZ\n".
//   i. sys/class/net/eth7 is a link escaping the root: ../../../../../../../../etc.
//   j. proc/net/route ends with the line "garbage line\n".
//   k. sys/bus/pci/devices/0000:aa:00.0 is a link to itself (a loop).
//   l. mlx5_8 ports/1/gid_attrs/types/3 is "RoCE v9\n".
// Fails (and stops) if the tree does not have the roce-9port file a step changes.
absl::Status BreakTree(const std::filesystem::path& dir);

// Port counters as drivers expose them, with values derived from `seed`.
CounterList IbPortCounters(uint64_t seed);    // counters/ (the IB PMA set, any driver).
CounterList Mlx5HwCounters(uint64_t seed);    // hw_counters/ of mlx5_ib.
CounterList BnxtReHwCounters(uint64_t seed);  // hw_counters/ of bnxt_re.

}  // namespace fabric::testing
