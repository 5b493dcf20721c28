#include "agent/fabric/announce/pod_routing.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "agent/common/ip.h"
#include "agent/common/log.h"
#include "agent/common/status.h"

namespace fabric::announce {

size_t AddressBytes(int family) { return family == AF_INET ? 4 : 16; }

namespace {

bool SameIp(int family, const in6_addr& a, const in6_addr& b) {
  return std::memcmp(&a, &b, AddressBytes(family)) == 0;
}

// `addr` with the bits past `prefix_len` cleared.
in6_addr Masked(int family, const in6_addr& addr, int prefix_len) {
  in6_addr out{};
  auto* o = reinterpret_cast<uint8_t*>(&out);
  const auto* in = reinterpret_cast<const uint8_t*>(&addr);
  const int bits = static_cast<int>(AddressBytes(family)) * 8;
  for (int i = 0; i < bits && i < prefix_len; ++i) {
    if (in[i / 8] & (0x80 >> (i % 8))) o[i / 8] |= static_cast<uint8_t>(0x80 >> (i % 8));
  }
  return out;
}

bool SameRoute(const Route& a, const Route& b) {
  return a.family == b.family && a.dst_len == b.dst_len && SameIp(a.family, a.dst, b.dst) &&
         a.has_gateway == b.has_gateway &&
         (!a.has_gateway || SameIp(a.family, a.gateway, b.gateway));
}

bool InRange(const RoutingConfig& c, uint32_t table) {
  return table >= c.table_first && table <= c.table_last;
}

std::string RuleText(const RuleEntry& r) {
  return absl::StrCat("from ", IpToString(r.family, r.src), "/", r.src_len, " lookup ", r.table);
}

std::string RouteText(const RouteEntry& r) {
  std::string s = absl::StrCat(IpToString(r.route.family, r.route.dst), "/", r.route.dst_len);
  if (r.route.has_gateway)
    absl::StrAppend(&s, " via ", IpToString(r.route.family, r.route.gateway));
  return absl::StrCat(s, " table ", r.table);
}

// Our rules for `table` and `src`.
bool HasRule(const std::vector<RuleEntry>& rules, uint32_t table, const Address& a) {
  return std::any_of(rules.begin(), rules.end(), [&](const RuleEntry& r) {
    return r.protocol == kRoutingProtocol && r.table == table && r.family == a.family &&
           r.src_len == static_cast<int>(AddressBytes(a.family)) * 8 &&
           SameIp(a.family, r.src, a.addr);
  });
}

}  // namespace

uint32_t PreferredTable(std::string_view ifname, uint32_t first, uint32_t last) {
  uint32_t h = 2166136261u;  // FNV-1a, 32 bit
  for (char ch : ifname) {
    h ^= static_cast<uint8_t>(ch);
    h *= 16777619u;
  }
  const uint64_t size = static_cast<uint64_t>(last) - first + 1;
  return first + static_cast<uint32_t>(h % size);
}

absl::StatusOr<uint32_t> PickTable(std::string_view ifname, uint32_t first, uint32_t last,
                                   const std::set<uint32_t>& taken) {
  const uint64_t size = static_cast<uint64_t>(last) - first + 1;
  const uint32_t start = PreferredTable(ifname, first, last);
  for (uint64_t i = 0; i < size; ++i) {
    const uint32_t t = first + static_cast<uint32_t>((start - first + i) % size);
    if (taken.count(t) == 0) return t;
  }
  return absl::ResourceExhaustedError(absl::StrCat("every routing table of ", first, "-", last,
                                                   " is taken (podRouting.tableRange)"));
}

bool Routable(const Address& a) {
  const auto* b = reinterpret_cast<const uint8_t*>(&a.addr);
  if (a.family == AF_INET) {
    if (b[0] == 169 && b[1] == 254) return false;
    return !(b[0] == 0 && b[1] == 0 && b[2] == 0 && b[3] == 0);
  }
  if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) return false;
  static const in6_addr kZero{};
  return std::memcmp(&a.addr, &kZero, 16) != 0;
}

std::vector<Route> TableRoutes(const std::vector<Address>& addresses,
                               const std::vector<Route>& extra) {
  std::vector<Route> out;
  auto add = [&out](const Route& r) {
    for (const Route& have : out) {
      if (SameRoute(have, r)) return;
    }
    out.push_back(r);
  };
  const Address* gw[2] = {nullptr, nullptr};  // IPv4, IPv6
  for (const Address& a : addresses) {
    if (!Routable(a)) continue;
    Route r;
    r.family = a.family;
    r.dst_len = a.prefix_len;
    r.dst = Masked(a.family, a.addr, a.prefix_len);
    add(r);
    const int i = a.family == AF_INET ? 0 : 1;
    if (a.has_gateway && gw[i] == nullptr) gw[i] = &a;
  }
  for (const Address* g : gw) {
    if (g == nullptr) continue;
    Route r;
    r.family = g->family;
    r.has_gateway = true;
    r.gateway = g->gateway;
    add(r);
  }
  for (Route r : extra) {
    const Address* g = gw[r.family == AF_INET ? 0 : 1];
    if (!r.has_gateway) {
      if (g == nullptr) continue;
      r.has_gateway = true;
      r.gateway = g->gateway;
    }
    r.dst = Masked(r.family, r.dst, r.dst_len);
    add(r);
  }
  return out;
}

bool SameSubnet(const Address& a, const Address& b) {
  if (a.family != b.family) return false;
  const int len = std::min(a.prefix_len, b.prefix_len);
  const in6_addr ma = Masked(a.family, a.addr, len), mb = Masked(b.family, b.addr, len);
  return SameIp(a.family, ma, mb);
}

absl::Status SetArpSysctls(RoutingOs& os, const std::string& ifname, Undo* undo) {
  static const std::pair<const char*, const char*> kWanted[] = {
      {"arp_ignore", "1"}, {"arp_announce", "2"}, {"rp_filter", "2"}};
  for (const auto& [key, value] : kWanted) {
    auto old = os.ReadSysctl(ifname, key);
    if (!old.ok()) return old.status();
    if (*old == value) continue;
    FABRIC_RETURN_IF_ERROR(os.WriteSysctl(ifname, key, value));
    undo->sysctls.push_back({ifname, key, *old});
  }
  return absl::OkStatus();
}

absl::Status Revert(RoutingOs& os, const Undo& undo) {
  absl::Status first;
  auto note = [&first](absl::Status s) {
    if (!s.ok() && s.code() != absl::StatusCode::kNotFound && first.ok()) first = s;
  };
  for (auto it = undo.rules.rbegin(); it != undo.rules.rend(); ++it) note(os.DeleteRule(*it));
  for (auto it = undo.routes.rbegin(); it != undo.routes.rend(); ++it) note(os.DeleteRoute(*it));
  for (auto it = undo.sysctls.rbegin(); it != undo.sysctls.rend(); ++it) {
    note(os.WriteSysctl(it->ifname, it->key, it->old_value));
  }
  return first;
}

absl::StatusOr<uint32_t> ApplySourceRouting(RoutingOs& os, const RoutingConfig& config,
                                            const PodIface& iface, Undo* undo) {
  std::vector<Address> routable;
  for (const Address& a : iface.addresses) {
    if (Routable(a)) routable.push_back(a);
  }
  if (routable.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        iface.ifname, " has no routable address (none, or link-local only): no source routing"));
  }
  auto ifindex = os.IfIndex(iface.ifname);
  if (!ifindex.ok()) return ifindex.status();
  auto rules = os.Rules();
  if (!rules.ok()) return rules.status();
  auto routes = os.Routes();
  if (!routes.ok()) return routes.status();
  // Tables in use: by anyone else's rule or route, or by our routes of another interface.
  std::set<uint32_t> taken;
  std::optional<uint32_t> mine;
  for (const RuleEntry& r : *rules) {
    if (r.protocol != kRoutingProtocol) taken.insert(r.table);
  }
  for (const RouteEntry& r : *routes) {
    if (r.protocol != kRoutingProtocol || r.oif != *ifindex) {
      taken.insert(r.table);
    } else if (InRange(config, r.table) && !mine) {
      mine = r.table;
    }
  }
  if (mine && taken.count(*mine) > 0) mine.reset();
  uint32_t table = 0;
  if (mine) {
    table = *mine;
  } else {
    auto t = PickTable(iface.ifname, config.table_first, config.table_last, taken);
    if (!t.ok()) return t.status();
    table = *t;
  }
  Undo local;
  absl::Status s;
  for (const Route& r : TableRoutes(routable, iface.routes)) {
    RouteEntry e;
    e.route = r;
    e.oif = *ifindex;
    e.table = table;
    e.protocol = kRoutingProtocol;
    if (r.family == AF_INET && !r.has_gateway) {
      for (const Address& a : routable) {  // the preferred source of a connected route
        if (a.family == AF_INET && a.prefix_len == r.dst_len &&
            SameIp(AF_INET, Masked(AF_INET, a.addr, a.prefix_len), r.dst)) {
          e.has_src = true;
          e.src = a.addr;
          break;
        }
      }
    }
    s = os.AddRoute(e);
    if (s.code() == absl::StatusCode::kAlreadyExists) {
      s = absl::OkStatus();
      continue;
    }
    if (!s.ok()) {
      s = absl::Status(
          s.code(), absl::StrCat("route ", RouteText(e), " on ", iface.ifname, ": ", s.message()));
      break;
    }
    local.routes.push_back(e);
  }
  for (const Address& a : routable) {
    if (!s.ok() || HasRule(*rules, table, a)) continue;
    RuleEntry r;
    r.family = a.family;
    r.src = a.addr;
    r.src_len = static_cast<int>(AddressBytes(a.family)) * 8;
    r.table = table;
    r.priority = config.rule_priority;
    r.protocol = kRoutingProtocol;
    s = os.AddRule(r);
    if (s.code() == absl::StatusCode::kAlreadyExists) {
      s = absl::OkStatus();
      continue;
    }
    if (!s.ok()) {
      s = absl::Status(s.code(), absl::StrCat("rule ", RuleText(r), ": ", s.message()));
      break;
    }
    local.rules.push_back(r);
  }
  if (!s.ok()) {
    if (absl::Status r = Revert(os, local); !r.ok()) {
      Log(LogLevel::kWarning, "pod routing: rollback on ", iface.ifname, ": ", r.message());
    }
    return s;
  }
  undo->routes.insert(undo->routes.end(), local.routes.begin(), local.routes.end());
  undo->rules.insert(undo->rules.end(), local.rules.begin(), local.rules.end());
  return table;
}

absl::StatusOr<int> RemoveSourceRouting(RoutingOs& os, const RoutingConfig& config,
                                        std::set<uint32_t> tables,
                                        const std::vector<std::string>& ifnames) {
  auto routes = os.Routes();
  if (!routes.ok()) return routes.status();
  std::set<int> oifs;
  for (const std::string& n : ifnames) {
    if (auto i = os.IfIndex(n); i.ok()) oifs.insert(*i);
  }
  for (const RouteEntry& r : *routes) {
    if (r.protocol == kRoutingProtocol && InRange(config, r.table) && oifs.count(r.oif) > 0) {
      tables.insert(r.table);
    }
  }
  auto rules = os.Rules();
  if (!rules.ok()) return rules.status();
  int removed = 0;
  for (const RuleEntry& r : *rules) {
    if (r.protocol != kRoutingProtocol || tables.count(r.table) == 0) continue;
    absl::Status s = os.DeleteRule(r);
    if (!s.ok() && s.code() != absl::StatusCode::kNotFound) return s;
    removed += s.ok();
  }
  for (const RouteEntry& r : *routes) {
    if (r.protocol != kRoutingProtocol || tables.count(r.table) == 0) continue;
    absl::Status s = os.DeleteRoute(r);
    if (!s.ok() && s.code() != absl::StatusCode::kNotFound) return s;
    removed += s.ok();
  }
  return removed;
}

absl::Status VerifySourceRouting(RoutingOs& os, const RoutingConfig& config, const PodIface& iface,
                                 uint32_t table) {
  (void)config;
  auto ifindex = os.IfIndex(iface.ifname);
  if (!ifindex.ok()) return ifindex.status();
  auto routes = os.Routes();
  if (!routes.ok()) return routes.status();
  const bool has_table = std::any_of(routes->begin(), routes->end(), [&](const RouteEntry& r) {
    return r.protocol == kRoutingProtocol && r.table == table && r.oif == *ifindex;
  });
  if (!has_table) {
    return absl::NotFoundError(absl::StrCat("table ", table, " of ", iface.ifname, " is gone"));
  }
  auto rules = os.Rules();
  if (!rules.ok()) return rules.status();
  for (const Address& a : iface.addresses) {
    if (Routable(a) && !HasRule(*rules, table, a)) {
      return absl::NotFoundError(absl::StrCat("rule from ", IpToString(a.family, a.addr),
                                              " lookup ", table, " is missing"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> SameSubnetSiblings(RoutingOs& os,
                                                            const std::string& ifname,
                                                            const std::vector<Address>& addresses) {
  auto self = os.IfIndex(ifname);
  if (!self.ok()) return self.status();
  auto all = os.Addresses();
  if (!all.ok()) return all.status();
  std::set<int> seen;
  std::vector<std::string> out;
  for (const IfAddress& other : *all) {
    if (other.ifindex == *self || seen.count(other.ifindex) > 0 || !Routable(other.address)) {
      continue;
    }
    for (const Address& a : addresses) {
      if (!Routable(a) || !SameSubnet(a, other.address)) continue;
      auto name = os.IfName(other.ifindex);
      if (name.ok()) out.push_back(*name);
      seen.insert(other.ifindex);
      break;
    }
  }
  return out;
}

}  // namespace fabric::announce
