#include "agent/fabric/announce/validate.h"

#include <arpa/inet.h>

#include <string>
#include <vector>

#include "agent/fabric/announce/test_addresses.h"
#include "gtest/gtest.h"

namespace fabric::announce {
namespace {

TEST(CheckIfname, KernelRule) {
  struct Case {
    std::string name;
    std::string error;  // substring; empty: valid
  };
  const Case cases[] = {
      {"eth0", ""},
      {"fa0", ""},
      {"a", ""},
      {"enp65s0f0np0.10", ""},  // 15 bytes
      {"br-1234_x@y", ""},
      {"", "is empty"},
      {"enp65s0f0np0.100", "16 bytes; an interface name has 1 to 15"},
      {".", "\".\" and \"..\" are not interface names"},
      {"..", "are not interface names"},
      {"a/b", "contains '/'"},
      {"eth0:1", "contains ':'"},
      {std::string("fa0\0x", 5), "contains a NUL byte"},
      {" eth0", "contains whitespace"},
      {"eth0\n", "contains whitespace"},
      {"a\tb", "contains whitespace"},
      {"a\xa0", "contains whitespace"},
  };
  for (const Case& c : cases) {
    absl::Status s = CheckIfname(c.name);
    if (c.error.empty()) {
      EXPECT_TRUE(s.ok()) << c.name << ": " << s;
    } else {
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.name;
      EXPECT_NE(s.message().find(c.error), absl::string_view::npos) << s;
    }
  }
  // The caller's name for the field, and the input escaped, never raw.
  absl::Status s = CheckIfname(std::string("fa0\0x", 5), "CNI_IFNAME");
  EXPECT_EQ(s.message(), "CNI_IFNAME \"fa0\\x00x\": contains a NUL byte");
  EXPECT_LT(CheckIfname(std::string(1 << 20, 'x')).message().size(), 120u);
}

Address Parse(const char* ip) {
  Address a;
  a.family = std::string(ip).find(':') == std::string::npos ? AF_INET : AF_INET6;
  EXPECT_EQ(inet_pton(a.family, ip, &a.addr), 1) << ip;
  return a;
}

TEST(AddressClassProblem, Table) {
  struct Case {
    const char* ip;
    const char* problem;  // substring; "" for none
  };
  const Case cases[] = {
      {"10.0.0.2", ""},
      {"192.168.1.255", ""},  // a host address in a /16; subnet broadcasts need the interface
      {"100.64.0.1", ""},
      {"169.254.1.1", ""},
      {"0.0.0.0", "unspecified"},
      {"255.255.255.255", "broadcast"},
      {"127.0.0.1", "loopback"},
      {"127.255.0.9", "loopback"},
      {"224.0.0.1", "multicast"},
      {"239.255.255.250", "multicast"},
      {"2001:db8::2", ""},
      {"fd00::2", ""},
      {"::", "unspecified"},
      {"::1", "loopback"},
      {"ff02::1", "multicast"},
      {"::ffff:10.0.0.2", "IPv4-mapped"},
      {"fe80::1", "link-local"},
  };
  for (const Case& c : cases) {
    const std::string got = AddressClassProblem(Parse(c.ip));
    if (*c.problem == '\0') {
      EXPECT_EQ(got, "") << c.ip;
    } else {
      EXPECT_NE(got.find(c.problem), std::string::npos) << c.ip << ": " << got;
    }
  }
}

Target Fa0() {
  Target t;
  t.ifname = "fa0";
  t.ifindex = 3;
  t.addresses = {V4("10.9.0.2"), TestAddress(AF_INET, 16, "10.20.0.5", nullptr), V6("fd00::2")};
  return t;
}

TEST(ChooseOwnAddresses, OwnAddressesWithTheirPrefix) {
  auto got = ChooseOwnAddresses(Fa0(), {"fd00::2", "10.20.0.5"});
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ((*got)[0].ToString(), "fd00::2/64");
  EXPECT_EQ((*got)[1].ToString(), "10.20.0.5/16");
  auto all = ChooseOwnAddresses(Fa0(), {});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 3u);
}

TEST(ChooseOwnAddresses, RefusesWithTheRightCode) {
  struct Case {
    std::vector<std::string> ips;
    absl::StatusCode code;
    std::string message;  // substring
  };
  std::vector<std::string> many(kMaxAnnounceAddresses + 1, "10.9.0.2");
  const Case cases[] = {
      {many, absl::StatusCode::kResourceExhausted, "ips: 33 addresses; at most 32 per request"},
      {{"10.9.0.254"},
       absl::StatusCode::kPermissionDenied,
       "10.9.0.254 is not configured on fa0: only addresses this host owns are announced"},
      {{"fd00::99"}, absl::StatusCode::kPermissionDenied, "fd00::99 is not configured on fa0"},
      // Bad classes are named as such even when ownership would refuse them too, and before a
      // later foreign address.
      {{"224.0.0.1", "10.9.0.254"}, absl::StatusCode::kInvalidArgument, "multicast"},
      {{"10.9.0.254", "0.0.0.0"}, absl::StatusCode::kInvalidArgument, "unspecified"},
      {{"127.0.0.1"}, absl::StatusCode::kInvalidArgument, "loopback"},
      {{"255.255.255.255"}, absl::StatusCode::kInvalidArgument, "broadcast"},
      {{"::"}, absl::StatusCode::kInvalidArgument, "unspecified"},
      {{"10.9.0.255"},
       absl::StatusCode::kInvalidArgument,
       "10.9.0.255 is the broadcast address of fa0's 10.9.0.2/24"},
      {{"10.20.255.255"}, absl::StatusCode::kInvalidArgument, "broadcast address of fa0's"},
      {{"10.9.0.2", "10.9.0.2"}, absl::StatusCode::kInvalidArgument, "10.9.0.2 given twice"},
      {{"fa0"}, absl::StatusCode::kInvalidArgument, "ips: \"fa0\" is not an IP address"},
      {{std::string("10.9.0.2\0x", 10)}, absl::StatusCode::kInvalidArgument, "not an IP"},
      {{" 10.9.0.2"}, absl::StatusCode::kInvalidArgument, "not an IP"},
      {{std::string(1 << 20, '1')}, absl::StatusCode::kInvalidArgument, "(1048576 bytes)"},
  };
  for (const Case& c : cases) {
    auto got = ChooseOwnAddresses(Fa0(), c.ips);
    ASSERT_FALSE(got.ok()) << c.message;
    EXPECT_EQ(got.status().code(), c.code) << got.status();
    EXPECT_NE(got.status().message().find(c.message), absl::string_view::npos) << got.status();
    EXPECT_LT(got.status().message().size(), 200u);
  }
  Target none = Fa0();
  none.addresses.clear();
  EXPECT_EQ(ChooseOwnAddresses(none, {}).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ChooseOwnAddresses(none, {"10.9.0.2"}).status().code(),
            absl::StatusCode::kPermissionDenied);
}

class DadLink : public Link {
 public:
  absl::StatusOr<bool> answer = false;
  absl::Status Send(const std::vector<uint8_t>&) override { return absl::OkStatus(); }
  absl::StatusOr<std::vector<uint8_t>> TryReceive() override { return absl::NotFoundError("none"); }
  int poll_fd() const override { return -1; }
  absl::StatusOr<bool> Tentative(const in6_addr&) override { return answer; }
};

TEST(CheckAnnounceable, DadState) {
  DadLink link;
  Target t = Fa0();
  EXPECT_TRUE(CheckAnnounceable(link, t, true, true).ok());
  link.answer = true;  // tentative: the job waits for DAD
  EXPECT_TRUE(CheckAnnounceable(link, t, true, true).ok());
  link.answer = absl::FailedPreconditionError("duplicate address detection failed on fa0");
  absl::Status s = CheckAnnounceable(link, t, true, false);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("fd00::2: duplicate address detection failed"),
            absl::string_view::npos)
      << s;
  link.answer = absl::NotFoundError("gone");
  EXPECT_EQ(CheckAnnounceable(link, t, true, true).code(), absl::StatusCode::kPermissionDenied);
  // IPv6 off: a named IPv6 address is refused; the default set leaves it out ...
  link.answer = false;
  EXPECT_EQ(CheckAnnounceable(link, t, false, true).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(CheckAnnounceable(link, t, false, false).ok());
  // ... unless nothing else is left.
  t.addresses = {V6("fd00::2")};
  EXPECT_EQ(CheckAnnounceable(link, t, false, false).code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace fabric::announce
