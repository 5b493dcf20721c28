// fabric-env's answer as the NCCL env plugin reads it: any bytes give a table or a refusal, never
// a crash; every name in the table is found again, with a value that is a string.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "agent/ncclenv/env_records.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fabric_env_table t;
  size_t skipped = 0;
  if (fabric_env_table_parse(reinterpret_cast<const char*>(data), size, &t, &skipped) != 0) {
    if (t.count != 0) std::abort();
    return 0;
  }
  for (size_t i = 0; i < t.count; ++i) {
    if (i > 0 && std::strcmp(t.names[i - 1], t.names[i]) >= 0) std::abort();  // sorted, unique
    if (fabric_env_table_get(&t, t.names[i]) != t.values[i]) std::abort();
  }
  fabric_env_table_free(&t);
  return 0;
}
