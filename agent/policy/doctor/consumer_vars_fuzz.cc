// NCCL_IB_HCA, UCX_NET_DEVICES, UCX_TLS, NCCL's GID, integer and level variables are the user's
// bytes: every parse answers, never crashes, and what it reports is bounded by what NCCL keeps
// (and the doctor reads of UCX's lists: CheckListBounds refuses exactly the lists the parser
// stops short of).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "agent/policy/doctor/consumer_vars.h"
#include "agent/policy/doctor/nccl_gid.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  using namespace fabric::doctor;
  const DeviceList nccl = ParseNcclList(text);
  if (nccl.entries.size() > kNcclMaxEntries) abort();
  const DeviceList ucx = ParseUcxDevices(text);
  if (ucx.entries.size() > kUcxMaxEntries) abort();
  // The bound refused before the work counts what the parser would read past it.
  const bool refused = !CheckListBounds({{"UCX_NET_DEVICES", std::string(text)}}).ok();
  const bool stopped = std::any_of(ucx.problems.begin(), ucx.problems.end(),
                                   [](const auto& p) { return p.rfind("more than", 0) == 0; });
  if (refused != stopped) abort();
  for (const ListEntry& e : ucx.entries) {
    for (char c : EntryText(e)) {
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) abort();
    }
  }
  (void)Selects(nccl, "mlx5_1", 1);
  (void)Selects(ucx, "mlx5_1", 1);
  const UcxTransports tls = ParseUcxTls(text);
  if (tls.why.empty()) abort();
  // The same bytes as each of NCCL's GID variables: the pick stays inside the table.
  const std::string value(text);
  for (const char* name : {"NCCL_IB_GID_INDEX", "NCCL_IB_ADDR_RANGE", "NCCL_IB_ADDR_FAMILY",
                           "NCCL_IB_ROCE_VERSION_NUM"}) {
    const NcclGidRule rule = ReadNcclGidRule(
        [&](const char* n) { return std::string_view(n) == name ? value.c_str() : nullptr; });
    const int pick = NcclGidPick({}, 16, rule);
    if (rule.index < 0 && (pick < 0 || pick >= 16)) abort();
  }
  (void)PrefixSurprises(nccl, {"mlx5_1", "mlx5_10", "mlx5_11", "bnxt_re0"});
  // NCCL's integer and level settings: a problem, when there is one, names the variable and
  // shows the value escaped.
  const NcclInt n = ReadNcclInt("NCCL_IB_TIMEOUT", text, 20);
  const NcclLevel level = ReadNcclLevel("NCCL_NET_GDR_LEVEL", text);
  for (const std::string* p : {&n.problem, &level.problem}) {
    if (!p->empty() && p->rfind("NCCL_", 0) != 0) abort();
    for (char c : *p) {
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) abort();
    }
  }
  if (text.empty() && (n.set || n.value != 20 || !level.name.empty())) abort();
  return 0;
}
