// A kubeconfig file's bytes, as the agent parses them: a config or an error, never a crash or an
// exception out of yaml-cpp, and never a server that is not https.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/strings/match.h"
#include "agent/publish/kubeapi/kube_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto parsed = fabric::kubeapi::ParseKubeconfig(text, "/etc/fabric");
  if (parsed.ok() && !absl::StartsWith(parsed->config.server, "https://")) __builtin_trap();
  return 0;
}
