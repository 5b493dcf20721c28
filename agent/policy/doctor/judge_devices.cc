// Devices and GIDs: what NCCL's net_ib will find and open here, and the GID it will put on the
// wire for each port (nccl_gid.h), judged against this network namespace's own addresses.
#include <errno.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/common/errno.h"
#include "agent/common/excerpt.h"
#include "agent/policy/doctor/judge_internal.h"
#include "agent/policy/doctor/nccl_gid.h"
#include "agent/rdma/gid.h"

namespace fabric::doctor::judge_internal {
namespace {

constexpr char kRequestDevices[] =
    "give the container the RDMA devices: the device plugin's resource (rdma/...), or "
    "--device /dev/infiniband/uverbsN and --device /dev/infiniband/rdma_cm";

const NodeOpen* NodeOf(const Ctx& c, const std::string& name) {
  if (!c.f.dev_nodes) return nullptr;
  for (const NodeOpen& n : *c.f.dev_nodes) {
    if (n.name == name) return &n;
  }
  return nullptr;
}

const VerbsOpen* VerbsOf(const Ctx& c, const std::string& device) {
  if (!c.f.verbs) return nullptr;
  for (const VerbsOpen& v : *c.f.verbs) {
    if (v.device == device) return &v;
  }
  return nullptr;
}

std::string WhyRefused(int err) {
  switch (err) {
    case EPERM:
      return "the container's device rules refuse it (cgroup)";
    case EACCES:
      return "its mode does not let this user open it";
    case ENXIO:
    case ENODEV:
      return "no driver answers behind its device numbers (made by hand, or its device is gone)";
    default:
      return ErrnoText(err);
  }
}

// /dev/infiniband as a whole. Returns false when NCCL can open no device at all.
bool JudgeDevNodes(Ctx& c) {
  const DoctorFacts& f = c.f;
  if (f.dev_missing) {
    Add(c, "devices", "dev_infiniband", v1::SEVERITY_CRITICAL, "/dev/infiniband",
        "no /dev/infiniband here: libibverbs opens no device and NCCL uses sockets")
        ->set_fix(kRequestDevices);
    c.Socket("no /dev/infiniband in this container");
    return false;
  }
  if (!f.dev_error.empty()) {
    Add(c, "devices", "dev_infiniband", v1::SEVERITY_UNKNOWN, "/dev/infiniband",
        absl::StrCat("/dev/infiniband cannot be listed: ", f.dev_error));
    return true;
  }
  if (!f.dev_nodes) return true;
  int uverbs = 0, refused = 0;
  bool rdma_cm = false;
  for (const NodeOpen& n : *f.dev_nodes) {
    const bool is_cm = n.name == "rdma_cm";
    rdma_cm |= is_cm && n.is_char && n.error == 0;
    if (!is_cm) ++uverbs;
    if (!n.is_char) {
      Add(c, "devices", "dev_node", v1::SEVERITY_CRITICAL, n.name,
          absl::StrCat("/dev/infiniband/", n.name, " is not a character device"))
          ->set_fix("mount the host's device node, not a copy of the file");
      ++refused;
    } else if (n.error != 0) {
      v1::DoctorCheck* k =
          Add(c, "devices", "dev_node", v1::SEVERITY_CRITICAL, n.name,
              absl::StrCat("/dev/infiniband/", n.name, " does not open: ", WhyRefused(n.error)));
      k->add_evidence(absl::StrCat("open(O_RDWR): ", ErrnoText(n.error)));
      k->set_fix(n.error == EACCES ? "run as a user the node's group admits (rdma)"
                                   : kRequestDevices);
      ++refused;
    }
  }
  if (uverbs == 0) {
    Add(c, "devices", "dev_infiniband", v1::SEVERITY_CRITICAL, "/dev/infiniband",
        "/dev/infiniband has no uverbs node: libibverbs opens no device and NCCL uses sockets")
        ->set_fix(kRequestDevices);
    c.Socket("no uverbs device node in /dev/infiniband");
    return false;
  }
  if (!rdma_cm) {
    Add(c, "devices", "rdma_cm", v1::SEVERITY_WARNING, "/dev/infiniband/rdma_cm",
        "no usable /dev/infiniband/rdma_cm: NCCL does not need it, but UCX's rdmacm, NIXL and "
        "Mooncake connect through it")
        ->set_fix("add --device /dev/infiniband/rdma_cm (the device plugin's answer has it)");
  }
  if (refused == 0) {
    Add(c, "devices", "dev_infiniband", v1::SEVERITY_OK, "/dev/infiniband",
        absl::StrCat(uverbs, " uverbs node", uverbs == 1 ? "" : "s", " open here"));
  }
  return true;
}

// Whether NCCL can open `d` here, and if not why.
std::string Unopenable(const Ctx& c, const v1::RdmaDevice& d) {
  if (c.f.dev_nodes && !d.uverbs_device().empty()) {
    const NodeOpen* n = NodeOf(c, d.uverbs_device());
    if (n == nullptr) return absl::StrCat("/dev/infiniband/", d.uverbs_device(), " is not here");
    if (!n->is_char || n->error != 0) {
      return absl::StrCat("/dev/infiniband/", d.uverbs_device(), " does not open");
    }
  }
  if (const VerbsOpen* v = VerbsOf(c, d.name()); v != nullptr && !v->error.empty()) {
    return v->error;
  }
  return "";
}

v1::PortState StateOf(const Ctx& c, const v1::RdmaDevice& d, const v1::Port& p) {
  if (const VerbsOpen* v = VerbsOf(c, d.name()); v != nullptr && v->error.empty()) {
    for (const VerbsPort& vp : v->ports) {
      if (vp.number == static_cast<int>(p.number())) return vp.state;
    }
  }
  return p.state();
}

// One device list of a consumer against the host: syntax, names that match nothing, prefixes.
void JudgeList(Ctx& c, const char* var, const DeviceList& list, bool nccl_syntax) {
  const v1::Host& host = *c.f.host;
  std::vector<std::string> names;
  for (const v1::RdmaDevice& d : host.rdma_devices()) names.push_back(d.name());
  if (!list.problems.empty()) {
    v1::DoctorCheck* k = Add(c, "devices", "hca_syntax", v1::SEVERITY_WARNING, var,
                             absl::StrCat(var, " does not read as it looks"));
    for (const std::string& p : list.problems) k->add_evidence(p);
    k->set_fix(absl::StrCat("write ", var, " as the agent renders it: `fabricctl env`"));
  }
  if (list.exclude || list.all) return;
  std::vector<std::string> unknown;
  size_t matched = 0;
  // Each entry against each port, the entry never copied: linear in the list (bounded by its
  // parser), not quadratic.
  for (const ListEntry& e : list.entries) {
    bool any = false;
    for (const v1::RdmaDevice& d : host.rdma_devices()) {
      for (const v1::Port& p : d.ports())
        any |= EntrySelects(list, e, d.name(), static_cast<int>(p.number()));
    }
    if (any) {
      ++matched;
    } else {
      unknown.push_back(EntryText(e));
    }
  }
  if (!unknown.empty()) {
    const bool none = matched == 0;
    v1::DoctorCheck* k =
        Add(c, "devices", "hca_unknown", none ? v1::SEVERITY_CRITICAL : v1::SEVERITY_WARNING, var,
            absl::StrCat(var, " names ", absl::StrJoin(unknown, ", "),
                         none ? ", which match no RDMA port here" : ", not here"));
    k->add_evidence(
        absl::StrCat("RDMA devices here: ", names.empty() ? "none" : absl::StrJoin(names, ", ")));
    k->set_fix(
        absl::StrCat("name the devices of this host or container (`fabricctl env` "
                     "renders them); names differ between hosts and after a reboot"));
    if (none && nccl_syntax && std::string(var) == "NCCL_IB_HCA") {
      c.Socket(absl::StrCat("NCCL_IB_HCA matches no RDMA port here"));
    }
  }
  if (!nccl_syntax) return;
  std::vector<std::string> surprises = PrefixSurprises(list, names);
  if (!surprises.empty()) {
    v1::DoctorCheck* k =
        Add(c, "devices", "hca_prefix", v1::SEVERITY_WARNING, var,
            absl::StrCat(var, " without '=' matches by prefix: it takes more devices than named"));
    for (const std::string& s : surprises) k->add_evidence(s);
    k->set_fix(absl::StrCat(
        "start the value with '=' to match exactly: ", var,
        "==", list.entries.empty() ? "" : EntryText({list.entries.front().name}), "..."));
  }
}

// The other libraries' GID index variables: one that differs from NCCL's pick puts another
// address on the wire for the same job (UCX/NIXL, NVSHMEM, Mooncake, UCCL).
void ConsumerGids(Ctx& c, const std::string& subject, int pick,
                  const std::vector<rdma::GidSlot>& table) {
  for (const char* var :
       {"UCX_IB_GID_INDEX", "NVSHMEM_IB_GID_INDEX", "MC_GID_INDEX", "UCCL_IB_GID_INDEX"}) {
    const std::string* v = c.Var(var);
    if (v == nullptr || v->empty()) continue;
    char* end = nullptr;
    const long n = std::strtol(v->c_str(), &end, 10);
    if (*end != '\0' || n == pick) continue;
    const auto slot = std::find_if(table.begin(), table.end(),
                                   [&](const rdma::GidSlot& s) { return s.index == n; });
    v1::DoctorCheck* k =
        Add(c, "gids", "gid_consumers_differ", v1::SEVERITY_WARNING, subject,
            absl::StrCat(var, "=", Excerpt(*v), " but NCCL uses GID index ", pick,
                         ": the libraries of one job put different addresses on the wire"));
    k->add_evidence(slot == table.end()
                        ? absl::StrCat("index ", Excerpt(*v), " is an empty slot")
                        : absl::StrCat("index ", n, " holds ", rdma::FormatGid(slot->gid)));
    k->set_fix(absl::StrCat("set ", var, "=", pick, " (`fabricctl env` renders all of them)"));
  }
}

}  // namespace

void JudgeDevices(Ctx& c) {
  const DoctorFacts& f = c.f;
  if (const std::string* v = c.Var("NCCL_IB_HCA")) {
    c.hca = ParseNcclList(*v);
    c.hca_set = true;
  }
  const bool nodes_ok = JudgeDevNodes(c);
  if (f.libibverbs && !*f.libibverbs) {
    Add(c, "devices", "libibverbs", v1::SEVERITY_CRITICAL, "libibverbs.so.1",
        "libibverbs cannot be loaded here: NCCL's net_ib finds no device")
        ->add_evidence(f.libibverbs_detail);
    c.r->mutable_checks()->rbegin()->set_fix(
        "install rdma-core's libibverbs1 and the provider (ibverbs-providers) in the image");
    c.Socket("libibverbs is not in this container");
  } else if (f.libibverbs) {
    Add(c, "devices", "libibverbs", v1::SEVERITY_OK, "libibverbs.so.1", f.libibverbs_detail);
  }
  if (!f.host) {
    Add(c, "devices", "sysfs", v1::SEVERITY_UNKNOWN, "/sys/class/infiniband",
        absl::StrCat("the RDMA devices cannot be read here: ", f.host_error))
        ->set_fix("mount /sys (read-only) in the container: libibverbs finds devices there too");
    c.unjudged_why = "the RDMA devices cannot be read here";
    return;
  }
  const v1::Host& host = *f.host;
  if (host.rdma_devices().empty()) {
    Add(c, "devices", "no_rdma_device", v1::SEVERITY_CRITICAL, "/sys/class/infiniband",
        "no RDMA device here: NCCL uses sockets")
        ->set_fix("load the NIC's RDMA driver, or run where the RDMA devices are visible");
    c.Socket("no RDMA device here");
    return;
  }
  if (c.hca_set) JudgeList(c, "NCCL_IB_HCA", c.hca, true);
  if (const std::string* v = c.Var("NVSHMEM_HCA_LIST")) {
    JudgeList(c, "NVSHMEM_HCA_LIST", ParseNcclList(*v), true);
  }
  if (const std::string* v = c.Var("UCX_NET_DEVICES")) {
    JudgeList(c, "UCX_NET_DEVICES", ParseUcxDevices(*v), false);
  }
  // The ports NCCL takes: selected by NCCL_IB_HCA, openable, ACTIVE (net_ib skips the others).
  std::vector<std::string> down, closed;
  for (const v1::RdmaDevice& d : host.rdma_devices()) {
    std::vector<const v1::Port*> selected;
    for (const v1::Port& p : d.ports()) {
      if (!c.hca_set || Selects(c.hca, d.name(), static_cast<int>(p.number())))
        selected.push_back(&p);
    }
    if (selected.empty()) continue;
    if (std::string why = Unopenable(c, d); !why.empty()) {
      closed.push_back(absl::StrCat(d.name(), ": ", why));
      continue;
    }
    for (const v1::Port* p : selected) {
      const v1::PortState s = StateOf(c, d, *p);
      if (s != v1::PORT_STATE_ACTIVE) {
        down.push_back(absl::StrCat(d.name(), ":", p->number(), " is ",
                                    s == v1::PORT_STATE_UNSPECIFIED
                                        ? "in an unknown state"
                                        : absl::AsciiStrToLower(v1::PortState_Name(s).substr(11))));
        continue;
      }
      c.nccl_ports.push_back({d.name(), static_cast<int>(p->number())});
    }
  }
  const bool none = c.nccl_ports.empty();
  if (!closed.empty() && nodes_ok) {
    v1::DoctorCheck* k =
        Add(c, "devices", "device_open", none ? v1::SEVERITY_CRITICAL : v1::SEVERITY_WARNING, "",
            absl::StrCat(closed.size(), " selected device", closed.size() == 1 ? "" : "s",
                         " cannot be opened here"));
    for (const std::string& s : closed) k->add_evidence(s);
    k->set_fix(c.hca_set ? "name only the devices given to this container in NCCL_IB_HCA"
                         : kRequestDevices);
  }
  if (!down.empty()) {
    v1::DoctorCheck* k =
        Add(c, "devices", "port_state", none ? v1::SEVERITY_CRITICAL : v1::SEVERITY_WARNING, "",
            "selected ports that are not ACTIVE: NCCL skips them");
    for (const std::string& s : down) k->add_evidence(s);
    k->set_fix("check the cable and the switch port (`fabricctl health`)");
  }
  if (none) {
    c.Socket(!closed.empty() ? "no selected RDMA device can be opened here"
                             : "no selected RDMA port is ACTIVE");
  } else {
    std::vector<std::string> ports;
    for (const DevicePort& p : c.nccl_ports) ports.push_back(absl::StrCat(p.device, ":", p.port));
    Add(c, "devices", "nccl_ports", v1::SEVERITY_OK, "",
        absl::StrCat("NCCL will open ", absl::StrJoin(ports, ", ")));
  }
}

void JudgeGids(Ctx& c) {
  if (!c.f.host || c.nccl_ports.empty()) return;
  const NcclGidRule rule = ReadNcclGidRule([&](const char* name) -> const char* {
    const std::string* v = c.Var(name);
    return v == nullptr ? nullptr : v->c_str();
  });
  if (!rule.problems.empty()) {
    v1::DoctorCheck* k = Add(c, "gids", "gid_rule", v1::SEVERITY_WARNING, "NCCL_IB_GID_INDEX",
                             "NCCL reads the GID variables differently from how they look");
    for (const std::string& p : rule.problems) k->add_evidence(p);
    k->set_fix("write the index in decimal, the family as AF_INET or AF_INET6");
  }
  std::set<std::string> own;
  if (c.f.interfaces) {
    for (const Interface& i : *c.f.interfaces) {
      own.insert(i.ipv4.begin(), i.ipv4.end());
      own.insert(i.ipv6.begin(), i.ipv6.end());
    }
  }
  for (const v1::RdmaDevice& d : c.f.host->rdma_devices()) {
    for (const v1::Port& p : d.ports()) {
      const bool used = std::any_of(c.nccl_ports.begin(), c.nccl_ports.end(), [&](const auto& u) {
        return u.device == d.name() && u.port == static_cast<int>(p.number());
      });
      if (!used || p.link_layer() != v1::LINK_LAYER_ETHERNET) continue;
      const std::string subject = absl::StrCat(d.name(), ":", p.number());
      const std::vector<rdma::GidSlot> table = SlotsOf(p);
      int len = 0;
      for (const rdma::GidSlot& s : table) len = std::max(len, s.index + 1);
      if (const VerbsOpen* v = VerbsOf(c, d.name())) {
        for (const VerbsPort& vp : v->ports) {
          if (vp.number == static_cast<int>(p.number()) && vp.gid_table_len > 0)
            len = vp.gid_table_len;
        }
      }
      const int pick = NcclGidPick(table, len, rule);
      const auto slot = std::find_if(table.begin(), table.end(),
                                     [&](const rdma::GidSlot& s) { return s.index == pick; });
      ConsumerGids(c, subject, pick, table);
      // The index of this namespace's own address, to offer as the fix.
      std::string fix =
          "set NCCL_IB_GID_INDEX to the RoCE v2 GID of this container's address (`fabricctl "
          "env` renders it)";
      for (const rdma::GidSlot& s : table) {
        auto v4 = rdma::GidIpv4(s.gid);
        if (s.kind == rdma::GidKind::kRoceV2 && v4 && own.count(*v4)) {
          fix = absl::StrCat("set NCCL_IB_GID_INDEX=", s.index,
                             ": the RoCE v2 GID of this namespace's address ", *v4);
          break;
        }
      }
      if (slot == table.end()) {
        Add(c, "gids", "gid_empty", v1::SEVERITY_CRITICAL, subject,
            absl::StrCat("NCCL uses GID index ", pick, ", an empty slot: its QPs do not connect"))
            ->set_fix(fix);
        continue;
      }
      const std::string text = rdma::FormatGid(slot->gid);
      const auto v4 = rdma::GidIpv4(slot->gid);
      const auto v6 = rdma::GidIpv6(slot->gid);
      const std::string addr = v4 ? *v4 : v6.value_or(text);
      if (rdma::IsLinkLocalGid(slot->gid)) {
        Add(c, "gids", "gid_link_local", v1::SEVERITY_CRITICAL, subject,
            absl::StrCat("NCCL uses GID index ", pick, ", the link-local ", text,
                         ": RoCE v2 does not route it off the link"))
            ->set_fix(fix);
        continue;
      }
      if (slot->kind != rdma::GidKind::kRoceV2) {
        Add(c, "gids", "gid_roce_v1", v1::SEVERITY_WARNING, subject,
            absl::StrCat("NCCL uses GID index ", pick, " (", addr,
                         "), not RoCE v2: RoCE v1 stays in one L2 domain"))
            ->set_fix(fix);
        continue;
      }
      if (c.f.interfaces && !own.count(addr)) {
        v1::DoctorCheck* k =
            Add(c, "gids", "gid_not_ours", v1::SEVERITY_CRITICAL, subject,
                absl::StrCat("NCCL uses GID index ", pick, " (", addr,
                             "), an address this network namespace does not own (the host's or "
                             "another pod's): peers answer someone else"));
        std::vector<std::string> mine(own.begin(), own.end());
        k->add_evidence(
            absl::StrCat("addresses here: ", mine.empty() ? "none" : absl::StrJoin(mine, ", ")));
        k->set_fix(fix);
        continue;
      }
      Add(c, "gids", "gid", v1::SEVERITY_OK, subject,
          absl::StrCat("GID index ", pick, " (RoCE v2, ", addr,
                       c.f.interfaces ? ", this namespace's own)" : ")"));
    }
  }
}

}  // namespace fabric::doctor::judge_internal
