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
#include <cstdint>
#include <map>
#include <optional>
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
  // NCCL 2.30.7's "hca:port:rail:plane" (older releases ignore both): -1 when absent or empty,
  // else as NCCL reads them (atoi, kept in 16 bits).
  int rail = -1;
  int plane = -1;
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

// One of NCCL's integer settings (NCCL_IB_DISABLE, NCCL_IB_GID_INDEX, NCCL_IB_TIMEOUT, ...) as
// ncclLoadParam reads it (misc/param.cc, 2.1x-2.2x), the one reader every check uses: unset or
// empty keeps the default; otherwise strtoll(value, nullptr, 0), so leading blanks and a sign are
// taken, "0x10" is 16, a leading 0 is octal ("010" is 8, "08" is 0), whatever follows the number
// is ignored and no digits at all read as 0; a range error keeps the default.
struct NcclInt {
  int64_t value = 0;  // What NCCL uses.
  bool set = false;   // Set and not empty.
  // How NCCL reads it differently from how it looks ("NCCL_IB_TIMEOUT=022 has a leading 0: NCCL
  // reads it as octal, 18"), the value escaped; empty when NCCL reads what is written.
  std::string problem;
};
NcclInt ReadNcclInt(std::string_view name, std::optional<std::string_view> value, int64_t dflt);

// NCCL_NET_GDR_LEVEL and NCCL_P2P_LEVEL as ncclGetLevel reads them (graph/paths.cc): a path
// type's name exactly as NCCL prints it (capitals: "pxb" is not one), or, when the value starts
// with a digit, the old numbering strtol(value, nullptr, 0): 0-4 are LOC, PIX, PXB, PHB, SYS and
// any larger number SYS. Anything else is ignored: NCCL keeps its default.
struct NcclLevel {
  std::string name;     // NCCL's path type ("PXB"); empty: NCCL keeps its default.
  std::string problem;  // As NcclInt's.
};
NcclLevel ReadNcclLevel(std::string_view name, std::string_view value);

}  // namespace fabric::doctor
