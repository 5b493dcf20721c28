// ParseEnvFile (doctor_run.h) over arbitrary bytes: an error or a map, never a crash, and every
// name it returns is one a shell can assign.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "agent/common/shell.h"
#include "agent/launch/doctor_run.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto env =
      fabric::launch::ParseEnvFile(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!env.ok()) return 0;
  for (const auto& [k, v] : *env) {
    if (!fabric::IsValidEnvName(k) || v.size() > size) std::abort();
  }
  return 0;
}
