// PCIe AER (Advanced Error Reporting) counters of one PCI function, from the aer_dev_correctable,
// aer_dev_nonfatal and aer_dev_fatal attributes of /sys/bus/pci/devices/BDF (Linux 4.19 and
// later; drivers/pci/pcie/aer.c). For the health monitor: correctable errors that keep climbing
// on a NIC, a GPU or a switch port on their path mean a marginal link before it fails outright.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/hostfs/host_fs.h"

namespace fabric {

struct AerCounts {
  uint64_t total = 0;  // The TOTAL_ERR_* line: error messages sent, not the sum of the bits.
  std::vector<std::pair<std::string, uint64_t>> bits;  // In file order, zero counts included.
};

// One aer_dev_* file's text: "<name> <decimal>" lines, then "TOTAL_<kind> <decimal>". Bit names
// are taken as written, as kernels add bits (and print unnamed ones as "dev_cor_errs_bit[N]").
// InvalidArgument, quoting an excerpt of the line, for: a line not of that form (CR included), a
// count over 2^64-1, more than 64 lines, a missing or a second TOTAL_ line. A missing final
// newline is accepted.
absl::StatusOr<AerCounts> ParseAerCounts(std::string_view text);

struct PciAer {
  AerCounts correctable, nonfatal, fatal;
};

// Reads the three files of bus/pci/devices/`bdf` (e.g. "0000:18:00.0") below `sysfs`'s root.
// NotFound when the function is absent or has no AER files (no AER capability, as SR-IOV VFs, or
// a kernel before 4.19); InvalidArgument for a `bdf` that is not one; any other error names the
// file (a failed read keeps HostFs's status, so IsTransientReadError still answers).
absl::StatusOr<PciAer> ReadPciAer(const HostFs& sysfs, std::string_view bdf);

}  // namespace fabric
