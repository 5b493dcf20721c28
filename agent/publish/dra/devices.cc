#include "agent/publish/dra/devices.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "agent/common/natural_order.h"
#include "agent/policy/health/health.h"
#include "agent/policy/rails/rails.h"
#include "agent/policy/select/pairing.h"

namespace fabric::dra {
namespace {

constexpr char kPcieRoot[] = "resource.kubernetes.io/pcieRoot";
constexpr char kNumaNode[] = "resource.kubernetes.io/numaNode";
constexpr char kDranetNumaNode[] = "dra.net/numaNode";
constexpr char kMissingKey[] = "rdma.fabric.io/device_missing";

class Attributes {
 public:
  explicit Attributes(std::map<std::string, AttributeValue>* out) : out_(out) {}
  void Put(const char* name, std::string value) {
    if (value.empty() || value.size() > kMaxStringValue) return;
    out_->emplace(name, std::move(value));
  }
  void Put(const char* name, int64_t value) { out_->emplace(name, value); }
  void Put(const char* name, bool value) { out_->emplace(name, value); }

 private:
  std::map<std::string, AttributeValue>* out_;
};

// A label value (at most 63 of [A-Za-z0-9-_.], alphanumeric at both ends), as a taint's value
// and a key's name part must be.
std::string LabelValue(std::string_view raw) {
  std::string out;
  for (char c : raw.substr(0, 63)) {
    out.push_back(absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' ||
                          c == '.'
                      ? c
                      : '_');
  }
  while (!out.empty() && !absl::ascii_isalnum(static_cast<unsigned char>(out.back()))) {
    out.pop_back();
  }
  while (!out.empty() && !absl::ascii_isalnum(static_cast<unsigned char>(out.front()))) {
    out.erase(out.begin());
  }
  return out;
}

std::string TimeAdded(const google::protobuf::Timestamp& t) {
  return t.seconds() <= 0 ? "" : Rfc3339(absl::FromUnixSeconds(t.seconds()));
}

std::vector<Taint> TaintsOf(const v1::RdmaDevice& dev, const v1::Health& health) {
  std::map<std::string, std::pair<int, Taint>> by_key;  // Key -> (severity rank, taint).
  for (const v1::Finding& f : health.findings()) {
    if (f.dry_run() || !NamesDevice(f, dev)) continue;
    const int rank = SeverityRank(f.severity());
    if (f.severity() != v1::SEVERITY_CRITICAL && f.severity() != v1::SEVERITY_WARNING) continue;
    const std::string check = LabelValue(f.check());
    if (check.empty()) continue;
    const std::string& code = f.code().empty() ? f.check() : f.code();
    const size_t dot = code.find('.');
    Taint t{absl::StrCat(kDriver, "/", check),
            LabelValue(dot == std::string::npos ? code : std::string_view(code).substr(dot + 1)),
            f.severity() == v1::SEVERITY_CRITICAL ? "NoSchedule" : "None",
            TimeAdded(f.first_seen())};
    auto [it, added] = by_key.try_emplace(t.key, rank, t);
    if (!added && rank > it->second.first) it->second = {rank, std::move(t)};
  }
  std::vector<std::pair<int, Taint>> all;
  for (auto& [key, v] : by_key) all.push_back(std::move(v));
  std::stable_sort(all.begin(), all.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<Taint> out;
  for (auto& [rank, t] : all) {
    if (out.size() == kMaxTaints) break;
    out.push_back(std::move(t));
  }
  return out;
}

std::string LinkLayer(v1::LinkLayer l) {
  switch (l) {
    case v1::LINK_LAYER_ETHERNET:
      return "ethernet";
    case v1::LINK_LAYER_INFINIBAND:
      return "infiniband";
    default:
      return "";
  }
}

struct PortFacts {
  std::string rail;
  std::string leaf;
};

struct GpuFacts {
  std::string first;  // PCI address.
  std::string uuid;
  int64_t count = 0;
};

}  // namespace

std::string Rfc3339(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone());
}

std::string DnsLabel(std::string_view raw) {
  std::string out;
  for (char c : raw) {
    const auto u = static_cast<unsigned char>(c);
    out.push_back(absl::ascii_isalnum(u) ? absl::ascii_tolower(u) : '-');
    if (out.size() == 63) break;
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  while (!out.empty() && out.front() == '-') out.erase(out.begin());
  return out.empty() ? "x" : out;
}

std::vector<Device> Devices(const v1::Host& host, const v1::SelectionPolicy& policy,
                            const v1::Health& health, const std::set<std::string>& excluded) {
  std::map<std::pair<std::string, uint32_t>, PortFacts> ports;
  for (const PortRail& pr : PortRails(host, policy)) {
    PortFacts& f = ports[{pr.device->name(), pr.port->number()}];
    if (pr.expected != nullptr) {
      f.rail = pr.expected->name();
    } else if (pr.heard != nullptr) {
      f.rail = pr.heard->name();
    }
    if (pr.neighbor != nullptr) {
      f.leaf = pr.neighbor->switch_label().empty() ? pr.neighbor->system_name()
                                                   : pr.neighbor->switch_label();
    }
  }
  std::map<std::string, const v1::Accelerator*> gpus;
  for (const v1::Accelerator& a : host.accelerators()) gpus[a.pci_address()] = &a;
  std::map<std::pair<std::string, uint32_t>, GpuFacts> paired;
  const v1::GpuPairing pairing = PairingOf(host, policy);
  for (const v1::GpuPair& p : pairing.pairs()) {
    GpuFacts& g = paired[{p.rdma_device(), p.port()}];
    if (g.count++ == 0) {
      g.first = p.gpu();
      auto it = gpus.find(p.gpu());
      if (it != gpus.end()) g.uuid = it->second->uuid();
    }
  }

  std::vector<const v1::RdmaDevice*> devs;
  for (const v1::RdmaDevice& d : host.rdma_devices()) {
    if (!excluded.count(d.name())) devs.push_back(&d);
  }
  std::sort(devs.begin(), devs.end(), [](const v1::RdmaDevice* a, const v1::RdmaDevice* b) {
    return NaturalLess(a->name(), b->name());
  });
  std::vector<Device> out;
  std::set<std::string> names;
  for (const v1::RdmaDevice* d : devs) {
    const std::vector<Taint> taints = TaintsOf(*d, health);
    for (const v1::Port& p : d->ports()) {
      Device& dev = out.emplace_back();
      dev.rdma_device = d->name();
      dev.port = p.number();
      dev.name =
          DnsLabel(d->ports_size() > 1 ? absl::StrCat(d->name(), "-p", p.number()) : d->name());
      for (int n = 2; !names.insert(dev.name).second; ++n) {
        const std::string suffix = absl::StrCat("-", n);
        dev.name = absl::StrCat(DnsLabel(dev.name.substr(0, 63 - suffix.size())), suffix);
      }
      dev.taints = taints;
      Attributes a(&dev.attributes);
      const v1::PciFunction& pci = d->pci();
      if (!pci.path().empty()) a.Put(kPcieRoot, pci.path(0));
      if (pci.has_numa_node()) {
        a.Put(kNumaNode, int64_t{pci.numa_node()});
        a.Put(kDranetNumaNode, int64_t{pci.numa_node()});
      }
      a.Put("pciAddress", pci.address());
      a.Put("pfPciAddress", pci.sriov().pf_pci_address());
      a.Put("rdmaDevice", d->name());
      a.Put("port", int64_t{p.number()});
      a.Put("netdev", p.netdev());
      a.Put("linkLayer", LinkLayer(p.link_layer()));
      if (p.has_rate_gbps()) a.Put("rateGbps", static_cast<int64_t>(p.rate_gbps()));
      a.Put("function", !d->has_pci() || pci.address().empty()    ? std::string("software")
                        : pci.sriov().role() == v1::SRIOV_ROLE_VF ? std::string("vf")
                                                                  : std::string("pf"));
      a.Put("vendorId", pci.vendor_id());
      a.Put("deviceId", pci.device_id());
      a.Put("driver", pci.driver());
      a.Put("productName", pci.device_name());
      a.Put("firmware", d->fw_ver());
      a.Put("nodeGuid", d->node_guid());
      if (auto it = ports.find({d->name(), p.number()}); it != ports.end()) {
        a.Put("rail", it->second.rail);
        a.Put("leaf", it->second.leaf);
      }
      if (auto it = paired.find({d->name(), p.number()}); it != paired.end()) {
        a.Put("gpu", it->second.first);
        a.Put("gpuUuid", it->second.uuid);
        a.Put("gpuCount", it->second.count);
      }
      if (!host.accelerators().empty()) a.Put("gpuDirect", host.gpudirect().available());
    }
  }
  return out;
}

void KeepVanished(const std::vector<Device>& before, const std::string& since,
                  std::vector<Device>* now) {
  std::set<std::string> present;
  for (const Device& d : *now) present.insert(d.rdma_device);
  std::set<std::string> names;
  for (const Device& d : *now) names.insert(d.name);
  for (const Device& d : before) {
    if (present.count(d.rdma_device) || names.count(d.name)) continue;
    Device kept = d;
    auto it = std::find_if(kept.taints.begin(), kept.taints.end(),
                           [](const Taint& t) { return t.key == kMissingKey; });
    if (it == kept.taints.end()) {
      kept.taints.insert(kept.taints.begin(), Taint{kMissingKey, "vanished", "NoSchedule", since});
      if (kept.taints.size() > kMaxTaints) kept.taints.resize(kMaxTaints);
    }
    names.insert(kept.name);
    now->push_back(std::move(kept));
  }
  std::stable_sort(now->begin(), now->end(), [](const Device& a, const Device& b) {
    return a.rdma_device != b.rdma_device ? NaturalLess(a.rdma_device, b.rdma_device)
                                          : a.port < b.port;
  });
}

std::vector<std::vector<Device>> Split(const std::vector<Device>& devices) {
  std::vector<std::vector<Device>> out;
  for (size_t i = 0; i < devices.size(); i += kDevicesPerSlice) {
    out.emplace_back(devices.begin() + static_cast<std::ptrdiff_t>(i),
                     devices.begin() + static_cast<std::ptrdiff_t>(
                                           std::min(devices.size(), i + kDevicesPerSlice)));
  }
  return out;
}

}  // namespace fabric::dra
