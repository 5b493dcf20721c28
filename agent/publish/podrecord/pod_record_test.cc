#include "agent/publish/podrecord/pod_record.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace fabric::podrecord {
namespace {

using ::testing::HasSubstr;

PodRecord Sample() {
  PodRecord r;
  r.pod_uid = "5d0c7a0e-91b2-4c36-9d5f-0a8e1c2b3d4f";
  r.container_id = "0123abcd";
  r.ifname = "net1";
  r.netns = "/var/run/netns/cni-1";
  r.netns_inode = 4026532345;
  r.interfaces = {{"net1", {"10.50.0.11/24", "fd00::11/64"}, "0a:58:0a:32:00:0b"}};
  jobenv::Pick p;
  p.device = "mlx5_4";
  p.port = 1;
  p.netdev = "net1";
  p.roce = true;
  p.gid_index = 5;
  p.ipv4 = "10.50.0.11";
  p.ipv4_subnet = "10.50.0.0/24";
  p.other_ipv4_gids = {{3, "10.50.0.12", true, "RoCE v2 on net1"}, {2, "10.50.0.1", false, "x"}};
  r.ports.push_back(p);
  return r;
}

TEST(PodRecord, RoundTrip) {
  const PodRecord r = Sample();
  absl::StatusOr<PodRecord> back = ParseRecord(RecordJson(r));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->pod_uid, "5d0c7a0e-91b2-4c36-9d5f-0a8e1c2b3d4f");
  EXPECT_EQ(back->container_id, "0123abcd");
  EXPECT_EQ(back->ifname, "net1");
  EXPECT_EQ(back->netns, "/var/run/netns/cni-1");
  EXPECT_EQ(back->netns_inode, 4026532345u);
  ASSERT_EQ(back->interfaces.size(), 1u);
  EXPECT_EQ(back->interfaces[0].addresses, r.interfaces[0].addresses);
  EXPECT_EQ(back->interfaces[0].mac, "0a:58:0a:32:00:0b");
  ASSERT_EQ(back->ports.size(), 1u);
  const jobenv::Pick& p = back->ports[0];
  EXPECT_EQ(p.Port(), "mlx5_4:1");
  EXPECT_EQ(p.netdev, "net1");
  EXPECT_EQ(p.gid_index, 5u);
  EXPECT_EQ(p.ipv4, "10.50.0.11");
  EXPECT_EQ(p.ipv4_subnet, "10.50.0.0/24");
  EXPECT_TRUE(p.roce);
  ASSERT_EQ(p.other_ipv4_gids.size(), 2u);
  EXPECT_EQ(p.other_ipv4_gids[0].index, 3u);
  EXPECT_TRUE(p.other_ipv4_gids[0].roce_v2_or_unknown);
  EXPECT_FALSE(p.other_ipv4_gids[1].roce_v2_or_unknown);
  // Deterministic: the same record, the same bytes.
  EXPECT_EQ(RecordJson(*back), RecordJson(r));
}

TEST(PodRecord, PortWithoutGid) {
  PodRecord r = Sample();
  r.ports[0].gid_index.reset();
  absl::StatusOr<PodRecord> back = ParseRecord(RecordJson(r));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_FALSE(back->ports[0].gid_index.has_value());
}

TEST(PodRecord, RefusesWhatIsNotARecord) {
  const std::string deep = std::string(100, '[') + std::string(100, ']');
  const struct {
    std::string bytes, error;
  } cases[] = {
      {"", "not JSON"},
      {"{", "not JSON"},
      {"[]", "not a JSON object"},
      {"{}", "no \"format\""},
      {R"({"format":"1"})", "\"format\" is not a number"},
      {R"({"format":2})", "format 2 is newer"},
      {R"({"format":1,"ifname":3})", "\"ifname\" is not a string"},
      {R"({"format":1,"netns_inode":-1})", "\"netns_inode\" is not a number"},
      {R"({"format":1,"interfaces":{}})", "\"interfaces\" is not an array"},
      {R"({"format":1,"interfaces":[1]})", "an interface is not an object"},
      {R"({"format":1,"interfaces":[{"addresses":[]}]})", "an interface has no name"},
      {R"({"format":1,"interfaces":[{"name":"a","addresses":[1]}]})", "an address is not"},
      {R"({"format":1,"interfaces":[{"name":"a","mac":7}]})", "\"mac\" is not a string"},
      {R"({"format":1,"pod_uid":[]})", "\"pod_uid\" is not a string"},
      {R"({"format":1,"ports":[{}]})", "a port names no device"},
      {R"({"format":1,"ports":["x"]})", "a port is not an object"},
      {R"({"format":1,"ports":[{"device":"m","port":256}]})", "\"port\" is not a number"},
      {R"({"format":1,"ports":[{"device":"m","gid_index":70000}]})", "\"gid_index\""},
      {R"({"format":1,"ports":[{"device":"m","other_ipv4_gids":[{}]}]})", "has no index"},
      {R"({"format":1,"ports":[{"device":"m","other_ipv4_gids":[{"index":1,"roce_v2_or_unknown":1}]}]})",
       "not a boolean"},
      {deep, "nested deeper"},
      {std::string(kMaxBytes + 1, ' '), "over"},
  };
  for (const auto& c : cases) {
    absl::StatusOr<PodRecord> r = ParseRecord(c.bytes);
    ASSERT_FALSE(r.ok()) << c.bytes.substr(0, 80);
    EXPECT_TRUE(absl::IsInvalidArgument(r.status()));
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.error)) << c.bytes.substr(0, 80);
  }
}

TEST(PodRecord, OlderAndPartialRecordsParse) {
  absl::StatusOr<PodRecord> r = ParseRecord(R"({"format":1,"ports":[{"device":"mlx5_0"}]})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->ports[0].port, 1u);  // the default port
  EXPECT_TRUE(r->interfaces.empty());
  EXPECT_EQ(r->pod_uid, "");  // written before records named their pod
  // And a record without them is written as before: older readers see the same keys.
  PodRecord plain = Sample();
  plain.pod_uid.clear();
  plain.interfaces[0].mac.clear();
  EXPECT_EQ(RecordJson(plain).find("pod_uid"), std::string::npos);
  EXPECT_EQ(RecordJson(plain).find("\"mac\""), std::string::npos);
}

TEST(PodRecord, FileNames) {
  EXPECT_EQ(FileName(42, "abc", "net1"), "42-abc-net1.json");
  EXPECT_EQ(FilePrefix(42), "42-");
  EXPECT_EQ(InodeOfName("42-abc-net1.json"), 42u);
  EXPECT_FALSE(InodeOfName("x-abc-net1.json"));
  EXPECT_FALSE(InodeOfName("42-abc-net1.json.tmp"));
  EXPECT_FALSE(InodeOfName("42"));
  EXPECT_TRUE(IsRecordOf("42-abc-net1.json", "abc", "net1"));
  EXPECT_FALSE(IsRecordOf("42-abc-net1.json", "abc", "net2"));
  EXPECT_FALSE(IsRecordOf("42-abcd-net1.json", "abc", "net1"));
  EXPECT_FALSE(IsRecordOf("42-xabc-net1.json", "abc", "net1"));
}

TEST(PodRecord, CheckAgainstTheNamespace) {
  const PodRecord r = Sample();
  EXPECT_TRUE(CheckRecord(r, {{"lo", {"127.0.0.1"}}, {"net1", {"10.50.0.11"}}}).ok());
  EXPECT_TRUE(CheckRecord(r, {{"net1", {"fd00::11"}}}).ok());
  absl::Status gone = CheckRecord(r, {{"lo", {"127.0.0.1"}}});
  EXPECT_TRUE(absl::IsFailedPrecondition(gone));
  EXPECT_THAT(std::string(gone.message()), HasSubstr("net1 of the record is not in"));
  // Another pod's record whose namespace inode was reused: the name fits, the address does not.
  absl::Status other = CheckRecord(r, {{"net1", {"10.50.0.99"}}});
  EXPECT_TRUE(absl::IsFailedPrecondition(other));
  EXPECT_THAT(std::string(other.message()), HasSubstr("holds none of the record's addresses"));
}

}  // namespace
}  // namespace fabric::podrecord
