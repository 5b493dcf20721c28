// GPU names (gpu_names.h): PCI addresses, indices, UUIDs, MIG devices and visible-device lists.
#include "agent/policy/select/gpu_names.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "agent/common/excerpt.h"
#include "agent/common/strings.h"
#include "agent/inventory/discovery/gpu_info.h"
#include "agent/inventory/discovery/parse.h"
#include "agent/inventory/query/host_query.h"
#include "agent/policy/select/candidates.h"

namespace fabric {

using v1::Accelerator;
using v1::Host;

// --- NVML, declared here: the few prototypes used (nvml.h, R470+) -----------------------------

struct MigResolverImpl::Nvml {
  using Device = struct nvmlDevice_st*;
  // nvmlPciInfo_t as nvmlDeviceGetPciInfo_v3 fills it.
  struct PciInfo {
    char bus_id_legacy[16];
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pci_device_id;
    unsigned int pci_subsystem_id;
    char bus_id[32];
  };
  static constexpr int kNotFound = 6;  // NVML_ERROR_NOT_FOUND

  void* handle = nullptr;
  std::string error;  // Why NVML cannot be used; empty when it can.
  int (*init)() = nullptr;
  int (*by_uuid)(const char*, Device*) = nullptr;
  int (*parent_of_mig)(Device, Device*) = nullptr;
  int (*pci_info)(Device, PciInfo*) = nullptr;
  const char* (*error_string)(int) = nullptr;

  std::string Why(int rc) const {
    const char* s = error_string != nullptr ? error_string(rc) : nullptr;
    return s != nullptr ? absl::StrCat(s, " (", rc, ")") : absl::StrCat("NVML error ", rc);
  }
};

MigResolverImpl::MigResolverImpl(std::string library) : library_(std::move(library)) {}

MigResolverImpl::~MigResolverImpl() {
  // NVML stays loaded: unloading a driver library at exit gains nothing and risks its threads.
}

const MigResolverImpl::Nvml* MigResolverImpl::Load() const {
  std::call_once(once_, [this] {
    auto n = std::make_unique<Nvml>();
    n->handle = ::dlopen(library_.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (n->handle == nullptr) {
      const char* e = ::dlerror();
      n->error = e != nullptr ? e : absl::StrCat(library_, ": cannot be loaded");
      nvml_ = std::move(n);
      return;
    }
    auto sym = [&](const char* name, auto* fn) {
      void* p = ::dlsym(n->handle, name);
      if (p == nullptr && n->error.empty()) n->error = absl::StrCat(library_, " lacks ", name);
      *fn = reinterpret_cast<std::remove_pointer_t<decltype(fn)>>(p);
    };
    sym("nvmlInit_v2", &n->init);
    sym("nvmlDeviceGetHandleByUUID", &n->by_uuid);
    sym("nvmlDeviceGetDeviceHandleFromMigDeviceHandle", &n->parent_of_mig);
    sym("nvmlDeviceGetPciInfo_v3", &n->pci_info);
    sym("nvmlErrorString", &n->error_string);
    if (n->error.empty()) {
      if (int rc = n->init(); rc != 0) n->error = absl::StrCat("nvmlInit_v2: ", n->Why(rc));
    }
    nvml_ = std::move(n);
  });
  return nvml_.get();
}

absl::StatusOr<std::string> MigResolverImpl::ParentPciAddress(std::string_view mig_uuid) const {
  const Nvml* n = Load();
  if (!n->error.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        Av(mig_uuid.substr(0, 64)),
        " needs libnvidia-ml (NVML), which is not loadable: ", n->error.substr(0, 200)));
  }
  const std::string uuid(mig_uuid);
  Nvml::Device mig = nullptr;
  if (int rc = n->by_uuid(uuid.c_str(), &mig); rc != 0) {
    if (rc == Nvml::kNotFound) {
      return absl::NotFoundError(absl::StrCat("NVML knows no MIG device ", Excerpt(mig_uuid)));
    }
    return absl::FailedPreconditionError(
        absl::StrCat("NVML cannot look up ", Excerpt(mig_uuid), ": ", n->Why(rc)));
  }
  Nvml::Device parent = nullptr;
  if (int rc = n->parent_of_mig(mig, &parent); rc != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("NVML has no parent GPU for ", Excerpt(mig_uuid), ": ", n->Why(rc)));
  }
  Nvml::PciInfo info{};
  if (int rc = n->pci_info(parent, &info); rc != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("NVML has no PCI address for ", Excerpt(mig_uuid), ": ", n->Why(rc)));
  }
  info.bus_id[sizeof(info.bus_id) - 1] = '\0';
  return std::string(info.bus_id);
}

const MigResolver* ProcessMigResolver() {
  static const MigResolverImpl* const kResolver = new MigResolverImpl();
  return kResolver;
}

// --- ResolveGpu ---------------------------------------------------------------------------------

namespace {

constexpr size_t kLongestName = 64;

bool AllDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

bool HasPrefix(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() &&
         absl::EqualsIgnoreCase(Av(s.substr(0, prefix.size())), Av(prefix));
}

bool HasNvidiaIndex(const Host& host) {
  for (const Accelerator& a : host.accelerators()) {
    if (a.vendor() == v1::ACCELERATOR_VENDOR_NVIDIA && a.has_index()) return true;
  }
  return false;
}

// The accelerator with this index among the NVIDIA GPUs (`nvidia`) or the others with an index.
const Accelerator* ByIndex(const Host& host, bool nvidia, uint64_t index, size_t* count) {
  const Accelerator* found = nullptr;
  *count = 0;
  for (const Accelerator& a : host.accelerators()) {
    if (!a.has_index() || (a.vendor() == v1::ACCELERATOR_VENDOR_NVIDIA) != nvidia) continue;
    ++*count;
    if (a.index() == index) found = &a;
  }
  return found;
}

// Whether a model address (canonical as discovery writes it, or not) is `canonical`.
bool PciEquals(const std::string& addr, const std::string& canonical) {
  if (addr == canonical) return true;
  // Discovery writes canonical addresses: parse (and allocate) only one that is not.
  if (addr.size() == canonical.size() &&
      std::none_of(addr.begin(), addr.end(), [](char ch) { return absl::ascii_isupper(ch); })) {
    return false;
  }
  absl::StatusOr<std::string> c = ParsePciAddress(addr);
  return c.ok() && *c == canonical;
}

absl::StatusOr<ResolvedGpu> ByPciAddress(const Host& host, std::string_view given,
                                         const std::string& canonical, std::string_view what) {
  const Accelerator* found = nullptr;
  for (const Accelerator& a : host.accelerators()) {
    if (PciEquals(a.pci_address(), canonical)) found = &a;
  }
  if (found == nullptr) {
    std::vector<std::string> known;  // Only for the message: no allocation on the hot path.
    for (const Accelerator& a : host.accelerators()) {
      absl::StatusOr<std::string> c = ParsePciAddress(a.pci_address());
      if (!a.management_display()) known.push_back(c.ok() ? *c : a.pci_address());
    }
    // NotFound, not InvalidArgument: the name is well formed, the host lacks it.
    return absl::NotFoundError(absl::StrFormat(
        "%s %s%s is not an accelerator of this host (GPUs here: %s)", Av(what), canonical,
        given == canonical ? "" : absl::StrCat(" (", Excerpt(given), ")"),
        known.empty() ? "none" : absl::StrJoin(known, ", ")));
  }
  if (found->management_display()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s %s is a management display (%s), not a GPU", Av(what), canonical,
                        found->vendor_name().empty() ? "BMC VGA" : found->vendor_name()));
  }
  return ResolvedGpu{found, canonical};
}

}  // namespace

absl::StatusOr<ResolvedGpu> ResolveGpu(const Host& host, std::string_view given,
                                       const MigResolver* mig, std::string_view what) {
  auto malformed = [&](std::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat(Av(what), " ", Excerpt(given), " is malformed: ", Av(why)));
  };
  if (given.size() > kLongestName) {
    return malformed(absl::StrCat(given.size(), " characters, at most ", kLongestName));
  }
  if (AllDigits(given)) {
    if (given.size() > 9) return malformed("index too large");
    const uint64_t index = std::stoull(std::string(given));
    const bool nvidia = HasNvidiaIndex(host);
    size_t count = 0;
    const Accelerator* a = ByIndex(host, nvidia, index, &count);
    if (a == nullptr) {
      return absl::NotFoundError(absl::StrFormat("%s index %d: this host has %d %s GPUs (%s order)",
                                                 Av(what), index, count, nvidia ? "NVIDIA" : "AMD",
                                                 nvidia ? "nvidia-smi" : "rocm-smi"));
    }
    return ByPciAddress(host, given, select_internal::CanonicalPci(a->pci_address()), what);
  }
  if (HasPrefix(given, "GPU-")) {
    std::string want;
    if (absl::StatusOr<std::string> nv = ParseNvidiaUuid(given); nv.ok()) {
      want = *nv;
    } else if (std::string_view id = given.substr(4);
               id.size() == 16 && ParseAmdUniqueId(id).ok()) {
      want = *ParseAmdUniqueId(id);
    } else {
      return malformed(
          "GPU-<uuid> is 8-4-4-4-12 hex digits (NVIDIA) or 16 hex digits (AMD unique_id)");
    }
    size_t with_uuid = 0;
    for (const Accelerator& a : host.accelerators()) {
      if (a.uuid().empty()) continue;
      ++with_uuid;
      if (absl::EqualsIgnoreCase(a.uuid(), want)) {
        return ByPciAddress(host, given, select_internal::CanonicalPci(a.pci_address()), what);
      }
    }
    return absl::NotFoundError(absl::StrFormat(
        "%s %s: no GPU of this host has this UUID (%d GPUs here have one; fabricctl inventory "
        "lists them)",
        Av(what), Excerpt(given), with_uuid));
  }
  if (HasPrefix(given, "MIG-")) {
    if (!ParseNvidiaUuid(given).ok()) {
      return malformed("MIG-<uuid> is 8-4-4-4-12 hex digits");
    }
    if (mig == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat(Av(given), " needs libnvidia-ml (NVML), which is not loadable here"));
    }
    absl::StatusOr<std::string> parent = mig->ParentPciAddress(given);
    if (!parent.ok()) return parent.status();
    absl::StatusOr<std::string> canonical = ParsePciAddress(*parent);
    if (!canonical.ok()) {
      return absl::InternalError(
          absl::StrCat("NVML gave ", Excerpt(*parent), " as the GPU of ", Excerpt(given)));
    }
    return ByPciAddress(host, given, *canonical, what);
  }
  absl::StatusOr<std::string> canonical = ParseGpuName(given, what);
  if (!canonical.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(canonical.status().message(), " (nor an index, GPU-<uuid> or MIG-<uuid>)"));
  }
  return ByPciAddress(host, given, *canonical, what);
}

// --- ExpandVisible ------------------------------------------------------------------------------

namespace {

struct Var {
  const char* name;
  const std::string* value;  // null: unset
};

absl::StatusOr<std::vector<std::string>> SplitList(const Var& v) {
  const std::string_view value = *v.value;
  const std::string_view t = Trim(value);
  if (t.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(v.name, " is empty: it makes no GPU visible"));
  }
  if (value.size() > 4096) {
    return absl::InvalidArgumentError(absl::StrCat(v.name, " is longer than 4096 characters"));
  }
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= value.size()) {
    size_t comma = value.find(',', start);
    if (comma == std::string_view::npos) comma = value.size();
    const std::string_view entry = Trim(value.substr(start, comma - start));
    if (entry.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(v.name, "=", Excerpt(value), " has an empty entry"));
    }
    out.emplace_back(entry);
    start = comma + 1;
  }
  return out;
}

// `inner`'s indices counted within `outer` (the container rule); UUIDs pass as they are.
absl::StatusOr<std::vector<std::string>> Within(const Var& outer,
                                                const std::vector<std::string>& base,
                                                const Var& inner,
                                                const std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (const std::string& n : names) {
    if (!AllDigits(n)) {
      out.push_back(n);
      continue;
    }
    const size_t i = n.size() > 9 ? base.size() : std::stoul(n);
    if (i >= base.size()) {
      return absl::NotFoundError(absl::StrFormat("%s=%s: index %s, but %s makes %d GPUs visible",
                                                 inner.name, Excerpt(*inner.value), n, outer.name,
                                                 base.size()));
    }
    out.push_back(base[i]);
  }
  return out;
}

}  // namespace

bool HasVisible(const v1::VisibleDevices& v) {
  return v.has_nvidia_visible_devices() || v.has_cuda_visible_devices() ||
         v.has_rocr_visible_devices() || v.has_hip_visible_devices();
}

absl::StatusOr<std::vector<std::string>> ExpandVisible(const v1::VisibleDevices& visible,
                                                       const Host& host) {
  const Var nvidia{"NVIDIA_VISIBLE_DEVICES", visible.has_nvidia_visible_devices()
                                                 ? &visible.nvidia_visible_devices()
                                                 : nullptr};
  const Var cuda{"CUDA_VISIBLE_DEVICES",
                 visible.has_cuda_visible_devices() ? &visible.cuda_visible_devices() : nullptr};
  const Var rocr{"ROCR_VISIBLE_DEVICES",
                 visible.has_rocr_visible_devices() ? &visible.rocr_visible_devices() : nullptr};
  const Var hip{"HIP_VISIBLE_DEVICES",
                visible.has_hip_visible_devices() ? &visible.hip_visible_devices() : nullptr};

  // One outer and one inner variable per vendor family: NVIDIA's first.
  const bool nv_family = nvidia.value != nullptr || cuda.value != nullptr;
  const Var& outer = nv_family ? nvidia : rocr;
  const Var& inner = nv_family ? cuda : hip;
  if (outer.value == nullptr && inner.value == nullptr) {
    return absl::InvalidArgumentError(
        "no GPU is visible: none of NVIDIA_VISIBLE_DEVICES, CUDA_VISIBLE_DEVICES, "
        "ROCR_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES is set");
  }
  std::vector<std::string> names;
  if (outer.value != nullptr) {
    if (nv_family) {
      const std::string lower = absl::AsciiStrToLower(Av(Trim(*outer.value)));
      if (lower == "all" || lower == "none" || lower == "void" || lower.empty()) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "NVIDIA_VISIBLE_DEVICES=%s names no GPU by itself (all, none, void and empty are "
            "the container runtime's): give UUIDs or indices",
            Excerpt(*outer.value)));
      }
    }
    absl::StatusOr<std::vector<std::string>> list = SplitList(outer);
    if (!list.ok()) return list.status();
    names = *std::move(list);
  }
  if (inner.value != nullptr) {
    absl::StatusOr<std::vector<std::string>> list = SplitList(inner);
    if (!list.ok()) return list.status();
    if (outer.value != nullptr) {
      absl::StatusOr<std::vector<std::string>> within = Within(outer, names, inner, *list);
      if (!within.ok()) return within.status();
      names = *std::move(within);
    } else {
      names = *std::move(list);
    }
  }
  // A bare index means an NVIDIA GPU on a host that has them: name AMD GPUs by PCI address.
  if (!nv_family && HasNvidiaIndex(host)) {
    for (std::string& n : names) {
      if (!AllDigits(n) || n.size() > 9) continue;
      size_t count = 0;
      const Accelerator* a = ByIndex(host, /*nvidia=*/false, std::stoul(n), &count);
      if (a == nullptr) {
        return absl::NotFoundError(
            absl::StrFormat("%s: AMD GPU index %s, but this host has %d (rocm-smi order)",
                            rocr.value != nullptr ? rocr.name : hip.name, n, count));
      }
      n = a->pci_address();
    }
  }
  return names;
}

absl::StatusOr<std::vector<std::string>> RequestedGpus(const Host& host,
                                                       const v1::SelectNicsRequest& req) {
  const bool by_visible = HasVisible(req.visible());
  const int kinds = (by_visible ? 1 : 0) + (req.all() ? 1 : 0) + (req.gpus().empty() ? 0 : 1);
  if (kinds > 1) {
    return absl::InvalidArgumentError("gpus, all and visible: give one of them");
  }
  if (by_visible) return ExpandVisible(req.visible(), host);
  if (req.all()) {
    std::vector<std::string> all = CollectiveGpus(host);
    if (all.empty()) {
      return absl::NotFoundError(ComputeGpus(host).empty()
                                     ? "all GPUs: the host has no GPU or accelerator"
                                     : "all GPUs: the host has no NVIDIA or AMD GPU (name other "
                                       "accelerators by address)");
    }
    return all;
  }
  if (req.gpus().empty()) {
    return absl::InvalidArgumentError(
        "gpus is empty: name at least one GPU (PCI address, index, GPU-<uuid>, MIG-<uuid>), or "
        "send all or visible");
  }
  return std::vector<std::string>(req.gpus().begin(), req.gpus().end());
}

absl::StatusOr<std::string> ParseGpuName(std::string_view given, std::string_view what) {
  constexpr size_t kLongest = 16;  // "00000000:17:00.0", nvidia-smi's form
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat(Av(what), " ", Excerpt(given), " is not a PCI address: ", Av(why)));
  };
  if (given.empty()) return bad("empty");
  if (given.size() > kLongest) {
    return bad(absl::StrCat(given.size(), " characters, at most ", kLongest));
  }
  // ParsePciAddress forgives the whitespace around sysfs values; a caller's name is exact.
  for (char ch : given) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(ch)) && ch != ':' && ch != '.') {
      return bad(absl::StrCat("unexpected ", Excerpt(std::string_view(&ch, 1)),
                              " ([domain:]bus:device.function, in hex)"));
    }
  }
  absl::StatusOr<std::string> canonical = ParsePciAddress(given);
  if (!canonical.ok()) return bad("[domain:]bus:device.function, in hex");
  return canonical;
}

}  // namespace fabric
