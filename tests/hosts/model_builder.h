// Small Host models (fabric.v1.Host) built in code, for the policy tests (selection, env,
// placement, NFD labels, changes) where discovery is not under test: each test shows the facts
// that decide its outcome. The sysfs side of example hosts is builder.h; a test that needs
// discovery too writes a HostSpec and discovers it (discovered.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fabric/v1/host.pb.h"
#include "tests/hosts/builder.h"

namespace fabric::testing {

class ModelBuilder {
 public:
  v1::Host& host() { return host_; }
  const v1::Host& Build() const { return host_; }

  // A GPU; numa nullopt means sysfs said -1.
  ModelBuilder& Gpu(const std::string& addr, std::optional<int> numa = 0) {
    v1::Accelerator* a = host_.add_accelerators();
    a->set_pci_address(addr);
    a->set_vendor(v1::ACCELERATOR_VENDOR_NVIDIA);
    a->set_vendor_name("NVIDIA");
    a->set_kind(v1::ACCELERATOR_KIND_3D);
    a->mutable_pci()->set_address(addr);
    if (numa) a->mutable_pci()->set_numa_node(*numa);
    return *this;
  }

  // A BMC VGA (ASPEED), which is never a GPU.
  ModelBuilder& Display(const std::string& addr) {
    v1::Accelerator* a = host_.add_accelerators();
    a->set_pci_address(addr);
    a->set_vendor_name("ASPEED");
    a->set_kind(v1::ACCELERATOR_KIND_VGA);
    a->set_management_display(true);
    return *this;
  }

  // An RDMA device; pci empty means a software device (rxe) without a PCI function.
  v1::RdmaDevice* Device(const std::string& name, const std::string& pci,
                         std::optional<int> numa = 0) {
    v1::RdmaDevice* d = host_.add_rdma_devices();
    d->set_name(name);
    if (!pci.empty()) {
      d->mutable_pci()->set_address(pci);
      if (numa) d->mutable_pci()->set_numa_node(*numa);
      d->mutable_pci()->mutable_sriov()->set_role(v1::SRIOV_ROLE_PF);
    }
    return d;
  }

  static void MakeVf(v1::RdmaDevice* d, const std::string& pf) {
    d->mutable_pci()->mutable_sriov()->set_role(v1::SRIOV_ROLE_VF);
    d->mutable_pci()->mutable_sriov()->set_pf_pci_address(pf);
  }

  // A netdev, created on first use.
  v1::Netdev* Netdev(const std::string& name) {
    for (v1::Netdev& n : *host_.mutable_netdevs()) {
      if (n.name() == name) return &n;
    }
    v1::Netdev* n = host_.add_netdevs();
    n->set_name(name);
    n->set_operstate("up");
    return n;
  }

  // An ACTIVE RoCE port on `netdev` with the usual four GIDs when ipv4 is set: 0/1 link-local
  // (v1/v2), 2/3 IPv4-mapped (v1/v2). `subnet` goes to the netdev's connected subnets.
  v1::Port* RocePort(v1::RdmaDevice* d, uint32_t number, const std::string& netdev,
                     const std::string& ipv4, const std::string& subnet = "", double rate = 400) {
    v1::Port* p = d->add_ports();
    p->set_number(number);
    p->set_state(v1::PORT_STATE_ACTIVE);
    p->set_phys_state(v1::PHYS_STATE_LINK_UP);
    p->set_rate_gbps(rate);
    p->set_link_layer(v1::LINK_LAYER_ETHERNET);
    p->set_netdev(netdev);
    v1::Netdev* n = Netdev(netdev);
    n->set_rdma_device(d->name());
    n->set_rdma_port(number);
    if (!subnet.empty()) n->add_ipv4_subnets(subnet);
    const std::string ll = "fe80:0000:0000:0000:0e42:a1ff:fe00:0001";
    AddGid(p, 0, v1::GID_TYPE_ROCE_V1, netdev, "", ll);
    AddGid(p, 1, v1::GID_TYPE_ROCE_V2, netdev, "", ll);
    if (!ipv4.empty()) {
      AddGid(p, 2, v1::GID_TYPE_ROCE_V1, netdev, ipv4);
      AddGid(p, 3, v1::GID_TYPE_ROCE_V2, netdev, ipv4);
    }
    return p;
  }

  v1::Port* IbPort(v1::RdmaDevice* d, uint32_t number, double rate = 400) {
    v1::Port* p = d->add_ports();
    p->set_number(number);
    p->set_state(v1::PORT_STATE_ACTIVE);
    p->set_rate_gbps(rate);
    p->set_link_layer(v1::LINK_LAYER_INFINIBAND);
    p->set_lid(number + 10);
    AddGid(p, 0, v1::GID_TYPE_IB, "", "", "fe80:0000:0000:0000:0e42:a103:0000:0001");
    return p;
  }

  static void AddGid(v1::Port* p, uint32_t index, v1::GidType type, const std::string& netdev,
                     const std::string& ipv4, const std::string& gid = "") {
    v1::Gid* g = p->add_gids();
    g->set_index(index);
    g->set_type(type);
    g->set_netdev(netdev);
    g->set_ipv4(ipv4);
    g->set_gid(gid.empty() ? Ipv4MappedGid(ipv4) : gid);
  }

  // A GID holding an IPv6 address: `gid` in the kernel's form, `ipv6` its compressed text when
  // global (discovery fills the field only then), empty for a link-local one.
  static void AddIpv6Gid(v1::Port* p, uint32_t index, v1::GidType type, const std::string& netdev,
                         const std::string& gid, const std::string& ipv6) {
    v1::Gid* g = p->add_gids();
    g->set_index(index);
    g->set_type(type);
    g->set_netdev(netdev);
    g->set_gid(gid);
    g->set_ipv6(ipv6);
  }

  // A back-end NIC in one call: device + ACTIVE RoCE port 1 on `netdev`.
  v1::RdmaDevice* Nic(const std::string& name, const std::string& pci, std::optional<int> numa,
                      const std::string& netdev, const std::string& ipv4,
                      const std::string& subnet = "", double rate = 400) {
    v1::RdmaDevice* d = Device(name, pci, numa);
    RocePort(d, 1, netdev, ipv4, subnet, rate);
    return d;
  }

  ModelBuilder& Distance(const std::string& gpu, const std::string& dev, v1::DistanceClass cls,
                         const std::string& reason = "") {
    v1::TopologyPair* t = host_.add_topology();
    t->set_accelerator(gpu);
    t->set_rdma_device(dev);
    t->set_distance(cls);
    t->set_reason(reason);
    return *this;
  }

  ModelBuilder& DefaultRoute(const std::string& netdev) {
    Netdev(netdev)->set_default_route(true);
    host_.add_default_route_netdevs(netdev);
    return *this;
  }

 private:
  v1::Host host_;
};

}  // namespace fabric::testing
