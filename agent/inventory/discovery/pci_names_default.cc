// What every build of the PCI names shares: the empty lookup one-shot processes use, the process's
// default instance and the short names. The lookup itself is pci_names.cc (libpci) or, in the
// static fabric-env where libpci has no archive, pci_names_none.cc.
#include <atomic>
#include <memory>
#include <string>

#include "agent/inventory/discovery/pci_names.h"

namespace fabric {

namespace {
std::atomic<bool> g_names_disabled{false};

class NoPciNames final : public PciNames {
 public:
  std::string Vendor(uint16_t) const override { return ""; }
  std::string Device(uint16_t, uint16_t) const override { return ""; }
};
}  // namespace

std::unique_ptr<PciNames> EmptyPciNames() { return std::make_unique<NoPciNames>(); }

void DisableDefaultPciNames() { g_names_disabled.store(true); }

const PciNames& DefaultPciNames() {
  static const NoPciNames none;
  if (g_names_disabled.load()) return none;
  static const PciNames* names = LibPciNames().release();  // Lives as long as the process.
  return *names;
}

std::string ShortPciName(const std::string& name) {
  const size_t close = name.rfind(']');
  const size_t open = close == std::string::npos ? std::string::npos : name.rfind('[', close);
  if (open == std::string::npos || close == open + 1) return name;
  return name.substr(open + 1, close - open - 1);
}

}  // namespace fabric
