#include "agent/fabricenv/pod_host.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "agent/common/cidr.h"
#include "agent/common/excerpt.h"
#include "agent/common/natural_order.h"
#include "agent/common/strings.h"
#include "agent/policy/select/env.h"
#include "agent/policy/select/select_request.h"

namespace fabric::podenv {
namespace {

using PortKey = std::pair<std::string, uint32_t>;

// The pod's GID on `port`: set where the host lists it, appended where the host was published
// before the pod's interface existed. Every other GID keeps its address (NCCL_IB_ADDR_RANGE must
// not select it) but not its interface name.
void LayPodGid(const jobenv::Pick& pick, v1::Port* port) {
  bool found = false;
  for (v1::Gid& g : *port->mutable_gids()) {
    if (pick.gid_index && g.index() == *pick.gid_index) {
      found = true;
      g.set_netdev(pick.netdev);
      g.set_type(v1::GID_TYPE_ROCE_V2);
      g.set_ipv4(pick.ipv4);
      g.set_ipv6(pick.ipv6);
    } else {
      g.clear_netdev();
    }
  }
  std::set<uint32_t> listed;
  for (const v1::Gid& g : port->gids()) listed.insert(g.index());
  if (pick.gid_index && !found) {
    v1::Gid* g = port->add_gids();
    g->set_index(*pick.gid_index);
    g->set_type(v1::GID_TYPE_ROCE_V2);
    g->set_netdev(pick.netdev);
    g->set_ipv4(pick.ipv4);
    g->set_ipv6(pick.ipv6);
    listed.insert(*pick.gid_index);
  }
  // Other pods' addresses fabric-cni saw at ADD that the host has not published yet.
  for (const jobenv::OtherGid& o : pick.other_ipv4_gids) {
    if (!listed.insert(o.index).second) continue;
    v1::Gid* g = port->add_gids();
    g->set_index(o.index);
    g->set_type(o.roce_v2_or_unknown ? v1::GID_TYPE_ROCE_V2 : v1::GID_TYPE_ROCE_V1);
    g->set_ipv4(o.ipv4);
  }
  std::sort(port->mutable_gids()->begin(), port->mutable_gids()->end(),
            [](const v1::Gid& a, const v1::Gid& b) { return a.index() < b.index(); });
}

// Keeps only the devices in `keep`; clears the pairing, which named the others.
void KeepDevices(const std::set<std::string>& keep, v1::Host* host) {
  auto* devs = host->mutable_rdma_devices();
  devs->erase(std::remove_if(devs->begin(), devs->end(),
                             [&](const v1::RdmaDevice& d) { return !keep.contains(d.name()); }),
              devs->end());
  host->clear_pairing();
}

}  // namespace

absl::StatusOr<v1::PublishedHost> NarrowToPod(const v1::PublishedHost& published,
                                              const std::vector<podrecord::PodRecord>& records) {
  std::map<PortKey, const jobenv::Pick*> picks;
  std::set<std::string> devices;
  std::vector<std::string> ifnames;
  for (const podrecord::PodRecord& r : records) {
    for (const podrecord::Interface& i : r.interfaces) ifnames.push_back(i.name);
    for (const jobenv::Pick& p : r.ports) {
      picks.emplace(PortKey{p.device, p.port}, &p);
      devices.insert(p.device);
    }
  }
  std::sort(ifnames.begin(), ifnames.end(), NaturalLess);
  ifnames.erase(std::unique(ifnames.begin(), ifnames.end()), ifnames.end());
  if (picks.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the pod's interfaces (", absl::StrJoin(ifnames, ", "),
                     ") carry no RDMA device, as fabric-cni found at ADD"));
  }
  v1::PublishedHost out = published;
  v1::Host* host = out.mutable_host();
  KeepDevices(devices, host);
  std::set<std::string> found;
  for (v1::RdmaDevice& d : *host->mutable_rdma_devices()) {
    found.insert(d.name());
    auto* ports = d.mutable_ports();
    ports->erase(std::remove_if(ports->begin(), ports->end(),
                                [&](const v1::Port& p) {
                                  return !picks.contains(PortKey{d.name(), p.number()});
                                }),
                 ports->end());
    for (v1::Port& p : *ports) {
      const jobenv::Pick& pick = *picks.at(PortKey{d.name(), p.number()});
      p.set_netdev(pick.netdev);
      LayPodGid(pick, &p);
    }
  }
  for (const std::string& dev : devices) {
    if (!found.contains(dev)) {
      return absl::FailedPreconditionError(
          absl::StrCat("the pod's RDMA device ", dev, " is not in the published host"));
    }
  }
  // The pod's namespace holds its own interfaces, none of the host's.
  host->clear_netdevs();
  host->clear_default_route_netdevs();
  for (const podrecord::PodRecord& r : records) {
    for (const podrecord::Interface& i : r.interfaces) {
      v1::Netdev* n = host->add_netdevs();
      n->set_name(i.name);
      for (const auto& [key, pick] : picks) {
        if (pick->netdev != i.name) continue;
        n->set_rdma_device(pick->device);
        n->set_rdma_port(pick->port);
      }
      for (const std::string& a : i.addresses) {
        if (absl::StatusOr<Ipv4Net> net = ParseIpv4Cidr(a); net.ok()) {
          n->add_ipv4_subnets(net->ToString());
        }
      }
    }
  }
  out.mutable_policy()->set_socket_ifname(absl::StrJoin(ifnames, ","));
  return out;
}

absl::StatusOr<v1::Selection> SelectPodPorts(const v1::PublishedHost& narrowed,
                                             const v1::SelectNicsRequest& req) {
  absl::StatusOr<jobenv::Consumers> consumers = jobenv::ParseConsumers(req.consumers());
  if (!consumers.ok()) return absl::InvalidArgumentError(consumers.status().message());
  std::vector<std::string> ports;
  for (const v1::RdmaDevice& d : narrowed.host().rdma_devices()) {
    for (const v1::Port& p : d.ports()) ports.push_back(absl::StrCat(d.name(), ":", p.number()));
  }
  std::sort(ports.begin(), ports.end(), NaturalLess);
  EnvOptions opt{.consumers = *consumers, .rank = {}, .nccl_version = {}};
  absl::StatusOr<std::optional<jobenv::Version>> version = NcclVersionOf(req);
  if (!version.ok()) return version.status();
  opt.nccl_version = *version;
  absl::StatusOr<jobenv::Result> r = RenderPortsEnv(narrowed.host(), ports, narrowed.policy(), opt);
  if (!r.ok()) return r.status();
  v1::Selection sel;
  for (const auto& [k, v] : r->job) (*sel.mutable_job_env())[k] = v;
  for (const auto& [k, v] : r->Merged()) (*sel.mutable_env())[k] = v;
  for (std::string& n : r->notes) sel.add_notes(std::move(n));
  sel.add_notes(
      absl::StrCat("no GPU named (no Slurm or *_VISIBLE_DEVICES scope): the job is the "
                   "pod's RDMA ports, no per-GPU pins"));
  sel.set_consumers(jobenv::ConsumersText(*consumers));
  return sel;
}

absl::StatusOr<v1::PublishedHost> NarrowToDevices(const v1::PublishedHost& published,
                                                  std::string_view devices) {
  std::set<std::string> keep;
  for (absl::string_view d : absl::StrSplit(Av(devices), ',', absl::SkipWhitespace())) {
    keep.insert(std::string(d));
  }
  if (keep.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(kDevicesVar, " names no RDMA device"));
  }
  v1::PublishedHost out = published;
  KeepDevices(keep, out.mutable_host());
  for (const v1::RdmaDevice& d : out.host().rdma_devices()) keep.erase(d.name());
  if (!keep.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(kDevicesVar, "=", Excerpt(devices, 80),
                                                   ": the published host has no ", *keep.begin()));
  }
  return out;
}

}  // namespace fabric::podenv
