// Accelerators: every PCI function of a display or processing-accelerator class, GPUs of every
// vendor included, with the vendor named from its PCI id.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/inventory/discovery/discovery_internal.h"
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
  return std::nullopt;
}

}  // namespace

void ReadAccelerators(const HostFs& sys, PciReader* pci, Host* host) {
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
  }
  std::sort(
      host->mutable_accelerators()->begin(), host->mutable_accelerators()->end(),
      [](const Accelerator& a, const Accelerator& b) { return a.pci_address() < b.pci_address(); });
}

}  // namespace fabric::discovery_internal
