// LLDP (IEEE 802.1AB) LLDPDUs from the wire: what the switch at the other end of a cable says
// about itself. Pure functions, no OS calls: table-tested from byte layouts and fuzzed.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace fabric::neighbors {

inline constexpr uint16_t kEtherTypeLldp = 0x88cc;
// Nearest bridge: the group address switches send LLDP to and do not forward.
inline constexpr std::array<uint8_t, 6> kLldpNearestBridge = {0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e};
// Every rendered string is at most this long (an LLDP string is at most 255 bytes on the wire).
inline constexpr size_t kMaxLldpText = 255;

// TLV types (802.1AB-2016 table 8-1).
inline constexpr int kTlvEnd = 0;
inline constexpr int kTlvChassisId = 1;
inline constexpr int kTlvPortId = 2;
inline constexpr int kTlvTtl = 3;
inline constexpr int kTlvPortDescription = 4;
inline constexpr int kTlvSystemName = 5;
inline constexpr int kTlvSystemDescription = 6;
inline constexpr int kTlvSystemCapabilities = 7;
inline constexpr int kTlvManagementAddress = 8;
inline constexpr int kTlvOrgSpecific = 127;

// Chassis ID subtypes (table 8-2) and port ID subtypes (table 8-3) that change the rendering.
// Note the two tables differ: MAC is chassis 4 but port 3.
inline constexpr int kChassisIdMac = 4;
inline constexpr int kChassisIdNetworkAddress = 5;
inline constexpr int kPortIdMac = 3;
inline constexpr int kPortIdNetworkAddress = 4;

struct LldpNeighbor {
  std::array<uint8_t, 6> source_mac{};  // of the frame (ParseLldpFrame only)
  std::optional<uint16_t> frame_vlan;   // 802.1Q/802.1ad tag of the frame, when it had one

  int chassis_id_subtype = 0;
  // For humans: MAC as aa:bb:.., network address as IP text, else printable text or hex.
  std::string chassis_id;
  std::string chassis_id_raw;  // the ID bytes as sent (1..255): the neighbour's identity
  int port_id_subtype = 0;
  std::string port_id;  // rendered like chassis_id, by the port subtype table
  // 0 is a shutdown LLDPDU: forget this neighbour now.
  uint32_t ttl_s = 0;

  std::string port_description;  // empty when absent
  std::string system_name;
  std::string system_description;
  std::string management_address;     // the first one, as text (IPv4/IPv6/MAC, else hex)
  std::optional<uint16_t> port_vlan;  // 802.1 Port VLAN ID (OUI 00-80-c2 subtype 1), when not 0

  // Optional TLVs dropped for a malformed body (802.1AB: such a TLV is discarded, the rest
  // processed), duplicates of the single-instance ones, and those of types this parser does not
  // read.
  int tlvs_discarded = 0;
  int tlvs_unknown = 0;
};

// A whole Ethernet frame: destination 01:80:c2:00:00:0e, :03 or :00 (the three LLDP group
// addresses), at most one VLAN tag (0x8100 or 0x88a8), ethertype 0x88cc. Trailing padding after
// the End TLV is ignored.
absl::StatusOr<LldpNeighbor> ParseLldpFrame(std::string_view frame);

// The LLDPDU alone (the frame's payload). InvalidArgument, naming the TLV and its offset in
// `pdu`, when: a TLV header is cut short, a TLV runs past the end, the first three TLVs are not
// Chassis ID, Port ID and TTL in that order, a mandatory TLV repeats, a chassis or port ID's
// information string is shorter than 2 or longer than 256 bytes, the TTL is shorter than 2, or
// an End TLV has a non-zero length. A PDU that ends without an End TLV is accepted (802.1AB-2009
// made it optional).
absl::StatusOr<LldpNeighbor> ParseLldpdu(std::string_view pdu);

// A Kubernetes label value naming the neighbour: its system name when that is a valid label
// value (at most 63 of [A-Za-z0-9._-], alphanumeric at both ends), else "c-" and the first 10
// hex digits of FNV-1a 64 over the chassis ID subtype byte followed by the raw chassis ID. Equal
// for every host that sees the same switch.
std::string SwitchLabelValue(const LldpNeighbor& n);

// A Kubernetes label value naming a set of switches (SwitchLabelValue each, in any order, repeats
// ignored): "g-" and 10 hex digits of FNV-1a 64 over them sorted. Equal on hosts whose ports reach
// the same leaves (a scalable unit), different otherwise.
std::string GroupLabelValue(std::vector<std::string> switch_labels);

}  // namespace fabric::neighbors
