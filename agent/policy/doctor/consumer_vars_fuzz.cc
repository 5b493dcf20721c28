// NCCL_IB_HCA and UCX_NET_DEVICES values are the user's bytes: every parse answers, never crashes,
// and what it reports is bounded by what NCCL keeps.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "agent/policy/doctor/consumer_vars.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  using namespace fabric::doctor;
  const DeviceList nccl = ParseNcclList(text);
  if (nccl.entries.size() > kNcclMaxEntries) abort();
  const DeviceList ucx = ParseUcxDevices(text);
  (void)Selects(nccl, "mlx5_1", 1);
  (void)Selects(ucx, "mlx5_1", 1);
  const UcxTransports tls = ParseUcxTls(text);
  if (tls.why.empty()) abort();
  (void)PrefixSurprises(nccl, {"mlx5_1", "mlx5_10", "mlx5_11", "bnxt_re0"});
  return 0;
}
