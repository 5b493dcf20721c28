// RoutingOsImpl: rules, routes and addresses over one libnl route socket; the ARP sysctls through
// /proc/sys/net (which resolves to the network namespace of the calling thread).
#include <errno.h>
#include <fcntl.h>
#include <linux/fib_rules.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netlink/addr.h>
#include <netlink/cache.h>
#include <netlink/errno.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/route.h>
#include <netlink/route/rule.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "agent/common/errno.h"
#include "agent/common/fd.h"
#include "agent/fabric/announce/link.h"
#include "agent/fabric/announce/pod_routing.h"

namespace fabric::announce {
namespace {

absl::Status NlError(int err, const std::string& what) {
  std::string msg = absl::StrCat(what, ": ", nl_geterror(err));
  switch (-err) {
    case NLE_EXIST:
      return absl::AlreadyExistsError(msg);
    case NLE_OBJ_NOTFOUND:
    case NLE_NOADDR:
    case NLE_NODEV:
      return absl::NotFoundError(msg);
    case NLE_PERM:
      return absl::PermissionDeniedError(msg);
    default:
      return absl::UnavailableError(msg);
  }
}

struct AddrDeleter {
  void operator()(nl_addr* a) const { nl_addr_put(a); }
};
using AddrPtr = std::unique_ptr<nl_addr, AddrDeleter>;

AddrPtr Build(int family, const in6_addr& addr, int prefix_len) {
  AddrPtr a(nl_addr_build(family, &addr, AddressBytes(family)));
  if (a) nl_addr_set_prefixlen(a.get(), prefix_len);
  return a;
}

bool Read(nl_addr* a, int family, in6_addr* out) {
  if (a == nullptr || nl_addr_get_len(a) != AddressBytes(family)) return false;
  std::memcpy(out, nl_addr_get_binary_addr(a), AddressBytes(family));
  return true;
}

std::string SysctlPath(const std::string& ifname, const std::string& key) {
  return absl::StrCat("/proc/sys/net/ipv4/conf/", ifname, "/", key);
}

absl::Status SysctlError(int err, const std::string& path, const char* verb) {
  std::string msg = absl::StrCat(verb, " ", path, ": ", ErrnoText(err));
  if (err == ENOENT) return absl::NotFoundError(absl::StrCat(msg, " (interface gone?)"));
  if (err == EACCES || err == EROFS || err == EPERM) {
    return absl::PermissionDeniedError(absl::StrCat(msg, " (/proc/sys/net is not writable)"));
  }
  return absl::InternalError(msg);
}

}  // namespace

struct RoutingOsImpl::State {
  NlSockPtr sk;
};

RoutingOsImpl::RoutingOsImpl(std::unique_ptr<State> s) : s_(std::move(s)) {}
RoutingOsImpl::~RoutingOsImpl() = default;

absl::StatusOr<std::unique_ptr<RoutingOsImpl>> RoutingOsImpl::Open() {
  auto sk = ConnectRoute();
  if (!sk.ok()) return sk.status();
  auto st = std::make_unique<State>();
  st->sk = std::move(*sk);
  return std::unique_ptr<RoutingOsImpl>(new RoutingOsImpl(std::move(st)));
}

absl::StatusOr<std::vector<RuleEntry>> RoutingOsImpl::Rules() {
  nl_cache* raw = nullptr;
  if (int err = rtnl_rule_alloc_cache(s_->sk.get(), AF_UNSPEC, &raw); err < 0) {
    return NlError(err, "rule dump");
  }
  NlCachePtr cache(raw);
  std::vector<RuleEntry> out;
  for (nl_object* o = nl_cache_get_first(raw); o != nullptr; o = nl_cache_get_next(o)) {
    auto* r = reinterpret_cast<rtnl_rule*>(o);
    RuleEntry e;
    e.family = rtnl_rule_get_family(r);
    if (e.family != AF_INET && e.family != AF_INET6) continue;
    e.table = rtnl_rule_get_table(r);
    e.priority = rtnl_rule_get_prio(r);
    uint8_t proto = 0;
    if (rtnl_rule_get_protocol(r, &proto) == 0) e.protocol = proto;
    if (nl_addr* src = rtnl_rule_get_src(r); Read(src, e.family, &e.src)) {
      e.src_len = static_cast<int>(nl_addr_get_prefixlen(src));
    }
    out.push_back(e);
  }
  return out;
}

absl::StatusOr<std::vector<RouteEntry>> RoutingOsImpl::Routes() {
  nl_cache* raw = nullptr;
  if (int err = rtnl_route_alloc_cache(s_->sk.get(), AF_UNSPEC, 0, &raw); err < 0) {
    return NlError(err, "route dump");
  }
  NlCachePtr cache(raw);
  std::vector<RouteEntry> out;
  for (nl_object* o = nl_cache_get_first(raw); o != nullptr; o = nl_cache_get_next(o)) {
    auto* r = reinterpret_cast<rtnl_route*>(o);
    RouteEntry e;
    e.route.family = rtnl_route_get_family(r);
    if (e.route.family != AF_INET && e.route.family != AF_INET6) continue;
    e.table = rtnl_route_get_table(r);
    e.protocol = rtnl_route_get_protocol(r);
    nl_addr* dst = rtnl_route_get_dst(r);
    if (Read(dst, e.route.family, &e.route.dst)) {
      e.route.dst_len = static_cast<int>(nl_addr_get_prefixlen(dst));
    }
    e.has_src = Read(rtnl_route_get_pref_src(r), e.route.family, &e.src);
    if (rtnl_route_get_nnexthops(r) > 0) {
      rtnl_nexthop* nh = rtnl_route_nexthop_n(r, 0);
      e.oif = rtnl_route_nh_get_ifindex(nh);
      e.route.has_gateway = Read(rtnl_route_nh_get_gateway(nh), e.route.family, &e.route.gateway);
    }
    out.push_back(e);
  }
  return out;
}

absl::StatusOr<std::vector<IfAddress>> RoutingOsImpl::Addresses() {
  nl_cache* raw = nullptr;
  if (int err = rtnl_addr_alloc_cache(s_->sk.get(), &raw); err < 0) {
    return NlError(err, "address dump");
  }
  NlCachePtr cache(raw);
  std::vector<IfAddress> out;
  for (nl_object* o = nl_cache_get_first(raw); o != nullptr; o = nl_cache_get_next(o)) {
    auto* a = reinterpret_cast<rtnl_addr*>(o);
    IfAddress e;
    e.ifindex = rtnl_addr_get_ifindex(a);
    e.address.family = rtnl_addr_get_family(a);
    if (e.address.family != AF_INET && e.address.family != AF_INET6) continue;
    if (!Read(rtnl_addr_get_local(a), e.address.family, &e.address.addr)) continue;
    e.address.prefix_len = rtnl_addr_get_prefixlen(a);
    out.push_back(e);
  }
  return out;
}

namespace {

struct RuleDeleter {
  void operator()(rtnl_rule* r) const { rtnl_rule_put(r); }
};
struct RouteDeleter {
  void operator()(rtnl_route* r) const { rtnl_route_put(r); }
};

std::unique_ptr<rtnl_rule, RuleDeleter> MakeRule(const RuleEntry& e) {
  std::unique_ptr<rtnl_rule, RuleDeleter> r(rtnl_rule_alloc());
  if (!r) return r;
  rtnl_rule_set_family(r.get(), e.family);
  rtnl_rule_set_table(r.get(), e.table);
  rtnl_rule_set_prio(r.get(), e.priority);
  rtnl_rule_set_action(r.get(), FR_ACT_TO_TBL);
  rtnl_rule_set_protocol(r.get(), e.protocol);
  if (e.src_len > 0) {
    AddrPtr src = Build(e.family, e.src, e.src_len);
    if (src) rtnl_rule_set_src(r.get(), src.get());
  }
  return r;
}

std::unique_ptr<rtnl_route, RouteDeleter> MakeRoute(const RouteEntry& e, bool for_add) {
  std::unique_ptr<rtnl_route, RouteDeleter> r(rtnl_route_alloc());
  if (!r) return r;
  rtnl_route_set_family(r.get(), static_cast<uint8_t>(e.route.family));
  rtnl_route_set_table(r.get(), e.table);
  rtnl_route_set_protocol(r.get(), e.protocol);
  rtnl_route_set_type(r.get(), RTN_UNICAST);
  AddrPtr dst = Build(e.route.family, e.route.dst, e.route.dst_len);
  if (dst) rtnl_route_set_dst(r.get(), dst.get());
  if (for_add) {
    rtnl_route_set_scope(r.get(), e.route.family == AF_INET && !e.route.has_gateway
                                      ? RT_SCOPE_LINK
                                      : RT_SCOPE_UNIVERSE);
    if (e.has_src) {
      AddrPtr src =
          Build(e.route.family, e.src, static_cast<int>(AddressBytes(e.route.family)) * 8);
      if (src) rtnl_route_set_pref_src(r.get(), src.get());
    }
  }
  rtnl_nexthop* nh = rtnl_route_nh_alloc();
  if (nh != nullptr) {
    rtnl_route_nh_set_ifindex(nh, e.oif);
    if (e.route.has_gateway) {
      AddrPtr gw = Build(e.route.family, e.route.gateway,
                         static_cast<int>(AddressBytes(e.route.family)) * 8);
      if (gw) rtnl_route_nh_set_gateway(nh, gw.get());
    }
    rtnl_route_add_nexthop(r.get(), nh);  // owned by the route from here
  }
  return r;
}

}  // namespace

absl::Status RoutingOsImpl::AddRule(const RuleEntry& e) {
  auto r = MakeRule(e);
  if (!r) return absl::ResourceExhaustedError("rtnl_rule_alloc failed");
  if (int err = rtnl_rule_add(s_->sk.get(), r.get(), NLM_F_CREATE | NLM_F_EXCL); err < 0) {
    return NlError(err, "add rule");
  }
  return absl::OkStatus();
}

absl::Status RoutingOsImpl::DeleteRule(const RuleEntry& e) {
  auto r = MakeRule(e);
  if (!r) return absl::ResourceExhaustedError("rtnl_rule_alloc failed");
  if (int err = rtnl_rule_delete(s_->sk.get(), r.get(), 0); err < 0) {
    return NlError(err, "delete rule");
  }
  return absl::OkStatus();
}

absl::Status RoutingOsImpl::AddRoute(const RouteEntry& e) {
  auto r = MakeRoute(e, true);
  if (!r) return absl::ResourceExhaustedError("rtnl_route_alloc failed");
  if (int err = rtnl_route_add(s_->sk.get(), r.get(), NLM_F_CREATE | NLM_F_EXCL); err < 0) {
    return NlError(err, "add route");
  }
  return absl::OkStatus();
}

absl::Status RoutingOsImpl::DeleteRoute(const RouteEntry& e) {
  auto r = MakeRoute(e, false);
  if (!r) return absl::ResourceExhaustedError("rtnl_route_alloc failed");
  if (int err = rtnl_route_delete(s_->sk.get(), r.get(), 0); err < 0) {
    return NlError(err, "delete route");
  }
  return absl::OkStatus();
}

absl::StatusOr<int> RoutingOsImpl::IfIndex(const std::string& ifname) {
  const unsigned i = if_nametoindex(ifname.c_str());
  if (i == 0) return absl::NotFoundError(absl::StrCat("no interface ", ifname));
  return static_cast<int>(i);
}

absl::StatusOr<std::string> RoutingOsImpl::IfName(int ifindex) {
  char name[IF_NAMESIZE] = {};
  if (if_indextoname(static_cast<unsigned>(ifindex), name) == nullptr) {
    return absl::NotFoundError(absl::StrCat("no interface with ifindex ", ifindex));
  }
  return std::string(name);
}

absl::StatusOr<std::string> RoutingOsImpl::ReadSysctl(const std::string& ifname,
                                                      const std::string& key) {
  const std::string path = SysctlPath(ifname, key);
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return SysctlError(errno, path, "read");
  char buf[64];
  ssize_t n;
  do {
    n = read(fd.get(), buf, sizeof(buf) - 1);
  } while (n < 0 && errno == EINTR);
  const int err = errno;
  fd.reset();
  if (n < 0) return SysctlError(err, path, "read");
  return std::string(absl::StripAsciiWhitespace(absl::string_view(buf, static_cast<size_t>(n))));
}

absl::Status RoutingOsImpl::WriteSysctl(const std::string& ifname, const std::string& key,
                                        const std::string& value) {
  const std::string path = SysctlPath(ifname, key);
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd.valid()) return SysctlError(errno, path, "write");
  ssize_t n;
  do {
    n = write(fd.get(), value.data(), value.size());
  } while (n < 0 && errno == EINTR);
  const int err = errno;
  fd.reset();
  if (n != static_cast<ssize_t>(value.size())) return SysctlError(n < 0 ? err : EIO, path, "write");
  return absl::OkStatus();
}

}  // namespace fabric::announce
