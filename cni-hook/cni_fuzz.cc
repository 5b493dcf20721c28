// Fuzzes what fabric-cni reads from stdin: the network config for every command, the pod
// interfaces of prevResult, and the JSON written back (result and error).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "cni-hook/cni.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fabric::cni;
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  (void)PeekVersion(in);
  for (Command cmd :
       {Command::kAdd, Command::kDel, Command::kCheck, Command::kStatus, Command::kGc}) {
    auto config = ParseConfig(in, cmd);
    if (!config.ok()) {
      (void)ErrorJson(PeekVersion(in), config.status());
      continue;
    }
    if (config->prev_result) {
      auto pods = PodInterfaces(*config->prev_result, config->cni_version);
      if (pods.ok()) {
        for (const PodInterface& p : *pods) {
          for (const auto& a : p.addresses) {
            if (a.family != AF_INET && a.family != AF_INET6) __builtin_trap();
          }
        }
      }
    }
    (void)ResultJson(*config);
  }
  return 0;
}
