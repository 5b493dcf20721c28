#include "agent/fabric/announce/frames.h"

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace fabric::announce {
namespace {

constexpr Mac kBroadcast = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
constexpr Mac kZeroMac = {0, 0, 0, 0, 0, 0};
constexpr size_t kEthHeader = 14;
constexpr size_t kArpBody = 28;
constexpr size_t kIpv6Header = 40;
constexpr uint8_t kIcmpv6 = 58;
constexpr uint8_t kOptSourceLl = 1;
constexpr uint8_t kOptTargetLl = 2;

void Put16(std::vector<uint8_t>& out, uint16_t v) {
  out.push_back(static_cast<uint8_t>(v >> 8));
  out.push_back(static_cast<uint8_t>(v & 0xff));
}
template <typename T>
void PutBytes(std::vector<uint8_t>& out, const T& v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof(v));
}
void PutMac(std::vector<uint8_t>& out, const Mac& m) { out.insert(out.end(), m.begin(), m.end()); }

void PutEthernet(std::vector<uint8_t>& out, const Mac& dst, const Mac& src, uint16_t type) {
  PutMac(out, dst);
  PutMac(out, src);
  Put16(out, type);
}

std::vector<uint8_t> Arp(const Mac& src, uint16_t op, const in_addr& sender_ip,
                         const Mac& target_mac, const in_addr& target_ip) {
  std::vector<uint8_t> f;
  f.reserve(kMinFrameSize);
  PutEthernet(f, kBroadcast, src, kEtherTypeArp);
  Put16(f, 1);       // htype Ethernet
  Put16(f, 0x0800);  // ptype IPv4
  f.push_back(6);
  f.push_back(4);
  Put16(f, op);
  PutMac(f, src);
  PutBytes(f, sender_ip);
  PutMac(f, target_mac);
  PutBytes(f, target_ip);
  f.resize(kMinFrameSize, 0);
  return f;
}

Mac MulticastMac(const in6_addr& group) {
  return {0x33, 0x33, group.s6_addr[12], group.s6_addr[13], group.s6_addr[14], group.s6_addr[15]};
}

// Ethernet + IPv6 header + an ICMPv6 body whose checksum field (bytes 2-3) is filled in here.
std::vector<uint8_t> Icmpv6Frame(const Mac& eth_dst, const Mac& src, const in6_addr& ip_src,
                                 const in6_addr& ip_dst, std::vector<uint8_t> icmp) {
  std::vector<uint8_t> f;
  f.reserve(kEthHeader + kIpv6Header + icmp.size());
  PutEthernet(f, eth_dst, src, kEtherTypeIpv6);
  Put16(f, 0x6000);  // version 6, traffic class 0, flow label 0
  Put16(f, 0);
  Put16(f, static_cast<uint16_t>(icmp.size()));
  f.push_back(kIcmpv6);
  f.push_back(255);  // hop limit: RFC 4861 receivers drop ND with anything else
  PutBytes(f, ip_src);
  PutBytes(f, ip_dst);
  icmp[2] = icmp[3] = 0;
  uint16_t sum = Icmpv6Checksum(ip_src, ip_dst, icmp.data(), icmp.size());
  icmp[2] = static_cast<uint8_t>(sum >> 8);
  icmp[3] = static_cast<uint8_t>(sum & 0xff);
  f.insert(f.end(), icmp.begin(), icmp.end());
  return f;
}

// A bounds-checked reader over untrusted bytes.
class Reader {
 public:
  explicit Reader(std::string_view b) : b_(b) {}
  size_t size() const { return b_.size(); }
  uint8_t U8(size_t at) const { return static_cast<uint8_t>(b_[at]); }
  uint16_t U16(size_t at) const { return static_cast<uint16_t>(U8(at) << 8 | U8(at + 1)); }
  Mac MacAt(size_t at) const {
    Mac m;
    std::memcpy(m.data(), b_.data() + at, m.size());
    return m;
  }
  template <typename T>
  T Raw(size_t at) const {
    T v;
    std::memcpy(&v, b_.data() + at, sizeof(v));
    return v;
  }
  const uint8_t* data() const { return reinterpret_cast<const uint8_t*>(b_.data()); }

 private:
  std::string_view b_;
};

struct Ethernet {
  Mac dst{};
  Mac src{};
  std::optional<uint16_t> vlan_id;
  uint16_t type = 0;
  size_t payload = 0;  // offset of the payload
};

absl::StatusOr<Ethernet> ParseEthernet(const Reader& r) {
  if (r.size() < kEthHeader) {
    return absl::InvalidArgumentError(absl::StrCat("frame of ", r.size(), " bytes: too short"));
  }
  Ethernet e;
  e.dst = r.MacAt(0);
  e.src = r.MacAt(6);
  e.type = r.U16(12);
  e.payload = kEthHeader;
  if (e.type == kEtherTypeVlan || e.type == kEtherTypeQinQ) {
    if (r.size() < kEthHeader + 4) return absl::InvalidArgumentError("truncated VLAN tag");
    e.vlan_id = r.U16(14) & 0x0fff;
    e.type = r.U16(16);
    e.payload += 4;
    if (e.type == kEtherTypeVlan || e.type == kEtherTypeQinQ) {
      return absl::InvalidArgumentError("stacked VLAN tags are not supported");
    }
  }
  return e;
}

}  // namespace

uint16_t Icmpv6Checksum(const in6_addr& src, const in6_addr& dst, const uint8_t* icmp, size_t len) {
  uint64_t sum = 0;
  auto add16 = [&](const uint8_t* p, size_t n) {
    for (size_t i = 0; i + 1 < n; i += 2) sum += static_cast<uint32_t>(p[i] << 8 | p[i + 1]);
    if (n % 2 == 1) sum += static_cast<uint32_t>(p[n - 1] << 8);
  };
  add16(src.s6_addr, 16);
  add16(dst.s6_addr, 16);
  sum += (static_cast<uint32_t>(len) >> 16) + (static_cast<uint32_t>(len) & 0xffff);
  sum += kIcmpv6;
  add16(icmp, len);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum & 0xffff);
}

in6_addr SolicitedNodeAddress(const in6_addr& addr) {
  in6_addr g{};
  g.s6_addr[0] = 0xff;
  g.s6_addr[1] = 0x02;
  g.s6_addr[11] = 0x01;
  g.s6_addr[12] = 0xff;
  g.s6_addr[13] = addr.s6_addr[13];
  g.s6_addr[14] = addr.s6_addr[14];
  g.s6_addr[15] = addr.s6_addr[15];
  return g;
}

std::vector<uint8_t> BuildGratuitousArp(const Mac& src, const in_addr& ip, ArpForm form) {
  return form == ArpForm::kRequest ? Arp(src, kArpRequest, ip, kZeroMac, ip)
                                   : Arp(src, kArpReply, ip, src, ip);
}

std::vector<uint8_t> BuildArpRequest(const Mac& src, const in_addr& sender, const in_addr& target) {
  return Arp(src, kArpRequest, sender, kZeroMac, target);
}

std::vector<uint8_t> BuildArpProbe(const Mac& src, const in_addr& target) {
  return Arp(src, kArpRequest, in_addr{}, kZeroMac, target);
}

std::vector<uint8_t> BuildUnsolicitedNa(const Mac& src, const in6_addr& ip) {
  in6_addr all_nodes{};
  all_nodes.s6_addr[0] = 0xff;
  all_nodes.s6_addr[1] = 0x02;
  all_nodes.s6_addr[15] = 0x01;
  std::vector<uint8_t> icmp = {kNeighborAdvertisement, 0, 0, 0, 0x20 /* Override */, 0, 0, 0};
  PutBytes(icmp, ip);
  icmp.push_back(kOptTargetLl);
  icmp.push_back(1);  // length in units of 8 bytes
  PutMac(icmp, src);
  return Icmpv6Frame(MulticastMac(all_nodes), src, ip, all_nodes, std::move(icmp));
}

std::vector<uint8_t> BuildNeighborSolicitation(const Mac& src, const in6_addr& src_ip,
                                               const in6_addr& target) {
  const in6_addr group = SolicitedNodeAddress(target);
  std::vector<uint8_t> icmp = {kNeighborSolicitation, 0, 0, 0, 0, 0, 0, 0};
  PutBytes(icmp, target);
  icmp.push_back(kOptSourceLl);
  icmp.push_back(1);
  PutMac(icmp, src);
  return Icmpv6Frame(MulticastMac(group), src, src_ip, group, std::move(icmp));
}

absl::StatusOr<ArpPacket> ParseArp(std::string_view frame) {
  Reader r(frame);
  auto eth = ParseEthernet(r);
  if (!eth.ok()) return eth.status();
  if (eth->type != kEtherTypeArp) {
    return absl::InvalidArgumentError(
        absl::StrCat("not ARP (ethertype 0x", absl::Hex(eth->type), ")"));
  }
  const size_t p = eth->payload;
  if (r.size() < p + kArpBody) {
    return absl::InvalidArgumentError(absl::StrCat("ARP frame of ", r.size(), " bytes: truncated"));
  }
  if (r.U16(p) != 1 || r.U16(p + 2) != 0x0800 || r.U8(p + 4) != 6 || r.U8(p + 5) != 4) {
    return absl::InvalidArgumentError(absl::StrCat("ARP not Ethernet/IPv4: htype ", r.U16(p),
                                                   " ptype 0x", absl::Hex(r.U16(p + 2)), " hlen ",
                                                   r.U8(p + 4), " plen ", r.U8(p + 5)));
  }
  ArpPacket a;
  a.eth_dst = eth->dst;
  a.eth_src = eth->src;
  a.vlan_id = eth->vlan_id;
  a.op = r.U16(p + 6);
  if (a.op != kArpRequest && a.op != kArpReply) {
    return absl::InvalidArgumentError(absl::StrCat("ARP op ", a.op, " is neither 1 nor 2"));
  }
  a.sender_mac = r.MacAt(p + 8);
  a.sender_ip = r.Raw<in_addr>(p + 14);
  a.target_mac = r.MacAt(p + 18);
  a.target_ip = r.Raw<in_addr>(p + 24);
  return a;
}

absl::StatusOr<NdPacket> ParseNd(std::string_view frame) {
  Reader r(frame);
  auto eth = ParseEthernet(r);
  if (!eth.ok()) return eth.status();
  if (eth->type != kEtherTypeIpv6) {
    return absl::InvalidArgumentError(
        absl::StrCat("not IPv6 (ethertype 0x", absl::Hex(eth->type), ")"));
  }
  const size_t ip = eth->payload;
  if (r.size() < ip + kIpv6Header) return absl::InvalidArgumentError("truncated IPv6 header");
  if (r.U8(ip) >> 4 != 6) {
    return absl::InvalidArgumentError(absl::StrCat("IP version ", r.U8(ip) >> 4, ", not 6"));
  }
  const size_t payload_len = r.U16(ip + 4);
  if (r.U8(ip + 6) != kIcmpv6) {
    return absl::InvalidArgumentError(
        absl::StrCat("IPv6 next header ", r.U8(ip + 6), " is not ICMPv6"));
  }
  if (r.U8(ip + 7) != 255) {
    return absl::InvalidArgumentError(
        absl::StrCat("neighbour discovery with hop limit ", r.U8(ip + 7), " (must be 255)"));
  }
  const size_t icmp = ip + kIpv6Header;
  if (r.size() < icmp + payload_len) {
    return absl::InvalidArgumentError(absl::StrCat("IPv6 payload length ", payload_len,
                                                   " exceeds the frame (", r.size(), " bytes)"));
  }
  if (payload_len < 24) {
    return absl::InvalidArgumentError(
        absl::StrCat("ICMPv6 message of ", payload_len, " bytes is too short for ND"));
  }
  NdPacket nd;
  nd.eth_dst = eth->dst;
  nd.eth_src = eth->src;
  nd.vlan_id = eth->vlan_id;
  nd.src = r.Raw<in6_addr>(ip + 8);
  nd.dst = r.Raw<in6_addr>(ip + 24);
  nd.type = r.U8(icmp);
  if (nd.type != kNeighborSolicitation && nd.type != kNeighborAdvertisement) {
    return absl::InvalidArgumentError(absl::StrCat("ICMPv6 type ", nd.type, " is not NS/NA"));
  }
  if (r.U8(icmp + 1) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("ND code ", r.U8(icmp + 1), " (must be 0)"));
  }
  if (uint16_t c = Icmpv6Checksum(nd.src, nd.dst, r.data() + icmp, payload_len); c != 0) {
    return absl::InvalidArgumentError("bad ICMPv6 checksum");
  }
  if (nd.type == kNeighborAdvertisement) {
    const uint8_t flags = r.U8(icmp + 4);
    nd.router = (flags & 0x80) != 0;
    nd.solicited = (flags & 0x40) != 0;
    nd.override_flag = (flags & 0x20) != 0;
  }
  nd.target = r.Raw<in6_addr>(icmp + 8);
  if (nd.target.s6_addr[0] == 0xff) {
    return absl::InvalidArgumentError("ND target is a multicast address");
  }
  // Options: type, length in 8-byte units (0 is invalid and would never advance).
  size_t at = icmp + 24;
  const size_t end = icmp + payload_len;
  while (at < end) {
    if (end - at < 8) return absl::InvalidArgumentError("truncated ND option");
    const uint8_t type = r.U8(at);
    const size_t len = static_cast<size_t>(r.U8(at + 1)) * 8;
    if (len == 0) return absl::InvalidArgumentError("ND option of length 0");
    if (len > end - at) return absl::InvalidArgumentError("ND option runs past the message");
    if (type == kOptSourceLl) nd.source_lladdr = r.MacAt(at + 2);
    if (type == kOptTargetLl) nd.target_lladdr = r.MacAt(at + 2);
    at += len;
  }
  return nd;
}

absl::StatusOr<NdPacket> ParseNeighborAdvert(std::string_view frame) {
  auto nd = ParseNd(frame);
  if (nd.ok() && nd->type != kNeighborAdvertisement) {
    return absl::InvalidArgumentError("a neighbour solicitation, not an advertisement");
  }
  return nd;
}

}  // namespace fabric::announce
