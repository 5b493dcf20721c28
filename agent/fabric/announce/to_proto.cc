#include "agent/fabric/announce/to_proto.h"

#include <cstdio>

#include "absl/strings/str_cat.h"

namespace fabric::announce {

v1::Announcement ToAnnouncement(const Target& target, const Report* report) {
  v1::Announcement a;
  a.set_ifname(target.ifname);
  a.set_mac(MacString(target.mac));
  for (const Address& addr : target.addresses) {
    a.add_addresses(absl::StrCat(IpToString(addr.family, addr.addr), "/", addr.prefix_len));
  }
  if (report == nullptr) return a;
  a.set_arp_sent(static_cast<uint32_t>(report->arp_sent));
  a.set_na_sent(static_cast<uint32_t>(report->na_sent));
  a.set_send_errors(static_cast<uint32_t>(report->send_errors));
  a.set_last_error(report->last_error);
  for (const Report::Gateway& g : report->gateways) {
    v1::GatewayReachability* out = a.add_gateways();
    out->set_gateway(g.address);
    out->set_reachable(g.reachable);
    if (g.reachable) {
      out->set_rtt_ms(absl::ToDoubleMilliseconds(g.rtt));
      out->set_mac(MacString(g.mac));
    }
  }
  for (const Report::Conflict& c : report->conflicts) {
    v1::AddressConflict* out = a.add_conflicts();
    out->set_address(c.address);
    out->set_owner_mac(MacString(c.owner));
  }
  return a;
}

}  // namespace fabric::announce
