#include "agent/policy/select/port_facts.h"

#include <string_view>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/inventory/topology/topology.h"
#include "agent/policy/jobenv/profiles.h"

namespace fabric {

using namespace ::fabric::v1;  // NOLINT: the model's types and enum values

bool RailNamesPort(const Rail& rail, const RdmaDevice& dev, const Port& port) {
  const std::string port_name = absl::StrCat(dev.name(), ":", port.number());
  for (const std::string& p : rail.ports()) {
    if (p == dev.name() || p == port_name || (!port.netdev().empty() && p == port.netdev())) {
      return true;
    }
  }
  return false;
}

std::optional<int> PortRailIndex(const Host& host, const SelectionPolicy& policy,
                                 const RdmaDevice& dev, const Port& port) {
  std::string heard;
  if (!port.netdev().empty()) {
    for (const Netdev& n : host.netdevs()) {
      if (n.name() == port.netdev() && n.has_neighbor()) heard = n.neighbor().rail();
    }
  }
  for (int i = 0; i < policy.rails_size(); ++i) {
    if (!heard.empty() && policy.rails(i).name() == heard) return i;
  }
  for (int i = 0; i < policy.rails_size(); ++i) {
    if (RailNamesPort(policy.rails(i), dev, port)) return i;
  }
  return std::nullopt;
}

namespace {

// Whether a host's path serves GPUs of this vendor: the peer-memory modules NVIDIA's, a dma-buf
// path the exporter it names (gpudirect.cc in discovery writes it).
bool Serves(const GpuDirectPath& p, const Accelerator& gpu) {
  if (p.mechanism() == "nvidia_peermem" || p.mechanism() == "nv_peer_mem") {
    return gpu.vendor() == ACCELERATOR_VENDOR_NVIDIA;
  }
  if (p.mechanism() != "dma_buf") return false;
  switch (gpu.vendor()) {
    case ACCELERATOR_VENDOR_NVIDIA:
      return absl::StrContains(p.detail(), "NVIDIA");
    case ACCELERATOR_VENDOR_AMD:
      return absl::StrContains(p.detail(), "amdgpu");
    default:
      return gpu.vendor_name() == "Habana Labs" && absl::StrContains(p.detail(), "habanalabs");
  }
}

}  // namespace

GpuDirectWay DecideGpuDirect(const Host& host, const Accelerator& gpu, DistanceClass distance) {
  if (!host.has_gpudirect()) return {};
  const GpuDirectPath* use = nullptr;
  for (const GpuDirectPath& p : host.gpudirect().paths()) {
    if (!Serves(p, gpu)) continue;
    if (use == nullptr || p.mechanism() == "dma_buf") use = &p;
  }
  if (use == nullptr) {
    const std::string& why = host.gpudirect().reason();
    return {"none", why.empty() ? absl::StrCat("no peer-memory module or dma-buf path serves ",
                                               gpu.vendor_name(), " GPUs on this host")
                                : why};
  }
  if (distance > DISTANCE_CLASS_PXB) {
    return {"none", absl::StrCat("the NIC is ", DistanceName(distance),
                                 " from the GPU: NCCL takes GPUDirect RDMA only up to PXB by "
                                 "default (NCCL_NET_GDR_LEVEL), so traffic goes through host "
                                 "memory although ",
                                 use->detail())};
  }
  return {use->mechanism(),
          absl::StrCat(use->detail(), distance == DISTANCE_CLASS_UNSPECIFIED
                                          ? "; the PCIe path is unknown"
                                          : absl::StrCat("; the NIC is ", DistanceName(distance),
                                                         " from the GPU"))};
}

void FillPortFacts(const Host& host, const SelectionPolicy& policy, const Accelerator* gpu,
                   GpuAssignment* a) {
  for (const RdmaDevice& d : host.rdma_devices()) {
    if (d.name() != a->rdma_device()) continue;
    a->set_nic_profile(std::string(jobenv::ProfileOf(d.pci().driver(), d.name())));
    for (const Port& p : d.ports()) {
      if (p.number() != a->port()) continue;
      if (std::optional<int> rail = PortRailIndex(host, policy, d, p)) {
        a->set_rail(policy.rails(*rail).name());
      }
    }
  }
  if (gpu == nullptr) return;
  // A virtual tree's distance is no path: only the shape's topology file says one.
  GpuDirectWay gd = DecideGpuDirect(host, *gpu,
                                    VirtualPciTree(host).empty() || PairedByNcclTopology(host)
                                        ? a->distance()
                                        : DISTANCE_CLASS_UNSPECIFIED);
  a->set_gpudirect(gd.way);
  a->set_gpudirect_reason(gd.reason);
}

}  // namespace fabric
