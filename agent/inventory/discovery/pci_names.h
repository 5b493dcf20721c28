// Vendor and device names from the PCI ID database (pci.ids), through libpci: the names lspci
// prints, kept current by Debian's pci.ids package rather than by a table of ours.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace fabric {

class PciNames {
 public:
  virtual ~PciNames() = default;
  // "Mellanox Technologies"; empty when the database has no such vendor or cannot be read.
  virtual std::string Vendor(uint16_t vendor) const = 0;
  // "MT2910 Family [ConnectX-7]"; empty when unknown.
  virtual std::string Device(uint16_t vendor, uint16_t device) const = 0;
};

// libpci's lookup in `ids_file` (empty: the library's default, /usr/share/misc/pci.ids), loaded
// on first use. Neither udev's hwdb nor DNS is asked: the names depend on the file alone.
// Thread-safe.
std::unique_ptr<PciNames> LibPciNames(const std::string& ids_file = "");

// A lookup that knows no names.
std::unique_ptr<PciNames> EmptyPciNames();

// The process's instance over the default database (parsed once, about 15 ms).
const PciNames& DefaultPciNames();
// For one-shot processes that show no names (fabricctl env and exec, at a job's start):
// DefaultPciNames gives empty names from then on, and the database is never loaded.
void DisableDefaultPciNames();

// The short name operators use: the last bracketed part of a database name when it has one
// ("GH100 [H100 SXM5 80GB]" -> "H100 SXM5 80GB", "MT2910 Family [ConnectX-7]" -> "ConnectX-7"),
// else the whole name.
std::string ShortPciName(const std::string& name);

}  // namespace fabric
