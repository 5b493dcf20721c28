// Accelerators: every PCI function of a display, processing-accelerator or co-processor class,
// GPUs of every vendor included, with the vendor named from its PCI id, the GPU's UUID (NVIDIA
// procfs information, amdgpu unique_id) and its index in nvidia-smi or rocm-smi order.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/inventory/discovery/discovery_internal.h"
#include "agent/inventory/discovery/gpu_info.h"
#include "agent/inventory/discovery/parse.h"

namespace fabric::discovery_internal {

using namespace ::fabric::v1;  // NOLINT: the model's messages and enum values

namespace {

struct VendorInfo {
  uint32_t id;
  AcceleratorVendor vendor;
  const char* name;
  bool management_display;
};
constexpr VendorInfo kVendors[] = {
    {0x10de, ACCELERATOR_VENDOR_NVIDIA, "NVIDIA", false},
    {0x1002, ACCELERATOR_VENDOR_AMD, "AMD", false},
    {0x1022, ACCELERATOR_VENDOR_AMD, "AMD", false},
    {0x8086, ACCELERATOR_VENDOR_INTEL, "Intel", false},
    {0x1da3, ACCELERATOR_VENDOR_INTEL, "Habana Labs", false},
    {0x1e52, ACCELERATOR_VENDOR_OTHER, "Tenstorrent", false},
    {0x1ed5, ACCELERATOR_VENDOR_OTHER, "Moore Threads", false},
    {0x1dbf, ACCELERATOR_VENDOR_OTHER, "Graphcore", false},
    // BMC display controllers: present on every server, never a compute device.
    {0x1a03, ACCELERATOR_VENDOR_OTHER, "ASPEED", true},
    {0x102b, ACCELERATOR_VENDOR_OTHER, "Matrox", true},
};

std::optional<AcceleratorKind> KindOf(uint32_t class_code) {
  switch (class_code >> 8) {
    case 0x0300:
      return ACCELERATOR_KIND_VGA;
    case 0x0301:
      return ACCELERATOR_KIND_XGA;
    case 0x0302:
      return ACCELERATOR_KIND_3D;
  }
  if ((class_code >> 16) == 0x03) return ACCELERATOR_KIND_DISPLAY_OTHER;
  if ((class_code >> 16) == 0x12) return ACCELERATOR_KIND_PROCESSING_ACCELERATOR;
  // Co-processors (0x0b40): some compute accelerators present themselves so; the model has no
  // kind of its own for them.
  if ((class_code >> 8) == 0x0b40) return ACCELERATOR_KIND_PROCESSING_ACCELERATOR;
  return std::nullopt;
}

constexpr uint64_t kAmdGpuVendor = 0x1002;  // ATI: AMD's GPUs (0x1022 is AMD's CPU side).

// The NVIDIA driver's view of the GPU: its UUID. No file (driver not loaded, GPU not bound) is no
// problem; a malformed one is a host problem, never a crash.
void ReadNvidiaUuid(const HostFs& proc, Accelerator* acc, Host* host) {
  const std::string path = absl::StrCat("driver/nvidia/gpus/", acc->pci_address(), "/information");
  absl::StatusOr<std::string> text = proc.ReadFile(path);
  if (!text.ok()) {
    NoteTransient(host->mutable_problems(), "accelerators.uuid", path, text.status());
    return;
  }
  absl::StatusOr<NvidiaGpuInfo> info = ParseNvidiaGpuInformation(*text);
  if (!info.ok()) {
    AddProblem(host->mutable_problems(), "accelerators.uuid", path, info.status());
    return;
  }
  acc->set_uuid(info->uuid);
}

// amdgpu's unique_id on the GPU's PCI function, as ROCm names the GPU ("GPU-<unique_id>").
void ReadAmdUniqueId(const HostFs& sys, const std::string& dir, Accelerator* acc, Host* host) {
  const std::string path = absl::StrCat(dir, "/unique_id");
  absl::StatusOr<std::string> text = sys.ReadFile(path);
  if (!text.ok()) {
    NoteTransient(host->mutable_problems(), "accelerators.uuid", path, text.status());
    return;
  }
  absl::StatusOr<std::string> uuid = ParseAmdUniqueId(*text);
  if (!uuid.ok()) {
    AddProblem(host->mutable_problems(), "accelerators.uuid", path, uuid.status());
    return;
  }
  acc->set_uuid(*std::move(uuid));
}

}  // namespace

void ReadAccelerators(const HostFs& sys, const HostFs& proc, PciReader* pci, Host* host) {
  auto names = sys.ListDir("bus/pci/devices");
  if (!names.ok()) {
    AddProblem(host->mutable_problems(), "accelerators", "bus/pci/devices", names.status());
    return;
  }
  for (const std::string& name : *names) {
    const std::string link = absl::StrCat("bus/pci/devices/", name);
    // Only the class is read for every function; the rest only for accelerators.
    auto cls_text = sys.ReadFile(absl::StrCat(link, "/class"));
    if (!cls_text.ok()) {
      AddProblem(host->mutable_problems(), "accelerators", link, cls_text.status());
      continue;
    }
    auto cls = ParseHex(*cls_text);
    if (!cls.ok()) {
      AddProblem(host->mutable_problems(), "accelerators", absl::StrCat(link, "/class"),
                 cls.status());
      continue;
    }
    std::optional<AcceleratorKind> kind = KindOf(static_cast<uint32_t>(*cls));
    if (!kind) continue;
    auto real = sys.RealPath(link);
    if (!real.ok()) {
      AddProblem(host->mutable_problems(), "accelerators", link, real.status());
      continue;
    }
    Accelerator* acc = host->add_accelerators();
    *acc->mutable_pci() = pci->Read(*real);
    acc->set_pci_address(acc->pci().address());
    acc->set_kind(*kind);
    uint64_t vendor_id = 0;
    if (auto v = ParseHex(acc->pci().vendor_id()); v.ok()) vendor_id = *v;
    acc->set_vendor(ACCELERATOR_VENDOR_OTHER);
    acc->set_vendor_name(absl::StrFormat("0x%04x", vendor_id));
    for (const VendorInfo& v : kVendors) {
      if (v.id != vendor_id) continue;
      acc->set_vendor(v.vendor);
      acc->set_vendor_name(v.name);
      acc->set_management_display(v.management_display);
    }
    if (acc->management_display()) continue;
    if (acc->vendor() == ACCELERATOR_VENDOR_NVIDIA) ReadNvidiaUuid(proc, acc, host);
    if (vendor_id == kAmdGpuVendor) ReadAmdUniqueId(sys, *real, acc, host);
  }
  std::sort(
      host->mutable_accelerators()->begin(), host->mutable_accelerators()->end(),
      [](const Accelerator& a, const Accelerator& b) { return a.pci_address() < b.pci_address(); });
  // nvidia-smi's order is PCI bus order of the NVIDIA GPUs; rocm-smi's that of the AMD GPUs.
  uint32_t nvidia = 0;
  uint32_t amd = 0;
  for (Accelerator& a : *host->mutable_accelerators()) {
    if (a.management_display()) continue;
    if (a.vendor() == ACCELERATOR_VENDOR_NVIDIA) {
      a.set_index(nvidia++);
    } else if (auto v = ParseHex(a.pci().vendor_id()); v.ok() && *v == kAmdGpuVendor) {
      a.set_index(amd++);
    }
  }
}

}  // namespace fabric::discovery_internal
