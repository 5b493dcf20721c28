#include "agent/fabric/neighbors/lldp.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/common/k8s_label.h"
#include "agent/fabric/neighbors/text.h"

namespace fabric::neighbors {
namespace {

constexpr size_t kEthHeader = 14;
constexpr uint16_t kEtherTypeVlan = 0x8100;
constexpr uint16_t kEtherTypeQinQ = 0x88a8;
// IANA address family numbers, as the network-address subtypes and the management address use.
constexpr uint8_t kFamilyIpv4 = 1;
constexpr uint8_t kFamilyIpv6 = 2;
constexpr uint8_t kFamily802 = 6;
constexpr char kOui8021[] = {0x00, static_cast<char>(0x80), static_cast<char>(0xc2)};
constexpr uint8_t kOui8021PortVlan = 1;

uint16_t U16(std::string_view b, size_t at) {
  return static_cast<uint16_t>(U8(b, at) << 8 | U8(b, at + 1));
}

std::string TlvName(int type) {
  switch (type) {
    case kTlvEnd:
      return "End";
    case kTlvChassisId:
      return "Chassis ID";
    case kTlvPortId:
      return "Port ID";
    case kTlvTtl:
      return "TTL";
    case kTlvPortDescription:
      return "Port Description";
    case kTlvSystemName:
      return "System Name";
    case kTlvSystemDescription:
      return "System Description";
    case kTlvSystemCapabilities:
      return "System Capabilities";
    case kTlvManagementAddress:
      return "Management Address";
    case kTlvOrgSpecific:
      return "Organizationally Specific";
    default:
      return absl::StrCat("type ", type);
  }
}

absl::Status TlvError(int type, size_t offset, const std::string& what) {
  return absl::InvalidArgumentError(
      absl::StrCat("LLDP ", TlvName(type), " TLV at offset ", offset, ": ", what));
}

// An address as its family says (IANA numbers), or nullopt for other families or sizes.
std::optional<std::string> AddressText(uint8_t family, std::string_view addr) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (family == kFamilyIpv4 && addr.size() == 4) {
    if (inet_ntop(AF_INET, addr.data(), buf, sizeof(buf)) != nullptr) return std::string(buf);
  } else if (family == kFamilyIpv6 && addr.size() == 16) {
    if (inet_ntop(AF_INET6, addr.data(), buf, sizeof(buf)) != nullptr) return std::string(buf);
  } else if (family == kFamily802 && addr.size() == 6) {
    return HexBytes(addr, kMaxLldpText);
  }
  return std::nullopt;
}

// A chassis or port ID (`id` without its subtype byte) for humans.
std::string RenderId(int subtype, std::string_view id, int mac_subtype, int address_subtype) {
  if (subtype == mac_subtype && id.size() == 6) return HexBytes(id, kMaxLldpText);
  if (subtype == address_subtype && !id.empty()) {
    if (auto a = AddressText(U8(id, 0), id.substr(1))) return *a;
  }
  if (IsPrintable(id)) return PrintableText(id, kMaxLldpText);
  return HexBytes(id, kMaxLldpText);
}

// Management Address body: address string length (2..32: subtype + address), subtype, address,
// interface numbering subtype, interface number (4), OID string length (0..128), OID.
std::optional<std::string> ManagementAddress(std::string_view v) {
  if (v.size() < 1) return std::nullopt;
  const size_t addr_len = U8(v, 0);
  if (addr_len < 2 || addr_len > 32 || v.size() < 1 + addr_len + 5 + 1) return std::nullopt;
  const size_t oid_len = U8(v, 1 + addr_len + 5);
  if (oid_len > 128 || v.size() != 1 + addr_len + 5 + 1 + oid_len) return std::nullopt;
  const std::string_view addr = v.substr(2, addr_len - 1);
  if (auto a = AddressText(U8(v, 1), addr)) return *a;
  return HexBytes(addr, kMaxLldpText);
}

// A single-instance optional string TLV: the first one counts.
void TakeString(std::string_view v, bool& seen, std::string& out, LldpNeighbor& n) {
  if (seen) {
    ++n.tlvs_discarded;
    return;
  }
  seen = true;
  out = PrintableText(v, kMaxLldpText);
}

}  // namespace

absl::StatusOr<LldpNeighbor> ParseLldpdu(std::string_view pdu) {
  LldpNeighbor n;
  bool seen_port_description = false, seen_system_name = false, seen_system_description = false;
  bool seen_management = false, seen_port_vlan = false;
  int index = 0;  // of the TLV being read
  size_t at = 0;
  while (at < pdu.size()) {
    if (pdu.size() - at < 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("LLDP TLV header at offset ", at, " is cut short (1 byte left)"));
    }
    const uint16_t header = U16(pdu, at);
    const int type = header >> 9;
    const size_t len = header & 0x1ff;
    const size_t body = at + 2;
    if (len > pdu.size() - body) {
      return TlvError(type, at,
                      absl::StrCat("length ", len, " runs past the end (", pdu.size() - body,
                                   " bytes follow)"));
    }
    const std::string_view v = pdu.substr(body, len);
    // 802.1AB: Chassis ID, Port ID and TTL come first, in this order, and only once.
    if (index < 3 && type != index + 1) {
      return TlvError(type, at,
                      absl::StrCat("TLV number ", index + 1, " must be ", TlvName(index + 1)));
    }
    if (index >= 3 && type >= kTlvChassisId && type <= kTlvTtl) {
      return TlvError(type, at, "repeats a mandatory TLV");
    }
    switch (type) {
      case kTlvEnd:
        if (len != 0) return TlvError(type, at, absl::StrCat("length ", len, " (must be 0)"));
        return n;
      case kTlvChassisId:
      case kTlvPortId: {
        if (len < 2 || len > 256) {
          return TlvError(type, at, absl::StrCat("length ", len, " (must be 2..256)"));
        }
        const int subtype = U8(v, 0);
        const std::string_view id = v.substr(1);
        if (type == kTlvChassisId) {
          n.chassis_id_subtype = subtype;
          n.chassis_id_raw = std::string(id);
          n.chassis_id = RenderId(subtype, id, kChassisIdMac, kChassisIdNetworkAddress);
        } else {
          n.port_id_subtype = subtype;
          n.port_id = RenderId(subtype, id, kPortIdMac, kPortIdNetworkAddress);
        }
        break;
      }
      case kTlvTtl:
        if (len < 2) return TlvError(type, at, absl::StrCat("length ", len, " (must be 2)"));
        n.ttl_s = U16(v, 0);
        break;
      case kTlvPortDescription:
        TakeString(v, seen_port_description, n.port_description, n);
        break;
      case kTlvSystemName:
        TakeString(v, seen_system_name, n.system_name, n);
        break;
      case kTlvSystemDescription:
        TakeString(v, seen_system_description, n.system_description, n);
        break;
      case kTlvManagementAddress:
        if (auto a = ManagementAddress(v); !a.has_value()) {
          ++n.tlvs_discarded;
        } else if (!seen_management) {
          seen_management = true;
          n.management_address = *a;
        }
        break;
      case kTlvOrgSpecific:
        if (len < 4) {
          ++n.tlvs_discarded;
        } else if (std::memcmp(v.data(), kOui8021, 3) != 0 || U8(v, 3) != kOui8021PortVlan) {
          ++n.tlvs_unknown;
        } else if (len != 6 || seen_port_vlan) {
          ++n.tlvs_discarded;
        } else {
          seen_port_vlan = true;
          // PVID 0: the port is not VLAN-aware, i.e. there is no PVID.
          if (const uint16_t pvid = U16(v, 4); pvid != 0) n.port_vlan = pvid;
        }
        break;
      default:
        ++n.tlvs_unknown;
        break;
    }
    at = body + len;
    ++index;
  }
  if (index < 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LLDPDU of ", pdu.size(), " bytes ends before its ", TlvName(index + 1), " TLV"));
  }
  return n;
}

absl::StatusOr<LldpNeighbor> ParseLldpFrame(std::string_view frame) {
  if (frame.size() < kEthHeader) {
    return absl::InvalidArgumentError(absl::StrCat("frame of ", frame.size(), " bytes: too short"));
  }
  // 01:80:c2:00:00:0e nearest bridge, :03 nearest non-TPMR bridge, :00 nearest customer bridge.
  const uint8_t last = U8(frame, 5);
  if (std::memcmp(frame.data(), kLldpNearestBridge.data(), 5) != 0 ||
      (last != 0x0e && last != 0x03 && last != 0x00)) {
    return absl::InvalidArgumentError(absl::StrCat("destination ", HexBytes(frame.substr(0, 6), 17),
                                                   " is not an LLDP group address"));
  }
  size_t payload = kEthHeader;
  uint16_t type = U16(frame, 12);
  std::optional<uint16_t> vlan;
  if (type == kEtherTypeVlan || type == kEtherTypeQinQ) {
    if (frame.size() < kEthHeader + 4) return absl::InvalidArgumentError("truncated VLAN tag");
    vlan = U16(frame, 14) & 0x0fff;
    type = U16(frame, 16);
    payload += 4;
    if (type == kEtherTypeVlan || type == kEtherTypeQinQ) {
      return absl::InvalidArgumentError("stacked VLAN tags are not supported");
    }
  }
  if (type != kEtherTypeLldp) {
    return absl::InvalidArgumentError(absl::StrCat("not LLDP (ethertype 0x", absl::Hex(type), ")"));
  }
  auto parsed = ParseLldpdu(frame.substr(payload));
  if (!parsed.ok()) return parsed.status();
  std::memcpy(parsed->source_mac.data(), frame.data() + 6, 6);
  parsed->frame_vlan = vlan;
  return parsed;
}

std::string SwitchLabelValue(const LldpNeighbor& n) {
  if (!n.system_name.empty() && IsValidLabelValue(n.system_name)) return n.system_name;
  std::string key(1, static_cast<char>(n.chassis_id_subtype & 0xff));
  key += n.chassis_id_raw;
  return absl::StrCat("c-", absl::StrFormat("%016x", Fnv1a64(key)).substr(0, 10));
}

std::string GroupLabelValue(std::vector<std::string> switch_labels) {
  std::sort(switch_labels.begin(), switch_labels.end());
  switch_labels.erase(std::unique(switch_labels.begin(), switch_labels.end()), switch_labels.end());
  std::string key;
  for (const std::string& l : switch_labels) absl::StrAppend(&key, l, "\n");
  return absl::StrCat("g-", absl::StrFormat("%016x", Fnv1a64(key)).substr(0, 10));
}

}  // namespace fabric::neighbors
