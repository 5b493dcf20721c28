// LibPciNames for builds without libpci (the static fabric-env: Debian ships no libpci.a): no
// names. Discovery's other facts do not depend on them.
#include <memory>
#include <string>

#include "agent/inventory/discovery/pci_names.h"

namespace fabric {

std::unique_ptr<PciNames> LibPciNames(const std::string&) { return EmptyPciNames(); }

}  // namespace fabric
