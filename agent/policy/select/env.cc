#include "agent/policy/select/env.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/inventory/topology/topology.h"
#include "agent/policy/select/candidates.h"
#include "agent/policy/select/port_facts.h"
#include "agent/policy/select/selection_section.h"

namespace fabric {

using namespace ::fabric::v1;  // NOLINT: enum values of the model

namespace {

const Port* FindPort(const Host& host, const std::string& dev, uint32_t number,
                     const RdmaDevice** device) {
  for (const RdmaDevice& d : host.rdma_devices()) {
    if (d.name() != dev) continue;
    for (const Port& p : d.ports()) {
      if (p.number() == number) {
        *device = &d;
        return &p;
      }
    }
  }
  return nullptr;
}

jobenv::Pick PickOf(const Host& host, const SelectionPolicy& policy, const GpuAssignment& a) {
  jobenv::Pick p;
  p.gpu = a.gpu();
  p.device = a.rdma_device();
  p.port = a.port();
  p.netdev = a.netdev();
  p.roce = a.link_layer() == LINK_LAYER_ETHERNET;
  if (a.has_gid_index()) p.gid_index = a.gid_index();
  p.ipv4 = a.ipv4();
  p.ipv4_subnet = a.ipv4_subnet();
  p.ipv6 = a.ipv6();
  p.profile = a.nic_profile();
  p.gpudirect = a.gpudirect();
  for (int i = 0; i < policy.rails_size(); ++i) {
    if (!a.rail().empty() && policy.rails(i).name() == a.rail()) p.rail = i;
  }
  for (const Accelerator& acc : host.accelerators()) {
    if (a.gpu().empty() || acc.pci_address() != a.gpu()) continue;
    if (acc.vendor() == ACCELERATOR_VENDOR_NVIDIA) p.gpu_vendor = "nvidia";
    if (acc.vendor() == ACCELERATOR_VENDOR_AMD) p.gpu_vendor = "amd";
  }
  const RdmaDevice* dev = nullptr;
  if (const Port* port = FindPort(host, a.rdma_device(), a.port(), &dev); port != nullptr) {
    p.device_pci = dev->pci().address();
    p.sys_image_guid = dev->sys_image_guid();
    for (const Gid& g : port->gids()) {
      if (g.ipv4().empty()) continue;
      const bool v2 = g.type() == GID_TYPE_ROCE_V2;
      p.other_ipv4_gids.push_back({g.index(), g.ipv4(), v2 || g.type() == GID_TYPE_UNSPECIFIED,
                                   absl::StrCat(v2 ? "RoCE v2" : "type unknown", " on ",
                                                g.netdev().empty() ? "no netdev" : g.netdev())});
    }
  }
  return p;
}

}  // namespace

absl::StatusOr<jobenv::Request> JobRequest(const Host& host, const Selection& sel,
                                           const SelectionPolicy& policy, const EnvOptions& opt) {
  if (absl::Status s = ValidatePolicy(policy); !s.ok()) return s;
  if (sel.assignments().empty()) return absl::InvalidArgumentError("selection has no assignments");
  jobenv::Request req;
  for (const GpuAssignment& a : sel.assignments()) {
    if (a.rdma_device().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("assignment for GPU ", a.gpu(), " names no RDMA device"));
    }
    req.scope.push_back(PickOf(host, policy, a));
  }
  req.rank = opt.rank;
  req.consumers = opt.consumers;
  req.socket_ifname = policy.socket_ifname();
  req.default_route_netdevs.assign(host.default_route_netdevs().begin(),
                                   host.default_route_netdevs().end());
  for (const Netdev& n : host.netdevs()) {
    if (n.default_route()) req.default_route_netdevs.push_back(n.name());
  }
  req.static_env.insert(policy.static_env().begin(), policy.static_env().end());
  req.nccl_version = opt.nccl_version;
  for (const auto& [name, profile] : policy.nic_profiles()) {
    req.profile_env[name].insert(profile.env().begin(), profile.env().end());
  }
  req.nccl_topo_file = NcclTopoFileForJobs(host);
  return req;
}

absl::StatusOr<jobenv::Result> RenderJobEnv(const Host& host, const Selection& sel,
                                            const SelectionPolicy& policy, const EnvOptions& opt) {
  absl::StatusOr<jobenv::Request> req = JobRequest(host, sel, policy, opt);
  if (!req.ok()) return req.status();
  return jobenv::Render(*req);
}

absl::StatusOr<jobenv::Result> RenderPortsEnv(const Host& host,
                                              const std::vector<std::string>& ports,
                                              const SelectionPolicy& policy,
                                              const EnvOptions& opt) {
  if (ports.empty()) return absl::InvalidArgumentError("no port");
  std::vector<select_internal::Candidate> cands =
      select_internal::PortCandidates(host, policy, [&](const RdmaDevice& d, const Port& p) {
        return std::find(ports.begin(), ports.end(), absl::StrCat(d.name(), ":", p.number())) !=
               ports.end();
      });
  Selection sel;
  for (const std::string& name : ports) {
    auto c = std::find_if(cands.begin(), cands.end(),
                          [&](const select_internal::Candidate& x) { return x.name == name; });
    if (c == cands.end()) return absl::InvalidArgumentError(absl::StrCat("no port ", name));
    // As SelectNics fills an assignment, without a GPU.
    GpuAssignment* a = sel.add_assignments();
    select_internal::FillPort(*c, a);
    FillPortFacts(host, policy, nullptr, a);
  }
  EnvOptions no_rank = opt;
  no_rank.rank.reset();
  return RenderJobEnv(host, sel, policy, no_rank);
}

absl::Status FillEnv(const Host& host, const SelectionPolicy& policy, const EnvOptions& opt,
                     Selection* sel) {
  absl::StatusOr<jobenv::Result> r = RenderJobEnv(host, *sel, policy, opt);
  if (!r.ok()) return r.status();
  sel->mutable_env()->clear();
  sel->mutable_job_env()->clear();
  sel->mutable_pins()->clear();
  for (const auto& [k, v] : r->job) (*sel->mutable_job_env())[k] = v;
  for (const auto& [k, v] : r->pins) (*sel->mutable_pins())[k] = v;
  for (const auto& [k, v] : r->Merged()) (*sel->mutable_env())[k] = v;
  sel->set_rank_gpu(opt.rank ? sel->assignments(static_cast<int>(*opt.rank)).gpu() : "");
  sel->set_consumers(jobenv::ConsumersText(opt.consumers));
  for (std::string& n : r->notes) sel->add_notes(std::move(n));
  return absl::OkStatus();
}

EnvMap EnvOf(const Selection& sel) { return EnvMap(sel.env().begin(), sel.env().end()); }

}  // namespace fabric
