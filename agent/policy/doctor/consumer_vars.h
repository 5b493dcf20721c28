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
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace fabric::doctor {

inline constexpr size_t kNcclMaxEntries = 32;    // NCCL's MAX_IB_DEVS (NCCL_IB_HCA).
inline constexpr size_t kNcclMaxIfs = 16;        // NCCL's MAX_IFS (NCCL_SOCKET_IFNAME).
inline constexpr size_t kNcclMaxNameBytes = 63;  // netIf.prefix[64].
// UCX reads any number of UCX_NET_DEVICES and UCX_TLS entries, but a host has a few dozen ports
// and UCX a few dozen transports: a longer list is a mistake (or a request meant to keep the
// judge busy), refused before the work (CheckListBounds).
inline constexpr size_t kUcxMaxEntries = 256;

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

// Both stop at their bound (NCCL's: what NCCL ignores is named in problems; UCX's: the rest is
// not read), so their work is linear in the value and bounded.
DeviceList ParseNcclList(std::string_view value, size_t max_entries = kNcclMaxEntries);
DeviceList ParseUcxDevices(std::string_view value);

// The variables of `env` whose lists the doctor refuses to judge: more than kUcxMaxEntries
// entries in UCX_NET_DEVICES or UCX_TLS. InvalidArgument naming the variable, its count and the
// bound; counted without building the list.
absl::Status CheckListBounds(const std::map<std::string, std::string>& env);

// Whether the consumer that produced `list` uses `device` port `port`.
bool Selects(const DeviceList& list, std::string_view device, int port);
// Whether entry `e` of `list` (read with the list's exact/prefix rule) names `device` port `port`.
bool EntrySelects(const DeviceList& list, const ListEntry& e, std::string_view device, int port);
// An entry as a message shows it: "mlx5_0:1", or escaped and cut (Excerpt) when its name is not a
// plain device name.
std::string EntryText(const ListEntry& e);

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
// At most kUcxMaxEntries entries are read.
struct UcxTransports {
  bool rdma = false;
  std::string why;  // One sentence: which entry gives or loses RDMA.
  std::vector<std::string> problems;
};
UcxTransports ParseUcxTls(std::string_view value);

}  // namespace fabric::doctor
