// The pod's fabric environment file (`<envDir>/<containerid>.env`): which RDMA device, port and
// RoCE v2 GID index stand behind the pod's interfaces, in NAME=VALUE form for NCCL and UCX.
// Pure apart from reading a sysfs tree whose root is a parameter (tests build a small one).
#pragma once

#include <string>
#include <vector>

#include "agent/fabric/announce/announce.h"
#include "agent/policy/jobenv/jobenv.h"
#include "agent/publish/podrecord/pod_record.h"

namespace fabric::cni {

struct EnvInterface {
  std::string ifname;   // the pod's interface name
  std::string pci_bdf;  // ETHTOOL_GDRVINFO bus_info inside the netns; empty for virtual devices
  // A macvlan's lower netdev (host namespace) when it has no PCI address: a software RDMA
  // device's (rxe, siw) parent.
  std::string lower_netdev;
  std::vector<announce::Address> addresses;
  std::string mac;  // As prevResult gave it (the DRA driver's networkData); may be empty.
};

// One RDMA port found behind an interface.
struct RdmaMatch {
  std::string ifname;
  std::string device;  // e.g. mlx5_3
  int port = 1;
  // The RoCE v2 GID holding the pod's IPv4 (::ffff:a.b.c.d), else its global IPv6 address
  // (IPv6-only RoCE); -1 when none.
  int gid_index = -1;
  std::string ipv4;  // That GID's address: IPv4-mapped, or
  std::string ipv6;  // global IPv6.
  // The port's other IPv4 GIDs (other pods' macvlans among them): NCCL_IB_ADDR_RANGE must not
  // select one of them.
  std::vector<jobenv::OtherGid> other_ipv4_gids;
};

// Looks under <sysfs_root>/bus/pci/devices/<bdf>/infiniband/ for each interface's RDMA device
// (for one without a PCI address, the software devices whose `parent` is its lower netdev),
// and in its ports' gids/ and gid_attrs/types/ for the RoCE v2 GID of the interface's IPv4, else
// of its IPv6 address (agent/rdma/gid_choice.h).
std::vector<RdmaMatch> FindRdma(const std::string& sysfs_root,
                                const std::vector<EnvInterface>& ifaces);

// The pod's RDMA ports as the job environment's picks (no GPU): what the env file renders and the
// pod record (agent/publish/podrecord) carries.
std::vector<jobenv::Pick> PodPicks(const std::vector<RdmaMatch>& rdma);

// The attachment's pod record: its interfaces with their addresses (CIDR form), its ports.
podrecord::PodRecord PodRecordOf(const std::vector<EnvInterface>& ifaces,
                                 const std::vector<RdmaMatch>& rdma);

// The file's text: the job environment of the pod's RDMA ports by the agent's rules
// (jobenv::Render: job scope = the pod's ports, NCCL_SOCKET_IFNAME = the pod's interfaces, no
// rank), its notes as comments, and FABRIC_POD_IPS; without RDMA only NCCL_SOCKET_IFNAME,
// FABRIC_POD_IPS and a comment saying so.
std::string RenderEnvFile(const std::vector<EnvInterface>& ifaces,
                          const std::vector<RdmaMatch>& rdma);

}  // namespace fabric::cni
