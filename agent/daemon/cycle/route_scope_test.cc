#include "agent/daemon/cycle/route_scope.h"

#include <gtest/gtest.h>
#include <linux/rtnetlink.h>
#include <netlink/attr.h>
#include <netlink/msg.h>

#include <string>

namespace fabric {
namespace {

// A message built with libnl, as the kernel would send it.
class Msg {
 public:
  explicit Msg(int type) : m_(nlmsg_alloc_simple(type, 0)) {}
  ~Msg() { nlmsg_free(m_); }
  template <typename T>
  Msg& Header(const T& t) {
    EXPECT_EQ(nlmsg_append(m_, const_cast<T*>(&t), sizeof(T), NLMSG_ALIGNTO), 0);
    return *this;
  }
  Msg& Str(int type, const char* s) {
    EXPECT_EQ(nla_put_string(m_, type, s), 0);
    return *this;
  }
  Msg& U32(int type, uint32_t v) {
    EXPECT_EQ(nla_put_u32(m_, type, v), 0);
    return *this;
  }
  std::string Bytes() const {
    const nlmsghdr* h = nlmsg_hdr(m_);
    return std::string(reinterpret_cast<const char*>(h), h->nlmsg_len);
  }

 private:
  nl_msg* m_;
};

std::string NameOf(int ifindex) { return ifindex == 7 ? "eth3" : ""; }

TEST(ScopeOfRouteMessage, EachMessageNamesWhatItChanged) {
  ifinfomsg link{};
  link.ifi_index = 9;
  ifaddrmsg addr{};
  addr.ifa_index = 7;
  rtmsg route{};
  route.rtm_table = RT_TABLE_MAIN;
  route.rtm_dst_len = 24;
  rtmsg local = route;
  local.rtm_table = RT_TABLE_LOCAL;
  rtmsg deflt = route;
  deflt.rtm_dst_len = 0;

  struct Case {
    const char* name;
    std::string bytes;
    bool relevant;
    std::set<std::string> netdevs, routes;
    std::set<int32_t> ifindexes;
    bool default_route;
  };
  const Case cases[] = {
      {"link with its name",
       Msg(RTM_NEWLINK).Header(link).Str(IFLA_IFNAME, "veth0").Bytes(),
       true,
       {"veth0"},
       {},
       {},
       false},
      {"link without a name", Msg(RTM_DELLINK).Header(link).Bytes(), true, {}, {}, {9}, false},
      {"address on a live netdev",
       Msg(RTM_NEWADDR).Header(addr).Bytes(),
       true,
       {"eth3"},
       {},
       {},
       false},
      {"address on a gone netdev",
       Msg(RTM_DELADDR).Header(ifaddrmsg{0, 0, 0, 0, 12}).Bytes(),
       true,
       {},
       {},
       {12},
       false},
      {"main-table route",
       Msg(RTM_NEWROUTE).Header(route).U32(RTA_OIF, 7).Bytes(),
       true,
       {},
       {"eth3"},
       {},
       false},
      {"route, table attribute wins",
       Msg(RTM_NEWROUTE).Header(route).U32(RTA_TABLE, 255).Bytes(),
       false,
       {},
       {},
       {},
       false},
      {"local-table route",
       Msg(RTM_NEWROUTE).Header(local).U32(RTA_OIF, 7).Bytes(),
       false,
       {},
       {},
       {},
       false},
      {"default route",
       Msg(RTM_DELROUTE).Header(deflt).U32(RTA_OIF, 7).Bytes(),
       true,
       {},
       {},
       {},
       true},
      {"multipath route (no OIF)", Msg(RTM_NEWROUTE).Header(route).Bytes(), true, {}, {}, {}, true},
      {"neighbour", Msg(RTM_NEWNEIGH).Header(link).Bytes(), false, {}, {}, {}, false},
      {"truncated link", Msg(RTM_NEWLINK).Bytes(), false, {}, {}, {}, false},
  };
  for (const Case& c : cases) {
    ChangeScope s;
    auto m = ScopeOfRouteMessage(c.bytes, NameOf, &s);
    EXPECT_EQ(m.has_value(), c.relevant) << c.name;
    EXPECT_EQ(s.netdevs(), c.netdevs) << c.name;
    EXPECT_EQ(s.route_netdevs(), c.routes) << c.name;
    EXPECT_EQ(s.ifindexes(), c.ifindexes) << c.name;
    EXPECT_EQ(s.default_route(), c.default_route) << c.name;
  }
}

TEST(ScopeOfRouteMessage, LengthsBeyondTheBufferAreRefused) {
  std::string bytes = Msg(RTM_NEWLINK).Header(ifinfomsg{}).Str(IFLA_IFNAME, "eth0").Bytes();
  ChangeScope s;
  EXPECT_FALSE(ScopeOfRouteMessage(bytes.substr(0, bytes.size() - 4), NameOf, &s));
  EXPECT_FALSE(ScopeOfRouteMessage(bytes.substr(0, 8), NameOf, &s));
  EXPECT_TRUE(s.empty());
}

}  // namespace
}  // namespace fabric
