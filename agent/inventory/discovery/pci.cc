// PCI functions: address, place under the root complex, ids, driver, PCIe link and SR-IOV.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "agent/common/strings.h"
#include "agent/inventory/discovery/discovery_internal.h"
#include "agent/inventory/discovery/parse.h"
#include "agent/inventory/discovery/pci_names.h"

namespace fabric::discovery_internal {

using namespace ::fabric::v1;  // NOLINT: the model's messages and enum values

namespace {

// PCIe link attributes. Conventional PCI functions have none, and the kernel prints
// "Unknown" speed and width 0 where the link status reads zero (VFs): both simply unknown.
void ReadLinks(const HostDir& fd, PciFunction* f) {
  Problems* problems = f->mutable_problems();
  struct Attr {
    const char* file;
    const char* field;
    PciLink* link;
    bool speed;
  } attrs[] = {
      {"current_link_speed", "current_link.speed_gts", f->mutable_current_link(), true},
      {"current_link_width", "current_link.width", f->mutable_current_link(), false},
      {"max_link_speed", "max_link.speed_gts", f->mutable_max_link(), true},
      {"max_link_width", "max_link.width", f->mutable_max_link(), false},
  };
  for (const Attr& a : attrs) {
    auto text = fd.ReadFile(a.file);
    if (!text.ok()) {
      if (!absl::IsNotFound(text.status())) {
        AddProblem(problems, a.field, JoinPath(fd.path(), a.file), text.status());
      }
      continue;
    }
    if (a.speed) {
      if (absl::StartsWith(Av(Trim(*text)), "Unknown")) continue;
      if (auto v = ParsePciLinkSpeed(*text); v.ok()) {
        a.link->set_speed_gts(*v);
      } else {
        AddProblem(problems, a.field, JoinPath(fd.path(), a.file), v.status());
      }
    } else if (auto v = ParseInt(*text); v.ok() && *v >= 0 && *v <= 32) {
      if (*v > 0) a.link->set_width(static_cast<uint32_t>(*v));
    } else {
      AddProblem(
          problems, a.field, JoinPath(fd.path(), a.file),
          v.ok() ? absl::StrCat("not a link width: ", *v) : std::string(v.status().message()));
    }
  }
  if (!f->current_link().has_speed_gts() && !f->current_link().has_width()) {
    f->clear_current_link();
  }
  if (!f->max_link().has_speed_gts() && !f->max_link().has_width()) f->clear_max_link();
}

void ReadSriov(const HostFs& sys, const std::string& dir, const HostDir& fd, PciFunction* f) {
  Problems* problems = f->mutable_problems();
  Sriov* sriov = f->mutable_sriov();
  if (fd.Exists("sriov_totalvfs")) {
    sriov->set_role(SRIOV_ROLE_PF);
    if (auto v = ReadField(fd, "sriov_totalvfs", "sriov.total_vfs", problems, ParseInt)) {
      sriov->set_total_vfs(static_cast<uint32_t>(*v));
    }
    if (auto v = ReadField(fd, "sriov_numvfs", "sriov.num_vfs", problems, ParseInt)) {
      sriov->set_num_vfs(static_cast<uint32_t>(*v));
    }
    auto entries = fd.ListDir("");
    if (!entries.ok()) {
      NoteTransient(problems, "sriov.vfs", dir, entries.status());
      return;
    }
    std::vector<std::pair<uint32_t, std::string>> vfs;
    for (const std::string& e : *entries) {
      uint32_t index;
      if (!absl::StartsWith(e, "virtfn") || !absl::SimpleAtoi(e.substr(6), &index)) continue;
      vfs.emplace_back(index, e);
    }
    std::sort(vfs.begin(), vfs.end());
    for (const auto& [index, entry] : vfs) {
      const std::string link = JoinPath(dir, entry);
      auto vf_dir = sys.RealPath(link);
      if (!vf_dir.ok()) {
        AddProblem(problems, "sriov.vfs", link, vf_dir.status());
        continue;
      }
      VirtualFunction* vf = sriov->add_vfs();
      vf->set_index(index);
      if (auto a = ParsePciAddress(Basename(*vf_dir)); a.ok()) vf->set_pci_address(*a);
      for (const char* sub : {"net", "infiniband"}) {
        const std::string path = JoinPath(*vf_dir, sub);
        auto n = sys.ListDir(path);
        if (!n.ok()) {
          NoteTransient(problems, "sriov.vfs", path, n.status());
          continue;
        }
        for (const std::string& name : *n) {
          if (sub[0] == 'n') {
            vf->add_netdevs(name);
          } else {
            vf->add_rdma_devices(name);
          }
        }
      }
    }
  } else if (fd.Exists("physfn")) {
    sriov->set_role(SRIOV_ROLE_VF);
    const std::string link = JoinPath(dir, "physfn");
    auto pf_dir = sys.RealPath(link);
    if (!pf_dir.ok()) {
      AddProblem(problems, "sriov.pf_pci_address", link, pf_dir.status());
      return;
    }
    if (auto a = ParsePciAddress(Basename(*pf_dir)); a.ok()) sriov->set_pf_pci_address(*a);
    // Our index is the virtfnN of the PF that points back at us.
    if (auto entries = sys.ListDir(*pf_dir); entries.ok()) {
      const std::string self = Basename(dir);
      for (const std::string& e : *entries) {
        uint32_t index;
        if (!absl::StartsWith(e, "virtfn") || !absl::SimpleAtoi(e.substr(6), &index)) continue;
        auto target = sys.ReadLink(JoinPath(*pf_dir, e));
        if (target.ok() && Basename(*target) == self) {
          sriov->set_vf_index(index);
          break;
        }
      }
    }
  } else {
    f->clear_sriov();
  }
}

}  // namespace

const PciFunction& PciReader::Read(const std::string& dir) {
  auto it = cache_.find(dir);
  if (it != cache_.end()) return it->second;
  const std::string base = Basename(dir);
  if (auto r = reuse_.find(base); r != reuse_.end()) return *r->second;  // Lives as long as we do.
  PciFunction& f = cache_[dir];
  Problems* problems = f.mutable_problems();
  if (auto addr = ParsePciAddress(base); addr.ok()) {
    f.set_address(*addr);
  } else {
    AddProblem(problems, "address", dir, addr.status());
  }
  // The path from the root complex ("pci0000:15") down to the parent bridge.
  std::vector<absl::string_view> parts = absl::StrSplit(Av(dir), '/');
  bool in_tree = false;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    if (!in_tree && absl::StartsWith(parts[i], "pci") && absl::StrContains(parts[i], ':')) {
      in_tree = true;
    }
    if (in_tree) f.add_path(std::string(parts[i]));
  }
  if (!in_tree) AddProblem(problems, "path", dir, "no PCI root complex above this function");

  auto d = sys_.OpenDir(dir);
  if (!d.ok()) {
    AddProblem(problems, "address", dir, d.status());
    return f;
  }
  const HostDir& fd = **d;
  auto hex4 = [](std::string_view s) -> absl::StatusOr<std::string> {
    auto v = ParseHex(s);
    if (!v.ok()) return v.status();
    if (*v > 0xffff) return absl::InvalidArgumentError("not a 16-bit id");
    return absl::StrFormat("%04x", *v);
  };
  if (auto v = ReadField(fd, "vendor", "vendor_id", problems, hex4)) f.set_vendor_id(*v);
  if (auto v = ReadField(fd, "device", "device_id", problems, hex4)) f.set_device_id(*v);
  // Names for the tables; the IDs were checked above (four hex digits).
  uint32_t vendor = 0, device = 0;
  if (absl::SimpleHexAtoi(f.vendor_id(), &vendor)) {
    f.set_vendor_name(DefaultPciNames().Vendor(static_cast<uint16_t>(vendor)));
    if (absl::SimpleHexAtoi(f.device_id(), &device)) {
      f.set_device_name(
          DefaultPciNames().Device(static_cast<uint16_t>(vendor), static_cast<uint16_t>(device)));
    }
  }
  if (auto v = ReadField(fd, "class", "class_code", problems, ParseHex)) {
    f.set_class_code(static_cast<uint32_t>(*v & 0xffffff));
  }
  if (auto v = ReadField(fd, "numa_node", "numa_node", problems, ParseInt)) {
    if (*v >= 0) f.set_numa_node(static_cast<int32_t>(*v));  // -1: no affinity
  }
  if (auto link = sys_.ReadLink(JoinPath(dir, "driver")); link.ok()) {
    f.set_driver(Basename(*link));
  } else if (!absl::IsNotFound(link.status())) {
    AddProblem(problems, "driver", JoinPath(dir, "driver"), link.status());
  }
  const bool bridge = f.has_class_code() && (f.class_code() >> 8) == 0x0604;
  if (!bridge) ReadLinks(fd, &f);
  ReadSriov(sys_, dir, fd, &f);
  return f;
}

}  // namespace fabric::discovery_internal
