// ParseHostFile on arbitrary bytes: fabric-env reads a file anyone with write access to the
// directory could have replaced. Must never crash, and what it accepts must serialize again.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "agent/publish/hostfile/host_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto p =
      fabric::hostfile::ParseHostFile(std::string_view(reinterpret_cast<const char*>(data), size));
  if (p.ok()) {
    (void)fabric::hostfile::HostFileBytes(p->host(), p->policy());
  }
  return 0;
}
