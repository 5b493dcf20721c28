// /proc/<pid>/status and mountinfo are the kernel's text, but a container's /proc can be anything
// its runtime mounts: both parsers answer or refuse, never crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "agent/hostfs/process_limits.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)fabric::ParseCapEff(text);
  auto m = fabric::FindMount(text, "/dev/shm");
  if (m && m->mount_point != "/dev/shm") abort();
  return 0;
}
