// The consumers' device variables read the way each consumer reads them, so that `fabricctl
// doctor` can say what a library will really open, not what the user meant. Pure: the caller
// gives the value and, to match, the device names of the host.
//
// NCCL (and RCCL) read NCCL_IB_HCA and NCCL_SOCKET_IFNAME with one parser: an optional '^'
// (exclude), then an optional '=' (exact names; without it each entry is a prefix: `mlx5_1` also
// takes `mlx5_10`), then comma-separated `name[:port[:...]]` entries, the port read with atoi
// (garbage reads as 0), names never trimmed, at most MAX_IB_DEVS entries for NCCL_IB_HCA (32 in
// the 2.1x-2.2x sources) and MAX_IFS (16) for NCCL_SOCKET_IFNAME, the rest ignored.
// UCX reads UCX_NET_DEVICES as exact `device:port` names, or `all`.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace fabric::doctor {

inline constexpr size_t kNcclMaxEntries = 32;    // NCCL's MAX_IB_DEVS (NCCL_IB_HCA).
inline constexpr size_t kNcclMaxIfs = 16;        // NCCL's MAX_IFS (NCCL_SOCKET_IFNAME).
inline constexpr size_t kNcclMaxNameBytes = 63;  // netIf.prefix[64].

struct ListEntry {
  std::string name;
  int port = -1;  // -1: any port.
};

// What a consumer will do with a value, and what in it the consumer takes silently but the user
// most likely did not mean (each a sentence naming the entry).
struct DeviceList {
  bool all = false;      // UCX's "all".
  bool exclude = false;  // NCCL's leading '^'.
  bool exact = false;    // NCCL's '=' (UCX: always).
  std::vector<ListEntry> entries;
  std::vector<std::string> problems;
};

DeviceList ParseNcclList(std::string_view value, size_t max_entries = kNcclMaxEntries);
DeviceList ParseUcxDevices(std::string_view value);

// Whether the consumer that produced `list` uses `device` port `port`.
bool Selects(const DeviceList& list, std::string_view device, int port);

// Entries of a prefix list (no '=') that take more than the device of their own name, among
// `devices`: {"mlx5_1 also takes mlx5_10, mlx5_11"}. An exact or UCX list has none.
std::vector<std::string> PrefixSurprises(const DeviceList& list,
                                         const std::vector<std::string>& devices);

// A port as "device:port" (what UCX_NET_DEVICES and the job environment name).
struct DevicePort {
  std::string device;
  int port = 1;
};

// The ports among `ports` that `a` uses and `b` does not, in `ports`' order: UCX_NET_DEVICES
// against NCCL_IB_HCA finds a UCX (NIXL) process on a NIC NCCL was kept off, the check users write
// by hand before starting their jobs.
std::vector<DevicePort> UsedOnlyBy(const DeviceList& a, const DeviceList& b,
                                   const std::vector<DevicePort>& ports);

// UCX_TLS: whether the transports it allows carry data over RDMA (rc, ud, dc in their verbs and
// mlx5 forms, "ib", "all", or an exclusion list that leaves one of them), and the names UCX does
// not know. An entry with ":aux" only helps wire-up: it carries no data.
struct UcxTransports {
  bool rdma = false;
  std::string why;  // One sentence: which entry gives or loses RDMA.
  std::vector<std::string> problems;
};
UcxTransports ParseUcxTls(std::string_view value);

}  // namespace fabric::doctor
