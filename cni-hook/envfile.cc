#include "cni-hook/envfile.h"

#include <netinet/in.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/common/ip.h"
#include "agent/common/natural_order.h"
#include "agent/common/shell.h"
#include "agent/hostfs/host_fs.h"
#include "agent/policy/jobenv/format.h"
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
    // The RDMA devices behind the interface: its PCI function's (a VF, or a macvlan's lower PF),
    // else a software device (rxe, siw) whose parent is the macvlan's lower netdev.
    std::vector<std::string> devices;  // sysfs paths of the devices
    if (!in.pci_bdf.empty() && in.pci_bdf.find('/') == std::string::npos) {
      const std::string ib = absl::StrCat("bus/pci/devices/", in.pci_bdf, "/infiniband");
      for (const std::string& dev : List(sysfs, ib)) devices.push_back(absl::StrCat(ib, "/", dev));
    } else if (!in.lower_netdev.empty()) {
      for (const std::string& dev : List(sysfs, "class/infiniband")) {
        const std::string path = absl::StrCat("class/infiniband/", dev);
        absl::StatusOr<std::string> parent = sysfs.ReadFile(absl::StrCat(path, "/parent"));
        if (parent.ok() && absl::StripAsciiWhitespace(*parent) == in.lower_netdev) {
          devices.push_back(path);
        }
      }
    }
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
    for (const std::string& dev_path : devices) {
      const std::string dev = dev_path.substr(dev_path.rfind('/') + 1);
      std::optional<RdmaMatch> first_port;
      std::optional<RdmaMatch> found;
      const std::string ports = absl::StrCat(dev_path, "/ports");
      for (const std::string& port : List(sysfs, ports)) {
        RdmaMatch m;
        m.ifname = in.ifname;
        m.device = dev;
        if (!absl::SimpleAtoi(port, &m.port)) continue;
        if (!first_port) first_port = m;
        if (wanted.ipv4.empty() && wanted.ipv6.empty()) continue;
        absl::StatusOr<std::vector<rdma::GidSlot>> table =
            rdma::ReadGidTable(sysfs, absl::StrCat(ports, "/", port));
        if (!table.ok()) continue;
        if (std::optional<rdma::GidChoice> g = rdma::ChooseRoceV2Gid(*table, wanted)) {
          m.gid_index = g->index;
          for (const rdma::GidSlot& slot : *table) {
            std::optional<std::string> v4 = rdma::GidIpv4(slot.gid);
            if (slot.index == g->index) {
              m.ipv4 = v4.value_or("");
              m.ipv6 = rdma::GidIpv6(slot.gid).value_or("");
            } else if (v4) {
              const bool v2 = slot.kind == rdma::GidKind::kRoceV2;
              m.other_ipv4_gids.push_back(
                  {static_cast<uint32_t>(slot.index), *v4, v2 || !slot.kind,
                   absl::StrCat(v2 ? "RoCE v2" : "type unknown", " on ",
                                slot.netdev.empty() ? "no netdev" : slot.netdev)});
            }
          }
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

std::vector<jobenv::Pick> PodPicks(const std::vector<RdmaMatch>& rdma) {
  std::vector<jobenv::Pick> out;
  for (const RdmaMatch& m : rdma) {
    jobenv::Pick p;
    p.device = m.device;
    p.port = static_cast<uint32_t>(m.port);
    p.netdev = m.ifname;
    p.roce = true;  // The pod's interface is Ethernet: a VF or macvlan of a RoCE port.
    if (m.gid_index >= 0) p.gid_index = static_cast<uint32_t>(m.gid_index);
    p.ipv4 = m.ipv4;
    p.ipv6 = m.ipv6;
    p.other_ipv4_gids = m.other_ipv4_gids;
    out.push_back(std::move(p));
  }
  return out;
}

podrecord::PodRecord PodRecordOf(const std::vector<EnvInterface>& ifaces,
                                 const std::vector<RdmaMatch>& rdma) {
  podrecord::PodRecord r;
  for (const EnvInterface& in : ifaces) {
    podrecord::Interface i{in.ifname, {}, in.mac};
    for (const announce::Address& a : in.addresses) {
      i.addresses.push_back(absl::StrCat(IpToString(a.family, a.addr), "/", a.prefix_len));
    }
    r.interfaces.push_back(std::move(i));
  }
  r.ports = PodPicks(rdma);
  return r;
}

std::string RenderEnvFile(const std::vector<EnvInterface>& ifaces,
                          const std::vector<RdmaMatch>& rdma) {
  std::vector<std::string> names, ips;
  for (const EnvInterface& in : ifaces) {
    names.push_back(in.ifname);
    for (const announce::Address& a : in.addresses) ips.push_back(IpToString(a.family, a.addr));
  }
  std::string out = "# fabric-cni: the pod's fabric environment\n";
  jobenv::EnvMap env;
  if (rdma.empty()) {
    absl::StrAppend(&out, "# no RDMA device found behind ", absl::StrJoin(names, ", "), "\n");
  } else {
    jobenv::Request req;
    req.scope = PodPicks(rdma);
    req.socket_ifname = absl::StrJoin(names, ",");
    absl::StatusOr<jobenv::Result> r = jobenv::Render(req);
    if (!r.ok()) {
      absl::StrAppend(&out, "# ", r.status().message(), "\n");
    } else {
      for (const std::string& note : r->notes) absl::StrAppend(&out, "# ", note, "\n");
      env = std::move(r->job);
    }
  }
  if (!env.contains("NCCL_SOCKET_IFNAME")) {
    env["NCCL_SOCKET_IFNAME"] = absl::StrCat("=", absl::StrJoin(names, ","));
  }
  env["FABRIC_POD_IPS"] = absl::StrJoin(ips, ",");
  out += jobenv::FormatShell(env);
  return out;
}

}  // namespace fabric::cni
