#include "agent/fabric/neighbors/smp.h"

#include <string>
#include <vector>

#include "agent/fabric/neighbors/smp_umad.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fabric::neighbors {
namespace {

using ::testing::HasSubstr;

std::string Bytes(std::initializer_list<int> b) {
  std::string s;
  for (int x : b) s.push_back(static_cast<char>(x));
  return s;
}
// A 256-byte MAD from its header (the first 64 bytes), SMP data and initial path, zero elsewhere.
std::string Mad(const std::string& header, const std::string& data = "",
                const std::string& initial_path = "") {
  std::string m = header + std::string(64 - header.size(), '\0') + data;
  m += std::string(128 - m.size(), '\0') + initial_path;
  return m + std::string(256 - m.size(), '\0');
}

constexpr uint64_t kTid = 0x12345678;

// IBA vol 1 14.2.1.2 (directed-route SMP) and 13.4.2 (common MAD header), written out.
const std::string kWantNodeInfoGetPort3 =
    Mad(Bytes({0x01, 0x81, 0x01, 0x01,  // base version 1, class 0x81 (DR), class version 1, Get
               0x00, 0x00, 0x00, 0x01,  // D 0 + status 0, hop pointer 0, hop count 1
               0,    0,    0,    0,    0x12, 0x34, 0x56, 0x78,  // transaction ID
               0x00, 0x11, 0x00, 0x00,                          // attribute NodeInfo, reserved
               0x00, 0x00, 0x00, 0x00,                          // attribute modifier
               0,    0,    0,    0,    0,    0,    0,    0,     // M_Key
               0xff, 0xff, 0xff, 0xff}),                        // DrSLID, DrDLID permissive
        "", Bytes({0x00, 0x03}));                               // InitialPath[1] = port 3

// A Mellanox switch's NodeInfo as it answers through its port 17 (IBA 14.2.5.3 layout).
const std::string kNodeInfoData = Bytes({
    0x01, 0x01, 0x02, 0x29,                          // base 1, class 1, switch, 41 ports
    0x98, 0x03, 0x9b, 0x03, 0x00, 0x9f, 0xa0, 0x40,  // SystemImageGUID
    0x98, 0x03, 0x9b, 0x03, 0x00, 0x9f, 0xa0, 0x41,  // NodeGUID
    0x98, 0x03, 0x9b, 0x03, 0x00, 0x9f, 0xa0, 0x42,  // PortGUID
    0x00, 0x08, 0xd2, 0xf0,                          // PartitionCap 8, DeviceID 0xd2f0
    0x00, 0x00, 0x00, 0xa0,                          // Revision
    0x11, 0x00, 0x02, 0xc9,                          // LocalPortNum 17, VendorID 0x0002c9
});
std::string Response(uint16_t attr, const std::string& data, uint64_t tid = kTid,
                     int status_hi = 0x80, int status_lo = 0x00, int method = 0x81) {
  return Mad(Bytes({0x01,
                    0x81,
                    0x01,
                    method,
                    status_hi,
                    status_lo,
                    0x01,
                    0x01,
                    static_cast<int>(tid >> 56 & 0xff),
                    static_cast<int>(tid >> 48 & 0xff),
                    static_cast<int>(tid >> 40 & 0xff),
                    static_cast<int>(tid >> 32 & 0xff),
                    static_cast<int>(tid >> 24 & 0xff),
                    static_cast<int>(tid >> 16 & 0xff),
                    static_cast<int>(tid >> 8 & 0xff),
                    static_cast<int>(tid & 0xff),
                    attr >> 8,
                    attr & 0xff,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0xff,
                    0xff,
                    0xff,
                    0xff}),
             data, Bytes({0x00, 0x03}));
}

TEST(BuildDrSmpGetTest, EveryByte) {
  auto mad = BuildDrSmpGet(kAttrNodeInfo, 0, kTid, {3});
  ASSERT_TRUE(mad.ok()) << mad.status();
  EXPECT_EQ(*mad, kWantNodeInfoGetPort3);
  // Two hops, NodeDescription, PortInfo with its modifier (the port number).
  auto two = BuildDrSmpGet(kAttrPortInfo, 5, 0x0102030405060708, {1, 33});
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->substr(0, 24), Bytes({0x01, 0x81, 0x01, 0x01, 0,    0,    0, 2, 1, 2, 3, 4,
                                       5,    6,    7,    8,    0x00, 0x15, 0, 0, 0, 0, 0, 5}));
  EXPECT_EQ(two->substr(128, 4), Bytes({0, 1, 33, 0}));
  // Zero hops: the local node.
  auto local = BuildDrSmpGet(kAttrNodeDescription, 0, 1, {});
  ASSERT_TRUE(local.ok());
  EXPECT_EQ((*local)[7], 0);
  EXPECT_EQ(local->substr(16, 2), Bytes({0x00, 0x10}));

  EXPECT_FALSE(BuildDrSmpGet(kAttrNodeInfo, 0, 1, std::vector<uint8_t>(64, 1)).ok());
  EXPECT_TRUE(BuildDrSmpGet(kAttrNodeInfo, 0, 1, std::vector<uint8_t>(63, 1)).ok());
  EXPECT_FALSE(BuildDrSmpGet(kAttrNodeInfo, 0, 1, {0}).ok());
  EXPECT_FALSE(BuildDrSmpGet(kAttrNodeInfo, 0, 1, {1, 255}).ok());
}

TEST(ParseNodeInfoResponseTest, EveryField) {
  // The high 32 bits of the TID are ib_umad's agent number: they are not compared.
  auto n = ParseNodeInfoResponse(Response(kAttrNodeInfo, kNodeInfoData, 0x0000000712345678), kTid);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(n->base_version, 1);
  EXPECT_EQ(n->class_version, 1);
  EXPECT_EQ(n->node_type, kNodeTypeSwitch);
  EXPECT_EQ(n->num_ports, 41);
  EXPECT_EQ(n->system_image_guid, 0x98039b03009fa040u);
  EXPECT_EQ(n->node_guid, 0x98039b03009fa041u);
  EXPECT_EQ(n->port_guid, 0x98039b03009fa042u);
  EXPECT_EQ(n->partition_cap, 8);
  EXPECT_EQ(n->device_id, 0xd2f0);
  EXPECT_EQ(n->revision, 0xa0u);
  EXPECT_EQ(n->local_port_num, 17);
  EXPECT_EQ(n->vendor_id, 0x0002c9u);
  EXPECT_EQ(GuidText(n->node_guid), "0x98039b03009fa041");
  EXPECT_EQ(NodeTypeName(n->node_type), "switch");
  EXPECT_EQ(NodeTypeName(9), "type 9");
}

TEST(ParseNodeInfoResponseTest, Rejects) {
  struct Case {
    const char* name;
    std::string mad;
    absl::StatusCode code;
    const char* error;
  };
  std::string version = Response(kAttrNodeInfo, kNodeInfoData);
  version[0] = 2;
  std::string lid_routed = Response(kAttrNodeInfo, kNodeInfoData);
  lid_routed[1] = 0x01;
  const auto bad = absl::StatusCode::kInvalidArgument;
  const Case cases[] = {
      {"short", Response(kAttrNodeInfo, kNodeInfoData).substr(0, 255), bad, "of 255 bytes"},
      {"long", Response(kAttrNodeInfo, kNodeInfoData) + "x", bad, "of 257 bytes"},
      {"version", version, bad, "base version 2 class 0x81"},
      {"class", lid_routed, bad, "class 0x1 "},
      {"a request", Response(kAttrNodeInfo, kNodeInfoData, kTid, 0x80, 0, 0x01), bad,
       "method 0x1, not GetResp"},
      {"tid", Response(kAttrNodeInfo, kNodeInfoData, kTid + 1), bad, "transaction ID 0x12345679"},
      {"attribute", Response(kAttrNodeDescription, kNodeInfoData), bad, "carries NodeDescription"},
      {"direction", Response(kAttrNodeInfo, kNodeInfoData, kTid, 0x00, 0x00), bad,
       "direction bit clear"},
      {"status", Response(kAttrNodeInfo, kNodeInfoData, kTid, 0x80, 0x1c),
       absl::StatusCode::kFailedPrecondition, "status 0x001c invalid attribute or modifier value"},
      {"busy", Response(kAttrNodeInfo, kNodeInfoData, kTid, 0x80, 0x01),
       absl::StatusCode::kFailedPrecondition, "busy"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto n = ParseNodeInfoResponse(c.mad, kTid);
    ASSERT_FALSE(n.ok());
    EXPECT_EQ(n.status().code(), c.code);
    EXPECT_THAT(n.status().message(), HasSubstr(c.error));
    EXPECT_THAT(n.status().message(), HasSubstr("SubnGet(NodeInfo) response"));
  }
}

TEST(ParseNodeDescriptionResponseTest, TrimmedAndPrintable) {
  struct Case {
    const char* name;
    std::string data;
    std::string want;
  };
  const Case cases[] = {
      {"nul-terminated", std::string("MF0;leaf-03:MQM8700/U1\0junk", 27), "MF0;leaf-03:MQM8700/U1"},
      {"all 64 bytes", std::string(64, 'x'), std::string(64, 'x')},
      {"empty", "", ""},
      {"control bytes", "host\x01\xff", "host\\x01\\xff"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto d = ParseNodeDescriptionResponse(Response(kAttrNodeDescription, c.data), kTid);
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(d->text, c.want);
  }
}

// Answers like the far node: the canned data under the request's attribute and TID.
class FakeTransport : public SmpTransport {
 public:
  absl::StatusOr<std::string> Exchange(const std::string& mad, absl::Duration timeout) override {
    requests.push_back(mad);
    timeouts.push_back(timeout);
    if (!fail.ok()) return fail;
    const uint16_t attr =
        static_cast<uint16_t>(static_cast<uint8_t>(mad[16]) << 8 | static_cast<uint8_t>(mad[17]));
    std::string r =
        Response(attr_override.value_or(attr), attr == kAttrNodeInfo ? kNodeInfoData : description,
                 kTid, 0x80, status_lo);
    r.replace(8, 8, mad.substr(8, 8));
    r[8] = 0x55;  // the kernel's agent number in the high TID bits
    return r;
  }
  std::vector<std::string> requests;
  std::vector<absl::Duration> timeouts;
  absl::Status fail;
  std::optional<uint16_t> attr_override;
  int status_lo = 0;
  std::string description = "leaf-03 Quantum";
};

TEST(QueryIbNeighborTest, AsksNodeInfoThenNodeDescriptionThroughThePort) {
  FakeTransport t;
  auto n = QueryIbNeighbor(t, 3, absl::Milliseconds(200));
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(n->node_guid, 0x98039b03009fa041u);
  EXPECT_EQ(n->system_image_guid, 0x98039b03009fa040u);
  EXPECT_EQ(n->node_type, kNodeTypeSwitch);
  EXPECT_EQ(n->description, "leaf-03 Quantum");
  EXPECT_EQ(n->remote_port, 17);
  ASSERT_EQ(t.requests.size(), 2u);
  // The first request is the spec layout except for its TID.
  std::string first = t.requests[0];
  first.replace(8, 8, kWantNodeInfoGetPort3.substr(8, 8));
  EXPECT_EQ(first, kWantNodeInfoGetPort3);
  EXPECT_EQ(t.requests[1].substr(16, 2), Bytes({0x00, 0x10}));
  EXPECT_NE(t.requests[0].substr(8, 8), t.requests[1].substr(8, 8));  // fresh TIDs
  EXPECT_EQ(t.timeouts[0], absl::Milliseconds(200));
}

TEST(QueryIbNeighborTest, Errors) {
  {
    FakeTransport t;
    t.fail = absl::DeadlineExceededError("no response within 200 ms");
    auto n = QueryIbNeighbor(t, 2, absl::Milliseconds(200));
    EXPECT_EQ(n.status().code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_THAT(n.status().message(), HasSubstr("SubnGet(NodeInfo) through port 2"));
    EXPECT_EQ(t.requests.size(), 1u);
  }
  {
    FakeTransport t;
    t.status_lo = 0x1c;
    auto n = QueryIbNeighbor(t, 1, absl::Milliseconds(200));
    EXPECT_EQ(n.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(n.status().message(), HasSubstr("neighbour of port 1"));
  }
  {
    FakeTransport t;
    t.attr_override = kAttrPortInfo;
    EXPECT_FALSE(QueryIbNeighbor(t, 1, absl::Milliseconds(200)).ok());
  }
  FakeTransport t;
  EXPECT_EQ(QueryIbNeighbor(t, 0, absl::Seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(QueryIbNeighbor(t, 255, absl::Seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(t.requests.empty());
}

// The real transport can only fail here (no InfiniBand port, and rxe has no SMI): it must do so
// with a status, not a crash.
TEST(UmadSmpTransportTest, NoSuchDevice) {
  auto t = UmadSmpTransportImpl::Open("fabric-no-such-hca", 1);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("fabric-no-such-hca:1"));
  EXPECT_EQ(UmadSmpTransportImpl::Open("", 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(UmadSmpTransportImpl::Open("mlx5_0", 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace fabric::neighbors
