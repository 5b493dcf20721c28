#include "agent/daemon/cycle/route_scope.h"

#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netlink/attr.h>
#include <netlink/msg.h>

#include <cstring>

namespace fabric {
namespace {

// The attribute `type` after a payload header of `hdrlen` bytes; bounded by nlmsg_len, which
// the caller has checked against the buffer.
const nlattr* Attr(const nlmsghdr* h, size_t hdrlen, int type) {
  return nlmsg_find_attr(const_cast<nlmsghdr*>(h), static_cast<int>(hdrlen), type);
}

std::optional<uint32_t> U32(const nlattr* a) {
  if (a == nullptr || nla_len(a) < 4) return std::nullopt;
  return nla_get_u32(const_cast<nlattr*>(a));
}

}  // namespace

std::optional<RouteMessage> ScopeOfRouteMessage(std::string_view msg,
                                                const std::function<std::string(int)>& name_of,
                                                ChangeScope* scope) {
  if (msg.size() < sizeof(nlmsghdr)) return std::nullopt;
  const auto* h = reinterpret_cast<const nlmsghdr*>(msg.data());
  if (h->nlmsg_len < sizeof(nlmsghdr) || h->nlmsg_len > msg.size()) return std::nullopt;
  RouteMessage out;
  // The netdev's name now; not looked up once the scope is full (a storm keeps no names).
  auto name_now = [&](int ifindex) { return scope->full() ? std::string() : name_of(ifindex); };
  switch (h->nlmsg_type) {
    case RTM_NEWLINK:
    case RTM_DELLINK: {
      out.what = h->nlmsg_type == RTM_NEWLINK ? "link added or changed" : "link removed";
      if (h->nlmsg_len < NLMSG_LENGTH(sizeof(ifinfomsg))) return std::nullopt;
      out.ifindex = static_cast<const ifinfomsg*>(nlmsg_data(h))->ifi_index;
      // The message's own name: right for a link already gone, and for a renamed one (whose
      // device the planner finds by its PCI function or lower links).
      const nlattr* name = Attr(h, sizeof(ifinfomsg), IFLA_IFNAME);
      if (name != nullptr && nla_len(name) > 1) {
        const auto* text = static_cast<const char*>(nla_data(name));
        scope->Netdev(std::string(text, strnlen(text, static_cast<size_t>(nla_len(name)))));
      } else {
        scope->Ifindex(out.ifindex);
      }
      return out;
    }
    case RTM_NEWADDR:
    case RTM_DELADDR: {
      out.what = h->nlmsg_type == RTM_NEWADDR ? "address added" : "address removed";
      if (h->nlmsg_len < NLMSG_LENGTH(sizeof(ifaddrmsg))) return std::nullopt;
      out.ifindex = static_cast<int>(static_cast<const ifaddrmsg*>(nlmsg_data(h))->ifa_index);
      if (std::string name = name_now(out.ifindex); !name.empty()) {
        scope->Netdev(std::move(name));
      } else {
        scope->Ifindex(out.ifindex);
      }
      return out;
    }
    case RTM_NEWROUTE:
    case RTM_DELROUTE: {
      out.what = h->nlmsg_type == RTM_NEWROUTE ? "route added" : "route removed";
      if (h->nlmsg_len < NLMSG_LENGTH(sizeof(rtmsg))) return std::nullopt;
      const auto* rt = static_cast<const rtmsg*>(nlmsg_data(h));
      const uint32_t table = U32(Attr(h, sizeof(rtmsg), RTA_TABLE)).value_or(rt->rtm_table);
      // Discovery reads the main table (/proc/net/route, default routes): the local table's
      // routes, which every address brings, change nothing in the inventory.
      if (table != RT_TABLE_MAIN) return std::nullopt;
      out.ifindex = static_cast<int>(U32(Attr(h, sizeof(rtmsg), RTA_OIF)).value_or(0));
      if (rt->rtm_dst_len == 0 || out.ifindex <= 0) {
        scope->DefaultRoute();  // A default route, or a multipath one: the routes are read.
      } else if (std::string name = name_now(out.ifindex); !name.empty()) {
        scope->RouteVia(std::move(name));
      } else {
        scope->DefaultRoute();
      }
      return out;
    }
    default:
      return std::nullopt;
  }
}

}  // namespace fabric
