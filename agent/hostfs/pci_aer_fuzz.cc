// AER attributes come from the kernel or a container's fake sysfs: the parser answers or refuses,
// never crashes, and an answer holds what the text said.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "agent/hostfs/pci_aer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto r = fabric::ParseAerCounts(text);
  // One line per bit and one TOTAL_ line, each at least "x 0" and a newline between them.
  if (r.ok() && (r->bits.size() > 63 || 4 * (r->bits.size() + 1) - 1 > size)) abort();
  return 0;
}
