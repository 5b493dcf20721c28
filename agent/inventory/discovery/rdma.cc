// RDMA devices: their uverbs and umad nodes, attributes, PCI function or parent netdev, and ports.
// The ports' GID tables are read afterwards, in parallel (gids.cc).
#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "agent/common/natural_order.h"
#include "agent/inventory/discovery/discovery_internal.h"
#include "agent/inventory/discovery/parse.h"

namespace fabric::discovery_internal {

using namespace ::fabric::v1;  // NOLINT: the model's messages and enum values

RdmaNodes ReadRdmaNodes(const HostFs& sys, Host* host) {
  RdmaNodes nodes;
  // No class directory: the module is not loaded, and devices simply have no such node.
  if (auto names = sys.ListDir("class/infiniband_verbs"); names.ok()) {
    for (const std::string& n : *names) {
      if (!absl::StartsWith(n, "uverbs")) continue;
      const std::string path = absl::StrCat("class/infiniband_verbs/", n, "/ibdev");
      if (auto ibdev = sys.ReadFile(path); ibdev.ok()) {
        nodes.uverbs[std::string(Trim(*ibdev))] = n;
      } else {
        NoteTransient(host->mutable_problems(), "uverbs_device", path, ibdev.status());
      }
    }
  } else {
    NoteTransient(host->mutable_problems(), "uverbs_device", "class/infiniband_verbs",
                  names.status());
  }
  if (auto names = sys.ListDir("class/infiniband_mad"); names.ok()) {
    for (const std::string& n : *names) {
      if (!absl::StartsWith(n, "umad")) continue;  // issmN are the SM's nodes
      const std::string dir = absl::StrCat("class/infiniband_mad/", n);
      auto ibdev = sys.ReadFile(dir + "/ibdev");
      auto port = ibdev.ok() ? sys.ReadFile(dir + "/port") : ibdev.status();
      auto number = port.ok() ? ParseInt(*port) : port.status();
      if (number.ok() && *number > 0 && *number <= 0xffffffff) {
        nodes.umad[{std::string(Trim(*ibdev)), static_cast<uint32_t>(*number)}] = n;
      } else if (!port.ok()) {
        NoteTransient(host->mutable_problems(), "umad_device", dir, port.status());
      }
    }
  } else {
    NoteTransient(host->mutable_problems(), "umad_device", "class/infiniband_mad", names.status());
  }
  return nodes;
}

namespace {

void ReadPort(const HostFs& sys, const std::string& dev_dir, uint32_t number, Port* port,
              PortDirs* port_dirs) {
  port->set_number(number);
  Problems* problems = port->mutable_problems();
  const std::string dir = absl::StrCat(dev_dir, "/ports/", number);
  auto d = sys.OpenDir(dir);
  if (!d.ok()) {
    AddProblem(problems, "number", dir, d.status());
    return;
  }
  const HostDir& pd = **d;
  if (auto v = ReadField(pd, "state", "state", problems, ParsePortState)) port->set_state(*v);
  if (auto v = ReadField(pd, "phys_state", "phys_state", problems, ParsePhysState)) {
    port->set_phys_state(*v);
  }
  if (auto text = pd.ReadFile("rate"); text.ok()) {
    port->set_rate(std::string(Trim(*text)));
    if (auto v = ParseRateGbps(*text); v.ok()) {
      port->set_rate_gbps(*v);
    } else {
      AddProblem(problems, "rate_gbps", JoinPath(dir, "rate"), v.status());
    }
  } else {
    AddProblem(problems, "rate", JoinPath(dir, "rate"), text.status());
  }
  if (auto v = ReadField(pd, "link_layer", "link_layer", problems, ParseLinkLayer)) {
    port->set_link_layer(*v);
  }
  auto u32 = [](std::string_view s) -> absl::StatusOr<uint32_t> {
    auto v = ParseHex(s);
    if (!v.ok()) return v.status();
    if (*v > 0xffffffffu) return absl::InvalidArgumentError("out of range");
    return static_cast<uint32_t>(*v);
  };
  if (auto v = ReadField(pd, "lid", "lid", problems, u32)) port->set_lid(*v);
  if (auto v = ReadField(pd, "sm_lid", "sm_lid", problems, u32)) port->set_sm_lid(*v);
  port_dirs->emplace(port, std::make_pair(dir, std::move(*d)));  // read by ReadGidTables
}

}  // namespace

void ReadRdmaDevice(const HostFs& sys, const std::string& name, const RdmaNodes& nodes,
                    PciReader* pci, Host* host, RdmaScan* scan) {
  RdmaDevice* dev = host->add_rdma_devices();
  dev->set_name(name);
  Problems* problems = dev->mutable_problems();
  const std::string link = absl::StrCat("class/infiniband/", name);
  auto real = sys.RealPath(link);
  if (!real.ok()) {
    AddProblem(problems, "name", link, real.status());
    return;
  }
  auto d = sys.OpenDir(*real);
  if (!d.ok()) {
    AddProblem(problems, "name", *real, d.status());
    return;
  }
  const HostDir& dd = **d;
  if (auto v = ReadField(dd, "node_guid", "node_guid", problems, ParseGuid)) {
    dev->set_node_guid(*v);
  }
  // A core attribute of every device; NCCL 2.30.7 orders its HCAs by it.
  if (dd.Exists("sys_image_guid")) {
    if (auto v = ReadField(dd, "sys_image_guid", "sys_image_guid", problems, ParseGuid)) {
      dev->set_sys_image_guid(*v);
    }
  }
  // Software devices (rxe, siw) have no hca_type and an empty fw_ver: not a problem there.
  const bool software = !dd.Exists("device");
  if (software) {
    if (auto v = dd.ReadFile("fw_ver"); v.ok()) {
      dev->set_fw_ver(std::string(Trim(*v)));
    } else {
      NoteTransient(problems, "fw_ver", JoinPath(*real, "fw_ver"), v.status());
    }
    if (auto v = dd.ReadFile("hca_type"); v.ok()) {
      dev->set_hca_type(std::string(Trim(*v)));
    } else {
      NoteTransient(problems, "hca_type", JoinPath(*real, "hca_type"), v.status());
    }
  } else {
    if (auto v = ReadField(dd, "fw_ver", "fw_ver", problems, ParseText)) dev->set_fw_ver(*v);
    if (auto v = ReadField(dd, "hca_type", "hca_type", problems, ParseText)) {
      dev->set_hca_type(*v);
    }
  }
  if (auto v = ReadField(dd, "node_type", "node_type", problems, ParseNodeType)) {
    dev->set_node_type(*v);
  }
  if (auto it = nodes.uverbs.find(name); it != nodes.uverbs.end()) {
    dev->set_uverbs_device(it->second);
  }

  // The PCI function, or for a software device (rxe, siw) the netdev it runs on.
  std::string pci_dir;
  const std::string device_link = JoinPath(*real, "device");
  if (auto pci_real = sys.RealPath(device_link); pci_real.ok()) {
    if (ParsePciAddress(Basename(*pci_real)).ok()) {
      pci_dir = *pci_real;
      *dev->mutable_pci() = pci->Read(pci_dir);
    }
  } else if (IsTransientReadError(pci_real.status()) || sys.ReadLink(device_link).ok()) {
    AddProblem(problems, "pci", device_link,
               pci_real.status());  // dangling, or unreadable now
  }
  if (pci_dir.empty()) {
    if (auto parent = dd.ReadFile("parent"); parent.ok()) {
      dev->set_parent_netdev(std::string(Trim(*parent)));
    } else {
      NoteTransient(problems, "parent_netdev", JoinPath(*real, "parent"), parent.status());
    }
  }
  scan->pci_dirs[name] = pci_dir;

  auto ports = dd.ListDir("ports");
  if (!ports.ok()) {
    AddProblem(problems, "ports", JoinPath(*real, "ports"), ports.status());
    return;
  }
  std::vector<uint32_t> numbers;
  for (const std::string& p : *ports) {
    uint32_t n;
    if (absl::SimpleAtoi(p, &n)) numbers.push_back(n);
  }
  std::sort(numbers.begin(), numbers.end());
  for (uint32_t n : numbers) {
    Port* port = dev->add_ports();
    ReadPort(sys, *real, n, port, &scan->port_dirs);
    if (auto it = nodes.umad.find({name, n}); it != nodes.umad.end()) {
      port->set_umad_device(it->second);
    }
  }
}

RdmaScan ReadRdmaDevices(const HostFs& sys, PciReader* pci, Host* host) {
  RdmaScan scan;
  const RdmaNodes nodes = ReadRdmaNodes(sys, host);
  auto names = sys.ListDir("class/infiniband");
  if (!names.ok()) {
    // No ib_core loaded: a host without RDMA, which callers report; not a discovery failure.
    if (!absl::IsNotFound(names.status())) {
      AddProblem(host->mutable_problems(), "rdma_devices", "class/infiniband", names.status());
    }
    return scan;
  }
  std::sort(names->begin(), names->end(), NaturalLess);
  for (const std::string& name : *names) ReadRdmaDevice(sys, name, nodes, pci, host, &scan);
  return scan;
}

}  // namespace fabric::discovery_internal
