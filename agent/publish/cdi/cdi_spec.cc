#include "agent/publish/cdi/cdi_spec.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "agent/inventory/query/host_query.h"
#include "agent/inventory/topology/topology.h"
#include "agent/policy/select/env.h"
#include "agent/policy/select/gpu_names.h"
#include "agent/policy/select/select.h"
#include "agent/publish/hostfile/host_file.h"

namespace fabric::cdi {
namespace {

std::string UverbsPath(const std::string& uverbs) {
  return absl::StrCat("/dev/infiniband/", uverbs);
}

// The name `fabricctl select --gpus=K` resolves to `pci`: "gpu<K>"; none when no index names it
// (an AMD GPU on a host with NVIDIA ones is named by PCI address only).
std::optional<std::string> GpuDeviceName(const v1::Host& host, const std::string& pci) {
  for (const v1::Accelerator& a : host.accelerators()) {
    if (a.pci_address() != pci || !a.has_index()) continue;
    const std::string k = absl::StrCat(a.index());
    auto resolved = ResolveGpu(host, k, nullptr);
    if (resolved.ok() && resolved->pci_address == pci) return absl::StrCat("gpu", k);
  }
  return std::nullopt;
}

// The all-GPU selection's devices and job environment; nullopt (with a note) when there is none
// this spec can carry.
struct AllGpus {
  std::vector<std::pair<std::string, std::string>> gpus;  // {gpu<K>, its RDMA device}.
  std::set<std::string> devices;                          // Every RDMA device chosen.
  jobenv::EnvMap job;
};
std::optional<AllGpus> SelectAll(const v1::Host& host, const v1::SelectionPolicy& policy,
                                 const std::map<std::string, std::string>& uverbs,
                                 std::vector<std::string>* notes) {
  const std::vector<std::string> gpus = CollectiveGpus(host);
  if (gpus.empty()) {
    notes->push_back("no NVIDIA or AMD GPU: no gpu<K> or all device");
    return std::nullopt;
  }
  // The ports alone: the job environment is rendered once, below.
  auto sel = SelectPorts(host, gpus, policy);
  if (!sel.ok()) {
    notes->push_back(absl::StrCat("no selection for every GPU (", sel.status().message(),
                                  "): no gpu<K> or all device"));
    return std::nullopt;
  }
  AllGpus out;
  for (const v1::GpuAssignment& a : sel->assignments()) {
    if (!uverbs.count(a.rdma_device())) {
      notes->push_back(absl::StrCat(a.rdma_device(), " (chosen for ", a.gpu(),
                                    ") has no uverbs node: no gpu<K> or all device"));
      return std::nullopt;
    }
    out.devices.insert(a.rdma_device());
    if (auto name = GpuDeviceName(host, a.gpu())) {
      out.gpus.emplace_back(*name, a.rdma_device());
    } else {
      notes->push_back(absl::StrCat(a.gpu(), " has no index: in `all` only"));
    }
  }
  auto env = RenderJobEnv(host, *sel, policy);
  if (!env.ok()) {
    notes->push_back(
        absl::StrCat("no job environment (", env.status().message(), "): no gpu<K> or all device"));
    return std::nullopt;
  }
  out.job = std::move(env->job);
  return out;
}

}  // namespace

bool ValidDeviceName(std::string_view name) {
  if (name.empty() || !absl::ascii_isalnum(static_cast<unsigned char>(name.front())) ||
      !absl::ascii_isalnum(static_cast<unsigned char>(name.back()))) {
    return false;
  }
  return std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' ||
           c == ':';
  });
}

absl::StatusOr<std::vector<Device>> Devices(const v1::Host& host, const v1::SelectionPolicy& policy,
                                            std::vector<std::string>* notes) {
  std::vector<std::string> ignored;
  if (notes == nullptr) notes = &ignored;
  std::map<std::string, std::string> uverbs;  // RDMA device -> "uverbs3".
  for (const v1::RdmaDevice& d : host.rdma_devices()) {
    if (!d.uverbs_device().empty()) uverbs[d.name()] = d.uverbs_device();
  }
  const std::optional<AllGpus> all = SelectAll(host, policy, uverbs, notes);
  // The variables every device may carry: the same in each, so any combination agrees.
  const jobenv::EnvMap invariant = all ? jobenv::SubsetInvariant(all->job) : jobenv::EnvMap{};
  auto device = [&](std::string name, const std::vector<std::string>& rdma,
                    const jobenv::EnvMap& env) {
    Device d{std::move(name), {}, env};
    for (const std::string& r : rdma) d.nodes.push_back(UverbsPath(uverbs.at(r)));
    d.nodes.push_back(kRdmaCm);
    return d;
  };

  std::vector<Device> out;
  std::set<std::string> taken = {"all"};
  if (all) {
    std::vector<std::pair<std::string, std::string>> gpus = all->gpus;
    // By K as a number: gpu2 before gpu10.
    std::sort(gpus.begin(), gpus.end(), [](const auto& a, const auto& b) {
      return std::make_pair(a.first.size(), a.first) < std::make_pair(b.first.size(), b.first);
    });
    for (const auto& [name, rdma] : gpus) {
      out.push_back(device(name, {rdma}, invariant));
      taken.insert(name);
    }
  }
  for (const v1::RdmaDevice& d : host.rdma_devices()) {
    if (!uverbs.count(d.name())) {
      notes->push_back(absl::StrCat(d.name(), " has no uverbs node: no device"));
    } else if (!ValidDeviceName(d.name()) || taken.count(d.name())) {
      notes->push_back(absl::StrCat(d.name(), " is not a name CDI takes here: no device"));
    } else {
      out.push_back(device(d.name(), {d.name()}, invariant));
    }
  }
  if (all) {
    std::vector<std::string> chosen;  // In the host's order, as the per-NIC devices.
    for (const v1::RdmaDevice& d : host.rdma_devices()) {
      if (all->devices.count(d.name())) chosen.push_back(d.name());
    }
    out.push_back(device("all", chosen, all->job));
  }
  if (out.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("no RDMA device with a uverbs node under ",
                                                      host.sysfs_root(), ": no CDI spec"));
  }
  return out;
}

namespace {

// `topo_file`: the host's NCCL topology file jobs are given (NcclTopoFileForJobs), mounted
// read-only at its own path by every device of the spec; empty: none.
std::string RenderSpec(const std::vector<Device>& devices, const SpecOptions& opt,
                       const std::string& topo_file) {
  nlohmann::ordered_json spec;
  spec["cdiVersion"] = kCdiVersion;
  spec["kind"] = kKind;
  const bool plugin =
      !opt.nccl_env_plugin.empty() && !opt.pod_helper.empty() && !opt.host_file_dir.empty();
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const Device& d : devices) {
    nlohmann::ordered_json edits;
    nlohmann::ordered_json env = nlohmann::ordered_json::array();
    for (const auto& [k, v] : d.env) {
      // A set variable wins over the plugin's answer: NCCL's are left to it.
      if (plugin && jobenv::AnsweredByNcclEnvPlugin(k)) continue;
      env.push_back(absl::StrCat(k, "=", v));
    }
    if (!env.empty()) edits["env"] = std::move(env);
    nlohmann::ordered_json nodes = nlohmann::ordered_json::array();
    for (const std::string& path : d.nodes) {
      nlohmann::ordered_json n;
      n["path"] = path;
      if (!opt.dev_root.empty()) n["hostPath"] = absl::StrCat(opt.dev_root, path);
      nodes.push_back(std::move(n));
    }
    edits["deviceNodes"] = std::move(nodes);
    nlohmann::ordered_json dev;
    dev["name"] = d.name;
    dev["containerEdits"] = std::move(edits);
    list.push_back(std::move(dev));
  }
  spec["devices"] = std::move(list);
  // The spec's own edits: whichever of its devices a container takes.
  std::vector<std::pair<std::string, std::string>> binds;
  if (plugin) {
    binds = {{opt.host_file_dir, hostfile::kDefaultDir},
             {opt.pod_helper, kPodHelperInContainer},
             {opt.nccl_env_plugin, kNcclEnvPluginInContainer}};
  }
  if (!topo_file.empty()) binds.emplace_back(topo_file, topo_file);
  if (!binds.empty()) {
    nlohmann::ordered_json mounts = nlohmann::ordered_json::array();
    for (const auto& [host, container] : binds) {
      nlohmann::ordered_json m;
      m["hostPath"] = host;
      m["containerPath"] = container;
      m["options"] = nlohmann::ordered_json::array({"ro", "nosuid", "nodev", "bind"});
      mounts.push_back(std::move(m));
    }
    nlohmann::ordered_json edits;
    if (plugin) {
      edits["env"] = nlohmann::ordered_json::array(
          {absl::StrCat("NCCL_ENV_PLUGIN=", kNcclEnvPluginInContainer)});
    }
    edits["mounts"] = std::move(mounts);
    spec["containerEdits"] = std::move(edits);
  }
  // Invalid UTF-8 (from an operator's static env) is replaced rather than thrown on.
  return spec.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace

std::string SpecJson(const std::vector<Device>& devices, const SpecOptions& opt) {
  return RenderSpec(devices, opt, "");
}

absl::StatusOr<std::string> SpecJson(const v1::Host& host, const v1::SelectionPolicy& policy,
                                     const SpecOptions& opt) {
  auto devices = Devices(host, policy);
  if (!devices.ok()) return devices.status();
  return RenderSpec(*devices, opt, NcclTopoFileForJobs(host));
}

}  // namespace fabric::cdi
