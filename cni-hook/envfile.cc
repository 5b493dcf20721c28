#include "cni-hook/envfile.h"

#include <netinet/in.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/common/ip.h"
#include "agent/common/natural_order.h"
#include "agent/common/shell.h"
#include "agent/hostfs/host_fs.h"
#include "agent/rdma/gid_choice.h"

namespace fabric::cni {
namespace {

// Names in `dir` in natural order ("mlx5_2" before "mlx5_10"); none when it cannot be listed.
std::vector<std::string> List(const HostFs& sysfs, const std::string& dir) {
  absl::StatusOr<std::vector<std::string>> names = sysfs.ListDir(dir);
  if (!names.ok()) return {};
  std::sort(names->begin(), names->end(), NaturalLess);
  return *std::move(names);
}

}  // namespace

std::vector<RdmaMatch> FindRdma(const std::string& sysfs_root,
                                const std::vector<EnvInterface>& ifaces) {
  const HostFsImpl sysfs(sysfs_root);
  std::vector<RdmaMatch> out;
  for (const EnvInterface& in : ifaces) {
    if (in.pci_bdf.empty() || in.pci_bdf.find('/') != std::string::npos) continue;
    // The pod's interface is a VF or macvlan of the port: its GID is the one holding the pod's
    // IPv4 (else its global IPv6) address, whichever netdev the kernel lists it under.
    rdma::GidWanted wanted;
    for (const announce::Address& a : in.addresses) {
      if (a.family == AF_INET) {
        std::array<uint8_t, 4> v4;
        std::memcpy(v4.data(), &a.addr, 4);
        wanted.ipv4.push_back(v4);
      } else if (a.family == AF_INET6) {
        rdma::GidBytes v6;
        std::memcpy(v6.data(), a.addr.s6_addr, v6.size());
        wanted.ipv6.push_back(v6);
      }
    }
    const std::string ib = absl::StrCat("bus/pci/devices/", in.pci_bdf, "/infiniband");
    for (const std::string& dev : List(sysfs, ib)) {
      std::optional<RdmaMatch> first_port;
      std::optional<RdmaMatch> found;
      const std::string ports = absl::StrCat(ib, "/", dev, "/ports");
      for (const std::string& port : List(sysfs, ports)) {
        RdmaMatch m{in.ifname, dev, 1, -1};
        if (!absl::SimpleAtoi(port, &m.port)) continue;
        if (!first_port) first_port = m;
        if (wanted.ipv4.empty() && wanted.ipv6.empty()) continue;
        absl::StatusOr<std::vector<rdma::GidSlot>> table =
            rdma::ReadGidTable(sysfs, absl::StrCat(ports, "/", port));
        if (!table.ok()) continue;
        if (std::optional<rdma::GidChoice> g = rdma::ChooseRoceV2Gid(*table, wanted)) {
          m.gid_index = g->index;
          found = m;
          break;
        }
      }
      if (found) {
        out.push_back(*found);
      } else if (first_port) {
        out.push_back(*first_port);  // the device is known even without a usable GID
      }
    }
  }
  return out;
}

std::string RenderEnvFile(const std::vector<EnvInterface>& ifaces,
                          const std::vector<RdmaMatch>& rdma) {
  std::vector<std::string> names, ips;
  for (const EnvInterface& in : ifaces) {
    names.push_back(in.ifname);
    for (const announce::Address& a : in.addresses) ips.push_back(IpToString(a.family, a.addr));
  }
  std::string out = "# fabric-cni: the pod's fabric environment\n";
  if (rdma.empty()) {
    absl::StrAppend(&out, "# no RDMA device found behind ", absl::StrJoin(names, ", "), "\n");
  } else {
    std::vector<std::string> hcas;
    int gid = -1;
    for (const RdmaMatch& m : rdma) {
      hcas.push_back(absl::StrCat(m.device, ":", m.port));
      if (m.gid_index < 0) {
        absl::StrAppend(&out, "# ", m.device, ":", m.port, " (", m.ifname,
                        "): no RoCE v2 GID holds the pod's address\n");
      } else if (gid < 0) {
        gid = m.gid_index;
      } else if (gid != m.gid_index) {
        // NCCL and UCX take one GID index for all devices.
        absl::StrAppend(&out, "# ", m.device, ":", m.port, " has the pod's GID at index ",
                        m.gid_index, ", not ", gid, "\n");
      }
    }
    const std::string list = absl::StrJoin(hcas, ",");
    absl::StrAppend(&out, "NCCL_IB_HCA=", ShellQuote("=" + list), "\n");
    if (gid >= 0) absl::StrAppend(&out, "NCCL_IB_GID_INDEX=", gid, "\n");
    absl::StrAppend(&out, "UCX_NET_DEVICES=", ShellQuote(list), "\n");
    if (gid >= 0) absl::StrAppend(&out, "UCX_IB_GID_INDEX=", gid, "\n");
  }
  absl::StrAppend(&out, "NCCL_SOCKET_IFNAME=", ShellQuote("=" + absl::StrJoin(names, ",")), "\n");
  absl::StrAppend(&out, "FABRIC_POD_IPS=", ShellQuote(absl::StrJoin(ips, ",")), "\n");
  return out;
}

}  // namespace fabric::cni
