#include "agent/fabric/neighbors/lldp.h"

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/common/k8s_label.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fabric::neighbors {
namespace {

using ::testing::HasSubstr;

// One TLV: 7-bit type, 9-bit length, then the body.
std::string Tlv(int type, const std::string& body) {
  const size_t len = body.size();
  std::string t = {static_cast<char>(type << 1 | (len >> 8 & 1)), static_cast<char>(len & 0xff)};
  return t + body;
}
// A TLV header claiming `len` whatever follows.
std::string Header(int type, size_t len) {
  return {static_cast<char>(type << 1 | (len >> 8 & 1)), static_cast<char>(len & 0xff)};
}
std::string Bytes(std::initializer_list<int> b) {
  std::string s;
  for (int x : b) s.push_back(static_cast<char>(x));
  return s;
}
std::string Sub(int subtype, const std::string& rest) {
  return std::string(1, static_cast<char>(subtype)) + rest;
}
std::string Ttl(int s) { return Tlv(kTlvTtl, Bytes({s >> 8, s & 0xff})); }
const std::string kChassisMac =
    Tlv(kTlvChassisId, Sub(4, Bytes({0x02, 0x11, 0x22, 0x33, 0x44, 0x55})));
const std::string kPortName = Tlv(kTlvPortId, Sub(5, "swp12"));
const std::string kEnd = Tlv(kTlvEnd, "");
const std::string kMandatory = kChassisMac + kPortName + Ttl(120);

std::string Frame(const std::string& pdu, const std::string& tag = "") {
  return Bytes({0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e, 0x02, 0x11, 0x22, 0x33, 0x44, 0x66}) + tag +
         Bytes({0x88, 0xcc}) + pdu;
}

std::string Hex(std::string_view hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

// What lldpd 1.0.16 (Debian 12) sent from swp12 (02:00:00:00:0b:01) with `configure system
// hostname leaf-07`, tx-interval 1 and port description "to host eth0" (test-rigs section 5),
// captured with a packet socket on the far end of the veth, one TLV a line.
const std::string kLldpdFrame =
    Hex("0180c200000e020000000b0188cc"  // to the nearest bridge, ethertype 0x88cc
        "020704020000000b01"            // Chassis ID: MAC
        "040703020000000b01"            // Port ID: MAC
        "06020004"                      // TTL 4
        "0a076c6561662d3037"            // System Name "leaf-07"
        "0c5544656269616e20474e552f4c696e75782031322028626f6f6b776f726d29204c696e757820362e31382e"
        "34342d66632d7637383220233120534d5020505245454d50545f44594e414d4943204030207838365f3634"
        "0e04009c0010"                                          // System Capabilities
        "100c05010a4d0001020000000200"                          // Management Address 10.77.0.1
        "10181102fe80000000000000000000fffe000b01020000000200"  // Management Address fe80::..
        "080c746f20686f73742065746830"                          // Port Description
        "fe0900120f030100000000"                                // 802.3 link aggregation
        "fe0900120f010080000036"                                // 802.3 MAC/PHY
        "0000");                                                // End

TEST(ParseLldpFrameTest, WhatLldpdSends) {
  auto n = ParseLldpFrame(kLldpdFrame);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(n->source_mac, (std::array<uint8_t, 6>{0x02, 0, 0, 0, 0x0b, 0x01}));
  EXPECT_FALSE(n->frame_vlan.has_value());
  EXPECT_EQ(n->chassis_id_subtype, kChassisIdMac);
  EXPECT_EQ(n->chassis_id, "02:00:00:00:0b:01");
  EXPECT_EQ(n->chassis_id_raw, Bytes({0x02, 0, 0, 0, 0x0b, 0x01}));
  EXPECT_EQ(n->port_id_subtype, kPortIdMac);
  EXPECT_EQ(n->port_id, "02:00:00:00:0b:01");
  EXPECT_EQ(n->ttl_s, 4u);
  EXPECT_EQ(n->system_name, "leaf-07");
  EXPECT_EQ(
      n->system_description,
      "Debian GNU/Linux 12 (bookworm) Linux 6.18.44-fc-v782 #1 SMP PREEMPT_DYNAMIC @0 x86_64");
  EXPECT_EQ(n->port_description, "to host eth0");
  EXPECT_EQ(n->management_address, "10.77.0.1");
  EXPECT_FALSE(n->port_vlan.has_value());
  EXPECT_EQ(n->tlvs_discarded, 0);
  EXPECT_EQ(n->tlvs_unknown, 3);  // capabilities and the two 802.3 TLVs
  EXPECT_EQ(SwitchLabelValue(*n), "leaf-07");
}

TEST(ParseLldpFrameTest, EthernetHeader) {
  auto tagged = ParseLldpFrame(Frame(kMandatory + kEnd, Bytes({0x81, 0x00, 0x20, 0x0a})));
  ASSERT_TRUE(tagged.ok()) << tagged.status();
  EXPECT_EQ(tagged->frame_vlan, 10);
  // The other two LLDP group addresses are accepted; trailing padding is ignored.
  std::string f = Frame(kMandatory + kEnd) + std::string(20, '\0');
  f[5] = 0x03;
  EXPECT_TRUE(ParseLldpFrame(f).ok());
  f[5] = 0x00;
  EXPECT_TRUE(ParseLldpFrame(f).ok());

  struct Case {
    const char* name;
    std::string frame;
    const char* error;
  };
  std::string broadcast = Frame(kMandatory);
  broadcast.replace(0, 6, std::string(6, '\xff'));
  std::string ipv4 = Frame(kMandatory);
  ipv4[12] = 0x08;
  ipv4[13] = 0x00;
  const Case cases[] = {
      {"short", Frame("").substr(0, 13), "too short"},
      {"not a group address", broadcast, "not an LLDP group address"},
      {"ethertype", ipv4, "not LLDP (ethertype 0x800)"},
      {"stacked", Frame(kMandatory, Bytes({0x88, 0xa8, 0, 1, 0x81, 0, 0, 2})), "stacked"},
      {"cut tag", Frame("", Bytes({0x81, 0x00})).substr(0, 16), "truncated VLAN tag"},
      {"empty pdu", Frame(""), "ends before its Chassis ID TLV"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto n = ParseLldpFrame(c.frame);
    ASSERT_FALSE(n.ok());
    EXPECT_EQ(n.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(n.status().message(), HasSubstr(c.error));
  }
}

TEST(ParseLldpduTest, Invalid) {
  struct Case {
    const char* name;
    std::string pdu;
    const char* error;
  };
  const std::string port = kPortName, chassis = kChassisMac;
  const size_t after_mandatory = kMandatory.size();
  const Case cases[] = {
      {"port first", port + chassis + Ttl(1),
       "Port ID TLV at offset 0: TLV number 1 must be Chassis ID"},
      {"ttl before port", chassis + Ttl(1) + port,
       "TTL TLV at offset 9: TLV number 2 must be Port ID"},
      {"end too early", chassis + port + kEnd, "End TLV at offset 17: TLV number 3 must be TTL"},
      {"missing ttl", chassis + port, "ends before its TTL TLV"},
      {"duplicate chassis", kMandatory + chassis,
       "Chassis ID TLV at offset 21: repeats a mandatory TLV"},
      {"duplicate ttl", kMandatory + Ttl(5), "TTL TLV at offset 21: repeats"},
      {"chassis of 1 byte", Tlv(kTlvChassisId, Sub(4, "")) + port + Ttl(1),
       "Chassis ID TLV at offset 0: length 1 (must be 2..256)"},
      {"chassis of 257", Tlv(kTlvChassisId, Sub(7, std::string(256, 'a'))) + port + Ttl(1),
       "length 257 (must be 2..256)"},
      {"port of 0", chassis + Tlv(kTlvPortId, "") + Ttl(1), "Port ID TLV at offset 9: length 0"},
      {"ttl of 1", chassis + port + Tlv(kTlvTtl, "\x01"), "TTL TLV at offset 17: length 1"},
      {"past the end", kMandatory + Header(kTlvSystemName, 10) + "leaf",
       "System Name TLV at offset 21: length 10 runs past the end (4 bytes follow)"},
      {"cut header", kMandatory + "\x0a", "TLV header at offset 21 is cut short"},
      {"end with length", kMandatory + Tlv(kTlvEnd, "x"), "End TLV at offset 21: length 1"},
      {"nine-bit length", chassis + port + Header(kTlvTtl, 300) + std::string(2, '\0'),
       "length 300 runs past the end"},
  };
  EXPECT_EQ(after_mandatory, 21u);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto n = ParseLldpdu(c.pdu);
    ASSERT_FALSE(n.ok());
    EXPECT_EQ(n.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(n.status().message(), HasSubstr(c.error));
  }
}

TEST(ParseLldpduTest, Ids) {
  struct Case {
    const char* name;
    std::string chassis_body, port_body;
    std::string want_chassis, want_port;
  };
  const Case cases[] = {
      {"mac", Sub(4, Bytes({0xaa, 0xbb, 0xcc, 0, 1, 2})), Sub(3, Bytes({0, 0x11, 0, 0, 0, 0xff})),
       "aa:bb:cc:00:01:02", "00:11:00:00:00:ff"},
      {"network address v4", Sub(5, Bytes({1, 192, 0, 2, 7})), Sub(4, Bytes({1, 10, 0, 0, 1})),
       "192.0.2.7", "10.0.0.1"},
      {"network address v6",
       Sub(5, Bytes({2, 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1})),
       Sub(7, "Ethernet1/1"), "2001:db8::1", "Ethernet1/1"},
      {"names", Sub(7, "leaf-07.example"), Sub(5, "swp12"), "leaf-07.example", "swp12"},
      {"binary", Sub(1, Bytes({0x00, 0x01, 0xfe})), Sub(2, Bytes({0x7f, 'a'})), "00:01:fe",
       "7f:61"},
      {"trailing NUL", Sub(6, std::string("eth0\0", 5)), Sub(1, "alias"), "eth0", "alias"},
      // A MAC subtype of the wrong size and an unknown address family fall back to hex.
      {"odd sizes", Sub(4, Bytes({1, 2, 3})), Sub(4, Bytes({9, 1, 2})), "01:02:03", "09:01:02"},
      // The port table's MAC subtype is 3; 4 there is a network address, not a MAC.
      {"subtype tables differ", Sub(3, "x1"), Sub(4, Bytes({1, 1, 2, 3, 4})), "x1", "1.2.3.4"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto n = ParseLldpdu(Tlv(kTlvChassisId, c.chassis_body) + Tlv(kTlvPortId, c.port_body) +
                         Ttl(30) + kEnd);
    ASSERT_TRUE(n.ok()) << n.status();
    EXPECT_EQ(n->chassis_id_subtype, static_cast<uint8_t>(c.chassis_body[0]));
    EXPECT_EQ(n->chassis_id, c.want_chassis);
    EXPECT_EQ(n->chassis_id_raw, c.chassis_body.substr(1));
    EXPECT_EQ(n->port_id_subtype, static_cast<uint8_t>(c.port_body[0]));
    EXPECT_EQ(n->port_id, c.want_port);
  }
}

TEST(ParseLldpduTest, ShutdownAndEndOptional) {
  auto shutdown = ParseLldpdu(kChassisMac + kPortName + Ttl(0) + kEnd);
  ASSERT_TRUE(shutdown.ok()) << shutdown.status();
  EXPECT_EQ(shutdown->ttl_s, 0u);
  // No End TLV (802.1AB-2009), and a TTL of 65535.
  auto no_end = ParseLldpdu(kChassisMac + kPortName + Ttl(65535));
  ASSERT_TRUE(no_end.ok()) << no_end.status();
  EXPECT_EQ(no_end->ttl_s, 65535u);
  // Whatever follows End is not read.
  auto after = ParseLldpdu(kMandatory + kEnd + "\xff\xff garbage");
  ASSERT_TRUE(after.ok()) << after.status();
}

TEST(ParseLldpduTest, OptionalTlvs) {
  const std::string mgmt_v6 = Tlv(
      kTlvManagementAddress,
      Bytes({17, 2, 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9, 2, 0, 0, 0, 3, 0}));
  const std::string mgmt_v4 =
      Tlv(kTlvManagementAddress, Bytes({5, 1, 10, 0, 0, 9, 1, 0, 0, 0, 0, 2, 0x2b, 0x06}));
  const std::string mgmt_bad = Tlv(kTlvManagementAddress, Bytes({40, 1, 10, 0, 0, 9}));
  const std::string mgmt_other =
      Tlv(kTlvManagementAddress, Bytes({3, 99, 0xab, 0xcd, 1, 0, 0, 0, 0, 0}));
  const std::string long_name(300, 'n');
  struct Case {
    const char* name;
    std::string tlvs;
    std::function<void(const LldpNeighbor&)> check;
  };
  const Case cases[] = {
      {"first management address wins", mgmt_bad + mgmt_v6 + mgmt_v4,
       [](const LldpNeighbor& n) {
         EXPECT_EQ(n.management_address, "2001:db8::9");
         EXPECT_EQ(n.tlvs_discarded, 1);
       }},
      {"management address with OID", mgmt_v4,
       [](const LldpNeighbor& n) { EXPECT_EQ(n.management_address, "10.0.0.9"); }},
      {"unknown family as hex", mgmt_other,
       [](const LldpNeighbor& n) { EXPECT_EQ(n.management_address, "ab:cd"); }},
      {"duplicate names: the first counts",
       Tlv(kTlvSystemName, "a") + Tlv(kTlvSystemName, "b") + Tlv(kTlvPortDescription, "p1") +
           Tlv(kTlvPortDescription, "p2"),
       [](const LldpNeighbor& n) {
         EXPECT_EQ(n.system_name, "a");
         EXPECT_EQ(n.port_description, "p1");
         EXPECT_EQ(n.tlvs_discarded, 2);
       }},
      {"unsafe bytes escaped", Tlv(kTlvSystemName, std::string("sw\n\x1b[31m\\x\xc3\xa9", 12)),
       [](const LldpNeighbor& n) {
         EXPECT_EQ(n.system_name, "sw\\x0a\\x1b[31m\\x5cx\\xc3\\xa9");
         EXPECT_EQ(SwitchLabelValue(n).substr(0, 2), "c-");
       }},
      {"strings capped", Tlv(kTlvSystemDescription, long_name),
       [&](const LldpNeighbor& n) { EXPECT_EQ(n.system_description, long_name.substr(0, 255)); }},
      {"pvid", Tlv(kTlvOrgSpecific, Bytes({0, 0x80, 0xc2, 1, 0x0f, 0xff})),
       [](const LldpNeighbor& n) { EXPECT_EQ(n.port_vlan, 4095); }},
      {"pvid 0 is none", Tlv(kTlvOrgSpecific, Bytes({0, 0x80, 0xc2, 1, 0, 0})),
       [](const LldpNeighbor& n) { EXPECT_FALSE(n.port_vlan.has_value()); }},
      {"malformed org TLVs discarded",
       Tlv(kTlvOrgSpecific, Bytes({0, 0x80})) + Tlv(kTlvOrgSpecific, Bytes({0, 0x80, 0xc2, 1, 0})) +
           Tlv(kTlvOrgSpecific, Bytes({0, 0x80, 0xc2, 1, 0, 5})) +
           Tlv(kTlvOrgSpecific, Bytes({0, 0x80, 0xc2, 1, 0, 6})) +
           Tlv(kTlvOrgSpecific, Bytes({0, 0x12, 0x0f, 1, 0})) + Tlv(100, "reserved"),
       [](const LldpNeighbor& n) {
         EXPECT_EQ(n.port_vlan, 5);
         EXPECT_EQ(n.tlvs_discarded, 3);
         EXPECT_EQ(n.tlvs_unknown, 2);
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto n = ParseLldpdu(kMandatory + c.tlvs + kEnd);
    ASSERT_TRUE(n.ok()) << n.status();
    c.check(*n);
  }
}

TEST(SwitchLabelValueTest, NameOrHashOfChassis) {
  LldpNeighbor n;
  n.chassis_id_subtype = kChassisIdMac;
  n.chassis_id_raw = Bytes({0x02, 0x11, 0x22, 0x33, 0x44, 0x55});
  struct Case {
    std::string name;
    bool kept;
  };
  const Case cases[] = {
      {"leaf-07", true},
      {"Leaf_07.dc1", true},
      {std::string(63, 'a'), true},
      {std::string(64, 'a'), false},
      {"", false},
      {"-leaf", false},
      {"leaf.", false},
      {"leaf 07", false},
      {"leaf/07", false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    n.system_name = c.name;
    const std::string v = SwitchLabelValue(n);
    if (c.kept) {
      EXPECT_EQ(v, c.name);
    } else {
      // FNV-1a 64 of 04 02 11 22 33 44 55, computed apart from this code (python3).
      EXPECT_EQ(v, "c-a30a55e69b");
      EXPECT_TRUE(IsValidLabelValue(v));
    }
  }
  // Another chassis, or the same bytes under another subtype, is another switch.
  n.system_name = "";
  n.chassis_id_subtype = 7;
  EXPECT_NE(SwitchLabelValue(n), "c-a30a55e69b");
}

TEST(GroupLabelValue, TheSameSetGivesTheSameValue) {
  const std::string g = GroupLabelValue({"leaf-1", "leaf-2", "leaf-3"});
  EXPECT_TRUE(IsValidLabelValue(g)) << g;
  EXPECT_EQ(g.size(), 12u);
  EXPECT_EQ(g.substr(0, 2), "g-");
  EXPECT_EQ(GroupLabelValue({"leaf-3", "leaf-1", "leaf-2", "leaf-1"}), g);
  EXPECT_NE(GroupLabelValue({"leaf-1", "leaf-2"}), g);
  EXPECT_NE(GroupLabelValue({"leaf-1", "leaf-23"}), GroupLabelValue({"leaf-12", "leaf-3"}))
      << "names are not run together";
}

}  // namespace
}  // namespace fabric::neighbors
