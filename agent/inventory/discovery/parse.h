// Parsers for the bytes sysfs and procfs hand us. They take the text and never touch the file
// system, so they are table-tested and fuzzed (parse_fuzz.cc) apart from the reading.
// Every parser accepts a trailing newline, as sysfs attributes end with one, and NULs after it.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/common/ip.h"  // ParseIpv4, FormatIpv4, FormatCidr: the readers of routes use them
#include "fabric/v1/host.pb.h"

namespace fabric {

using v1::GidType;
using v1::LinkLayer;
using v1::NodeType;
using v1::PhysState;
using v1::PortState;

// Text without surrounding whitespace and trailing NULs (sysfs values end with "\n", some with
// "\n\0").
std::string_view Trim(std::string_view s);

// Decimal integer, e.g. "16\n" or "-1".
absl::StatusOr<int64_t> ParseInt(std::string_view s);

// "0x15b3" or "15b3" -> 0x15b3.
absl::StatusOr<uint64_t> ParseHex(std::string_view s);

// PCI address in long ("0000:17:00.0"), nvidia-smi ("00000000:17:00.0") or short ("17:00.0")
// form, any case -> canonical "0000:17:00.0".
absl::StatusOr<std::string> ParsePciAddress(std::string_view s);

// Port rate, e.g. "400 Gb/sec (4X NDR)" or "2.5 Gb/sec (1X SDR)" -> Gb/s.
absl::StatusOr<double> ParseRateGbps(std::string_view s);
// The lanes and signalling of a port rate, as ibstat prints them: "400 Gb/sec (4X NDR)" ->
// "4X NDR"; "" when the kernel's text has none ("100 Gb/sec", "garbage").
std::string RateLanes(std::string_view s);

// "4: ACTIVE" -> PORT_STATE_ACTIVE. The number is authoritative; the word must match it.
absl::StatusOr<PortState> ParsePortState(std::string_view s);
// "5: LinkUp" -> PHYS_STATE_LINK_UP.
absl::StatusOr<PhysState> ParsePhysState(std::string_view s);
// "InfiniBand" / "Ethernet".
absl::StatusOr<LinkLayer> ParseLinkLayer(std::string_view s);
// "1: CA" -> NODE_TYPE_CA.
absl::StatusOr<NodeType> ParseNodeType(std::string_view s);

// The kernel's words for the model's enums (drivers/infiniband/core/sysfs.c), the ones the parsers
// above read: the one home of these names for messages, metrics labels and changes.
// "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"; "UNKNOWN" otherwise.
std::string_view PortStateWord(PortState state);
// "Sleep", "Polling", ..., "LinkUp", "LinkErrorRecovery", "Phy Test"; "<unknown>" otherwise.
std::string_view PhysStateWord(PhysState state);
// "InfiniBand", "Ethernet"; "" otherwise.
std::string_view LinkLayerWord(LinkLayer layer);

// GIDs themselves are parsed in agent/rdma/gid.h (free of protobuf, shared with the CNI plugin and
// the probe tool).
// gid_attrs/types/N: "IB/RoCE v1" or "RoCE v2". "IB/RoCE v1" is IB on an InfiniBand port and
// RoCE v1 on an Ethernet port, hence the link layer.
absl::StatusOr<GidType> ParseGidType(std::string_view s, LinkLayer link_layer);

// PCIe link speed: "32.0 GT/s PCIe", "8.0 GT/s", "2.5 GT/s" -> GT/s. "Unknown" is an error.
absl::StatusOr<double> ParsePciLinkSpeed(std::string_view s);

// MAC address "0c:42:a1:67:8e:3c" -> lower case, validated.
absl::StatusOr<std::string> ParseMac(std::string_view s);

// Node GUID "0c42:a103:0067:8e3c" -> validated, lower case.
absl::StatusOr<std::string> ParseGuid(std::string_view s);

// CPU/node list such as "0-1,4" -> {0,1,4}.
absl::StatusOr<std::vector<int32_t>> ParseIdList(std::string_view s);

// One line of /proc/net/route.
struct Ipv4Route {
  std::string iface;
  uint32_t destination = 0;  // Host byte order.
  uint32_t gateway = 0;
  uint32_t mask = 0;
  uint32_t flags = 0;
  uint32_t metric = 0;
};
// /proc/net/route (header line first). A malformed line is an error naming it, or, when
// `bad_lines` is given, is described there and skipped so that one bad line loses nothing else.
absl::StatusOr<std::vector<Ipv4Route>> ParseProcNetRoute(
    std::string_view s, std::vector<std::string>* bad_lines = nullptr);

// Interfaces with a ::/0 route in /proc/net/ipv6_route; `bad_lines` as above.
absl::StatusOr<std::vector<std::string>> ParseIpv6DefaultRouteIfaces(
    std::string_view s, std::vector<std::string>* bad_lines = nullptr);

// Module names from /proc/modules.
absl::StatusOr<std::vector<std::string>> ParseProcModules(std::string_view s);

// Prefix length of a contiguous netmask (0xffffff00 -> 24), or error.
absl::StatusOr<int> MaskToPrefixLen(uint32_t mask);

}  // namespace fabric
