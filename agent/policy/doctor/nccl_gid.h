// Which RoCE GID NCCL will use on a port, computed as NCCL computes it (net_ib/connect.cc,
// ncclIbGetGidIndex, read at NCCL 2.2x): NCCL_IB_GID_INDEX when set (strtoll, base 0: "abc" reads
// as 0, "010" as 8); else, from index 0 up, the first GID of NCCL_IB_ADDR_FAMILY (AF_INET by
// default) inside NCCL_IB_ADDR_RANGE, replaced later only by one of the wanted RoCE version
// (NCCL_IB_ROCE_VERSION_NUM, 2) when the kept one has another version or is unusable. So with two
// pods' addresses on one port, NCCL's own pick is the lower index, whoever owns it: the doctor
// compares the pick with this container's addresses.
#pragma once

#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "agent/rdma/gid_choice.h"

namespace fabric::doctor {

struct NcclGidRule {
  int64_t index = -1;  // NCCL_IB_GID_INDEX; negative: choose by the fields below.
  sa_family_t family = AF_INET;
  // NCCL_IB_ADDR_RANGE, when it parses for `family` (NCCL ignores one that does not).
  std::optional<std::array<uint8_t, 16>> range;  // IPv4 in the first 4 bytes.
  int prefix_len = 0;
  int roce_version = 2;
  std::vector<std::string> problems;  // What NCCL reads differently from how it looks.
};

// `getenv` returns nullptr for an unset variable.
NcclGidRule ReadNcclGidRule(const std::function<const char*(const char*)>& getenv);

// The index NCCL uses on a RoCE port whose table has `table_len` entries; `table` lists the
// readable ones (a missing index reads as an empty GID of unknown type, as in a container whose
// sysfs hides it).
int NcclGidPick(const std::vector<rdma::GidSlot>& table, int table_len, const NcclGidRule& rule);

}  // namespace fabric::doctor
