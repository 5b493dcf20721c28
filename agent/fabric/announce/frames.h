// Ethernet frames for announcements: gratuitous ARP, ARP probes and requests, unsolicited
// neighbour advertisements and neighbour solicitations; and strict parsers for what comes back.
// Pure functions: no OS calls, so they are table-tested byte by byte and fuzzed.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/fabric/announce/mac.h"

namespace fabric::announce {

// Ethernet's minimum frame without the FCS. AF_PACKET SOCK_RAW sends what it is given, and veth
// (unlike most NIC hardware) does not pad, so ARP frames are padded with zeros here: every link
// then carries a valid minimum-size frame.
inline constexpr size_t kMinFrameSize = 60;

inline constexpr uint16_t kEtherTypeArp = 0x0806;
inline constexpr uint16_t kEtherTypeIpv6 = 0x86dd;
inline constexpr uint16_t kEtherTypeVlan = 0x8100;  // 802.1Q
inline constexpr uint16_t kEtherTypeQinQ = 0x88a8;  // 802.1ad

inline constexpr uint16_t kArpRequest = 1;
inline constexpr uint16_t kArpReply = 2;
inline constexpr uint8_t kNeighborSolicitation = 135;
inline constexpr uint8_t kNeighborAdvertisement = 136;

enum class ArpForm {
  // op 1, target MAC 00:00:00:00:00:00: what the kernel's arp_notify sends and what RFC 5227
  // calls an ARP Announcement. Preferred: some switches ignore gratuitous replies.
  kRequest,
  // op 2, target MAC = the sender's own MAC: what `arping -A` sends, and what Linux requires to
  // treat a reply as gratuitous (arp_is_garp(): a gratuitous reply needs tha == sha).
  kReply,
};

// Gratuitous ARP for `ip` (sender IP = target IP), to broadcast, padded to 60 bytes.
std::vector<uint8_t> BuildGratuitousArp(const Mac& src, const in_addr& ip, ArpForm form);
// A plain who-has `target` from `sender` (gateway priming), to broadcast, padded to 60 bytes.
std::vector<uint8_t> BuildArpRequest(const Mac& src, const in_addr& sender, const in_addr& target);
// RFC 5227 probe: sender IP 0.0.0.0, target MAC zero, to broadcast, padded to 60 bytes.
std::vector<uint8_t> BuildArpProbe(const Mac& src, const in_addr& target);
// Unsolicited NA for `ip` from `ip` to ff02::1 (33:33:00:00:00:01): Override set, Router and
// Solicited clear, Target Link-Layer Address option. 86 bytes.
std::vector<uint8_t> BuildUnsolicitedNa(const Mac& src, const in6_addr& ip);
// NS for `target` from `src_ip` to target's solicited-node address, with a Source Link-Layer
// Address option (so the answer can come straight back). 86 bytes.
std::vector<uint8_t> BuildNeighborSolicitation(const Mac& src, const in6_addr& src_ip,
                                               const in6_addr& target);

// ff02::1:ffXX:XXXX for the low 24 bits of `addr`.
in6_addr SolicitedNodeAddress(const in6_addr& addr);
// The ICMPv6 checksum of `icmp` (its checksum field included as it is) over the IPv6
// pseudo-header. Building: compute with the field zero and store the result. Verifying: a valid
// message gives 0.
uint16_t Icmpv6Checksum(const in6_addr& src, const in6_addr& dst, const uint8_t* icmp, size_t len);

struct ArpPacket {
  Mac eth_dst{};
  Mac eth_src{};
  std::optional<uint16_t> vlan_id;  // when the frame carried one 802.1Q/802.1ad tag
  uint16_t op = 0;                  // kArpRequest or kArpReply
  Mac sender_mac{};
  in_addr sender_ip{};
  Mac target_mac{};
  in_addr target_ip{};
};

struct NdPacket {
  Mac eth_dst{};
  Mac eth_src{};
  std::optional<uint16_t> vlan_id;
  uint8_t type = 0;  // kNeighborSolicitation or kNeighborAdvertisement
  in6_addr src{};    // IPv6 source and destination
  in6_addr dst{};
  in6_addr target{};
  bool router = false;  // NA flags; false for an NS
  bool solicited = false;
  bool override_flag = false;
  std::optional<Mac> source_lladdr;  // option 1
  std::optional<Mac> target_lladdr;  // option 2
};

// Frames from the wire, not trusted. A frame may carry one VLAN tag (0x8100 or 0x88a8), which is
// reported; two stacked tags are rejected. Trailing bytes (Ethernet padding) are ignored.
// ARP: Ethernet/IPv4 only (htype 1, ptype 0x0800, hlen 6, plen 4), op 1 or 2.
absl::StatusOr<ArpPacket> ParseArp(std::string_view frame);
// ND: IPv6 version 6, next header 58 directly (no extension headers), hop limit 255, ICMPv6
// type 135/136 code 0 with a valid checksum, length >= 24, target not multicast, options whole
// and of non-zero length.
absl::StatusOr<NdPacket> ParseNd(std::string_view frame);
// ParseNd restricted to neighbour advertisements.
absl::StatusOr<NdPacket> ParseNeighborAdvert(std::string_view frame);

inline std::string_view AsView(const std::vector<uint8_t>& bytes) {
  return std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

}  // namespace fabric::announce
