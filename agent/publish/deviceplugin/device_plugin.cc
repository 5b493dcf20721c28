#include "agent/publish/deviceplugin/device_plugin.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/common/excerpt.h"
#include "agent/common/natural_order.h"
#include "agent/common/strings.h"
#include "agent/inventory/topology/topology.h"
#include "agent/policy/health/health.h"
#include "agent/policy/rails/rails.h"
#include "agent/policy/select/env.h"
#include "agent/publish/cdi/cdi_spec.h"
#include "agent/publish/deviceplugin/resource_section.h"
#include "agent/publish/hostfile/host_file.h"

namespace fabric::deviceplugin {
namespace {

using v1::RdmaDevice;

bool In(const google::protobuf::RepeatedPtrField<std::string>& list, std::string_view v) {
  return std::any_of(list.begin(), list.end(),
                     [&](const std::string& x) { return absl::EqualsIgnoreCase(x, Av(v)); });
}

// What the selectors read of the host beyond the device itself, built once per host.
class Matcher {
 public:
  Matcher(const v1::Host& host, const v1::SelectionPolicy& policy) {
    default_route_.insert(host.default_route_netdevs().begin(), host.default_route_netdevs().end());
    for (const v1::Netdev& n : host.netdevs()) {
      if (n.default_route()) default_route_.insert(n.name());
    }
    for (const PortRail& pr : PortRails(host, policy)) {
      for (const v1::Rail* r : {pr.expected, pr.heard}) {
        if (r != nullptr) rails_[pr.device->name()].insert(r->name());
      }
    }
  }

  bool Matches(const v1::RdmaSelectors& sel, const RdmaDevice& dev) const {
    const v1::PciFunction& pci = dev.pci();
    if (!sel.vendors().empty() && !In(sel.vendors(), pci.vendor_id())) return false;
    if (!sel.device_ids().empty() && !In(sel.device_ids(), pci.device_id())) return false;
    if (!sel.drivers().empty() && !In(sel.drivers(), pci.driver())) return false;
    if (!sel.rdma_devices().empty() && !In(sel.rdma_devices(), dev.name())) return false;
    std::vector<std::string> netdevs;
    for (const v1::Port& p : dev.ports()) {
      if (!p.netdev().empty()) netdevs.push_back(p.netdev());
    }
    if (!dev.parent_netdev().empty()) netdevs.push_back(dev.parent_netdev());
    if (!sel.if_names().empty() &&
        std::none_of(netdevs.begin(), netdevs.end(),
                     [&](const std::string& n) { return In(sel.if_names(), n); })) {
      return false;
    }
    if (!sel.link_types().empty() &&
        std::none_of(dev.ports().begin(), dev.ports().end(), [&](const v1::Port& p) {
          return (p.link_layer() == v1::LINK_LAYER_ETHERNET &&
                  (In(sel.link_types(), "ethernet") || In(sel.link_types(), "ether"))) ||
                 (p.link_layer() == v1::LINK_LAYER_INFINIBAND &&
                  In(sel.link_types(), "infiniband"));
        })) {
      return false;
    }
    if (!sel.rails().empty()) {
      auto it = rails_.find(dev.name());
      if (it == rails_.end() ||
          std::none_of(it->second.begin(), it->second.end(),
                       [&](const std::string& r) { return In(sel.rails(), r); })) {
        return false;
      }
    }
    if (!sel.role().empty()) {
      const bool front = std::any_of(netdevs.begin(), netdevs.end(),
                                     [&](const std::string& n) { return default_route_.count(n); });
      if ((sel.role() == "front-end") != front) return false;
    }
    if (!sel.function().empty()) {
      const bool vf = pci.sriov().role() == v1::SRIOV_ROLE_VF;
      if ((sel.function() == "vf") != vf) return false;
    }
    return true;
  }

 private:
  std::set<std::string> default_route_;
  std::map<std::string, std::set<std::string>> rails_;  // RDMA device -> its ports' rails.
};

const RdmaDevice* FindDevice(const v1::Host& host, std::string_view name) {
  for (const RdmaDevice& d : host.rdma_devices()) {
    if (d.name() == name) return &d;
  }
  return nullptr;
}

void SetNuma(const std::set<int64_t>& nodes, v1beta1::Device* d) {
  for (int64_t n : nodes) d->mutable_topology()->add_nodes()->set_id(n);
}

std::set<int64_t> NumaOf(const RdmaDevice& dev) {
  if (dev.has_pci() && dev.pci().has_numa_node()) return {dev.pci().numa_node()};
  return {};
}

void SortNatural(std::vector<std::string>* v) {
  std::sort(v->begin(), v->end(),
            [](const std::string& a, const std::string& b) { return NaturalLess(a, b); });
  v->erase(std::unique(v->begin(), v->end()), v->end());
}

// The PCIe switch a NIC hangs under (its root port's child), else its root complex: NICs that
// share it reach each other and their GPUs without crossing the CPU.
std::string SwitchOf(const RdmaDevice* dev) {
  if (dev == nullptr || !dev->has_pci()) return "";
  const auto& path = dev->pci().path();
  if (path.size() >= 3) return path[2];
  return path.empty() ? "" : path[0];
}

// The bounds of device_plugin.h, over every container before any is answered.
template <typename Containers, typename Count>
absl::Status CheckBounds(const char* call, const Containers& containers, Count count) {
  if (containers.size() > kMaxContainerRequests) {
    return absl::InvalidArgumentError(absl::StrCat(call, ": ", containers.size(),
                                                   " container requests, more than ",
                                                   kMaxContainerRequests, " in one call"));
  }
  for (int i = 0; i < containers.size(); ++i) {
    if (const int n = count(containers[i]); n > kMaxContainerDevices) {
      return absl::InvalidArgumentError(absl::StrCat(call, ": container request ", i, " names ", n,
                                                     " device IDs, more than ",
                                                     kMaxContainerDevices));
    }
  }
  return absl::OkStatus();
}

}  // namespace

static_assert(kMaxContainerDevices >= static_cast<int>(kMaxSharedCount),
              "a container may ask for every device a resource lists");

bool Matches(const v1::Host& host, const v1::SelectionPolicy& policy, const v1::RdmaSelectors& sel,
             const RdmaDevice& dev) {
  return Matcher(host, policy).Matches(sel, dev);
}

std::string Unhealthy(const RdmaDevice& dev, const v1::Health& health) {
  if (dev.ports().empty()) return "no port";
  for (const v1::Port& p : dev.ports()) {
    if (p.state() != v1::PORT_STATE_ACTIVE) {
      return absl::StrCat("port ", p.number(), " is ", v1::PortState_Name(p.state()));
    }
  }
  if (dev.uverbs_device().empty()) return "no uverbs node";
  for (const v1::Finding& f : health.findings()) {
    if (f.severity() == v1::SEVERITY_CRITICAL && NamesDevice(f, dev)) {
      return absl::StrCat(f.check(), ": ", f.message());
    }
  }
  return "";
}

Plan PlanResources(const v1::Host& host, const v1::SelectionPolicy& policy,
                   const v1::DevicePluginConfig& config, const v1::Health& health) {
  const Matcher matcher(host, policy);
  Plan plan;
  std::map<std::string, std::vector<std::string>> claims;  // NIC -> resources matching it.
  std::vector<std::vector<std::string>> matched(static_cast<size_t>(config.resources_size()));
  for (int i = 0; i < config.resources_size(); ++i) {
    for (const RdmaDevice& d : host.rdma_devices()) {
      if (!matcher.Matches(config.resources(i).selectors(), d)) continue;
      matched[static_cast<size_t>(i)].push_back(d.name());
      claims[d.name()].push_back(config.resources(i).name());
    }
  }
  for (const auto& [nic, by] : claims) {
    if (by.size() < 2) continue;
    v1::Finding* f = &plan.findings.emplace_back();
    f->set_severity(v1::SEVERITY_WARNING);
    f->set_check(kCheck);
    f->set_subject(nic);
    f->set_message(absl::StrCat("resources ", absl::StrJoin(by, " and "), " both select ", nic,
                                ": neither serves it; make their selectors exclusive"));
  }
  for (int i = 0; i < config.resources_size(); ++i) {
    ResourceView& view = plan.resources.emplace_back();
    view.resource = config.resources(i);
    for (const std::string& nic : matched[static_cast<size_t>(i)]) {
      if (claims[nic].size() == 1) view.nics.push_back(nic);
    }
    SortNatural(&view.nics);
    if (view.resource.mode() == v1::RdmaResource::EXCLUSIVE) {
      for (const std::string& nic : view.nics) {
        const RdmaDevice& dev = *FindDevice(host, nic);
        v1beta1::Device* d = view.list.add_devices();
        d->set_id(nic);
        d->set_health(Unhealthy(dev, health).empty() ? kHealthy : kUnhealthy);
        SetNuma(NumaOf(dev), d);
      }
    } else {
      // Interchangeable: usable while one of the NICs every pod gets is.
      bool any = false;
      std::set<int64_t> numa;
      for (const std::string& nic : view.nics) {
        const RdmaDevice& dev = *FindDevice(host, nic);
        any = any || Unhealthy(dev, health).empty();
        for (int64_t n : NumaOf(dev)) numa.insert(n);
      }
      const std::string prefix = SharedIdPrefix(view.resource.name());
      for (uint32_t k = 0; k < SharedCount(view.resource); ++k) {
        v1beta1::Device* d = view.list.add_devices();
        d->set_id(absl::StrCat(prefix, "-", k));
        d->set_health(any ? kHealthy : kUnhealthy);
        SetNuma(numa, d);
      }
    }
    for (const v1beta1::Device& d : view.list.devices()) view.ids.insert(d.id());
  }
  return plan;
}

void AddVanished(const std::vector<std::string>& before, v1beta1::ListAndWatchResponse* list) {
  std::set<std::string> now;
  for (const v1beta1::Device& d : list->devices()) now.insert(d.id());
  for (const std::string& id : before) {
    if (now.insert(id).second) {
      v1beta1::Device* d = list->add_devices();
      d->set_id(id);
      d->set_health(kUnhealthy);
    }
  }
}

absl::StatusOr<v1beta1::AllocateResponse> Allocate(const v1::Host& host,
                                                   const v1::SelectionPolicy& policy,
                                                   const ResourceView& view,
                                                   const v1beta1::AllocateRequest& req,
                                                   const AllocateOptions& opt) {
  const v1::RdmaResource& r = view.resource;
  const bool exclusive = r.mode() == v1::RdmaResource::EXCLUSIVE;
  if (absl::Status s = CheckBounds(
          "Allocate", req.container_requests(),
          [](const v1beta1::ContainerAllocateRequest& c) { return c.devices_ids_size(); });
      !s.ok()) {
    return s;
  }
  v1beta1::AllocateResponse out;
  for (const v1beta1::ContainerAllocateRequest& c : req.container_requests()) {
    std::vector<std::string> nics;
    for (const std::string& id : c.devices_ids()) {
      const bool known = exclusive
                             ? std::binary_search(view.nics.begin(), view.nics.end(), id,
                                                  [](const std::string& a, const std::string& b) {
                                                    return NaturalLess(a, b);
                                                  })
                             : view.ids.count(id) > 0;
      if (!known) {
        return absl::InvalidArgumentError(
            absl::StrCat("resource ", r.name(), " has no device ", Excerpt(id)));
      }
      if (exclusive) nics.push_back(id);
    }
    if (!exclusive && c.devices_ids_size() > 0) nics = view.nics;
    SortNatural(&nics);
    v1beta1::ContainerAllocateResponse* resp = out.add_container_responses();
    std::vector<std::string> ports;
    for (const std::string& nic : nics) {
      const RdmaDevice* dev = FindDevice(host, nic);
      if (dev == nullptr || dev->uverbs_device().empty()) {
        return absl::FailedPreconditionError(
            absl::StrCat(nic, dev == nullptr ? " is gone" : " has no uverbs node"));
      }
      const std::string node = absl::StrCat("/dev/infiniband/", dev->uverbs_device());
      v1beta1::DeviceSpec* spec = resp->add_devices();
      spec->set_container_path(node);
      spec->set_host_path(opt.dev_root + node);
      spec->set_permissions("rw");
      for (const v1::Port& p : dev->ports()) {
        if (p.state() == v1::PORT_STATE_ACTIVE) ports.push_back(absl::StrCat(nic, ":", p.number()));
      }
      if (opt.cdi && r.cdi_devices() && cdi::ValidDeviceName(nic)) {
        resp->add_cdi_devices()->set_name(absl::StrCat(cdi::kKind, "=", nic));
      }
    }
    if (!nics.empty()) {
      v1beta1::DeviceSpec* cm = resp->add_devices();
      cm->set_container_path(kRdmaCm);
      cm->set_host_path(opt.dev_root + kRdmaCm);
      cm->set_permissions("rw");
    }
    if (!opt.host_file_dir.empty()) {
      v1beta1::Mount* m = resp->add_mounts();
      // Where the helper looks by default, wherever this host keeps the file.
      m->set_container_path(hostfile::kDefaultDir);
      m->set_host_path(opt.host_file_dir);
      m->set_read_only(true);
    }
    if (!opt.pod_helper.empty()) {
      v1beta1::Mount* m = resp->add_mounts();
      m->set_container_path(kPodHelperInContainer);
      m->set_host_path(opt.pod_helper);
      m->set_read_only(true);
    }
    // The topology file the job's NCCL_TOPO_FILE names, where the job looks for it.
    if (const std::string topo = NcclTopoFileForJobs(host); !topo.empty()) {
      v1beta1::Mount* m = resp->add_mounts();
      m->set_container_path(topo);
      m->set_host_path(topo);
      m->set_read_only(true);
    }
    // NCCL asks the plugin at its init (with its version: the rails), which asks the helper.
    const bool nccl_plugin =
        !opt.nccl_env_plugin.empty() && !opt.host_file_dir.empty() && !opt.pod_helper.empty();
    auto& envs = *resp->mutable_envs();
    if (nccl_plugin) {
      v1beta1::Mount* m = resp->add_mounts();
      m->set_container_path(kNcclEnvPluginInContainer);
      m->set_host_path(opt.nccl_env_plugin);
      m->set_read_only(true);
      envs["NCCL_ENV_PLUGIN"] = kNcclEnvPluginInContainer;
    }
    if (r.env_at_allocate() && !ports.empty()) {
      // The same rules as every other consumer; without a usable port there is none to set.
      absl::StatusOr<jobenv::Result> env = RenderPortsEnv(host, ports, policy);
      if (env.ok()) {
        for (const auto& [k, v] : env->job) {
          // A set variable wins over the plugin's answer: NCCL's are left to the plugin.
          if (nccl_plugin && jobenv::AnsweredByNcclEnvPlugin(k)) {
            continue;
          }
          envs[k] = v;
        }
      }
    }
    envs[kEnvResource] = r.name();
    envs[kEnvDevices] = absl::StrJoin(nics, ",");
  }
  return out;
}

absl::StatusOr<v1beta1::PreferredAllocationResponse> PreferredAllocation(
    const v1::Host& host, const ResourceView& view,
    const v1beta1::PreferredAllocationRequest& req) {
  if (absl::Status s = CheckBounds("GetPreferredAllocation", req.container_requests(),
                                   [](const v1beta1::ContainerPreferredAllocationRequest& c) {
                                     return std::max(c.available_deviceids_size(),
                                                     c.must_include_deviceids_size());
                                   });
      !s.ok()) {
    return s;
  }
  for (int i = 0; i < req.container_requests_size(); ++i) {
    if (const int32_t size = req.container_requests(i).allocation_size(); size < 0) {
      return absl::InvalidArgumentError(absl::StrCat("GetPreferredAllocation: container request ",
                                                     i, ": allocation_size ", size,
                                                     " is negative"));
    }
  }
  v1beta1::PreferredAllocationResponse out;
  for (const v1beta1::ContainerPreferredAllocationRequest& c : req.container_requests()) {
    std::vector<std::string> must;
    std::vector<std::string> avail;
    for (const auto* list : {&c.must_include_deviceids(), &c.available_deviceids()}) {
      for (const std::string& id : *list) {
        if (!view.ids.count(id)) {
          return absl::InvalidArgumentError(
              absl::StrCat("resource ", view.resource.name(), " has no device ", Excerpt(id)));
        }
      }
    }
    std::set<std::string> seen;
    for (const std::string& id : c.must_include_deviceids()) {
      if (seen.insert(id).second) must.push_back(id);
    }
    for (const std::string& id : c.available_deviceids()) {
      if (seen.insert(id).second) avail.push_back(id);
    }
    const auto size = static_cast<size_t>(c.allocation_size());  // Not negative: checked above.
    if (size < must.size() || size > must.size() + avail.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("allocation_size ", c.allocation_size(), " with ", must.size(),
                       " required and ", must.size() + avail.size(), " available devices"));
    }
    std::vector<std::string> chosen = must;
    SortNatural(&avail);
    if (view.resource.mode() == v1::RdmaResource::EXCLUSIVE) {
      // What the choice reads of each NIC, looked up once (a host has hundreds of VFs).
      std::map<std::string, const RdmaDevice*> by_name;
      for (const RdmaDevice& d : host.rdma_devices()) by_name.emplace(d.name(), &d);
      struct Facts {
        std::optional<int64_t> numa;
        std::string pcie_switch;
      };
      auto facts = [&](const std::string& id) {
        auto it = by_name.find(id);
        const RdmaDevice* d = it == by_name.end() ? nullptr : it->second;
        Facts f;
        if (d != nullptr && d->has_pci() && d->pci().has_numa_node()) f.numa = d->pci().numa_node();
        f.pcie_switch = SwitchOf(d);
        return f;
      };
      std::vector<Facts> cand;
      for (const std::string& id : avail) cand.push_back(facts(id));
      std::optional<int64_t> anchor;
      for (const std::string& id : must) {
        if (!anchor) anchor = facts(id).numa;
      }
      if (!anchor) {
        std::map<int64_t, size_t> count;
        for (const Facts& f : cand) {
          if (f.numa) ++count[*f.numa];
        }
        const size_t need = size - chosen.size();
        for (const auto& [n, k] : count) {  // The smallest node that holds them all.
          if (k >= need && (!anchor || k < count[*anchor])) anchor = n;
        }
        for (const auto& [n, k] : count) {  // Else the fullest.
          if (!anchor || (count[*anchor] < need && k > count[*anchor])) anchor = n;
        }
      }
      std::set<std::string> switches;
      for (const std::string& id : chosen) switches.insert(facts(id).pcie_switch);
      std::vector<bool> taken(avail.size(), false);
      while (chosen.size() < size) {
        size_t best = avail.size();
        std::pair<bool, bool> best_key{true, true};
        for (size_t i = 0; i < avail.size(); ++i) {  // Natural order breaks ties.
          if (taken[i]) continue;
          std::pair<bool, bool> key{cand[i].numa != anchor, !switches.count(cand[i].pcie_switch)};
          if (best == avail.size() || key < best_key) {
            best = i;
            best_key = key;
          }
        }
        taken[best] = true;
        switches.insert(cand[best].pcie_switch);
        chosen.push_back(avail[best]);
      }
    } else {
      for (size_t i = 0; chosen.size() < size; ++i) chosen.push_back(avail[i]);
    }
    v1beta1::ContainerPreferredAllocationResponse* resp = out.add_container_responses();
    for (const std::string& id : chosen) resp->add_deviceids(id);
  }
  return out;
}

}  // namespace fabric::deviceplugin
