// fabricctl announce: gratuitous ARP / unsolicited NA sent from here (the agent's announce
// library), or asked of the agent for a pod fabric-cni handed to it.
#include <arpa/inet.h>
#include <google/protobuf/util/json_util.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "agent/fabric/announce/announce.h"
#include "agent/fabric/announce/link.h"
#include "agent/fabric/announce/to_proto.h"
#include "agent/fabric/announce/validate.h"
#include "agent/fabric/probes/report.h"
#include "agent/fabric/probes/schedule.h"
#include "agent/fabricctl/client.h"
#include "agent/fabricctl/ctl.h"
#include "agent/fabricctl/render.h"
#include "agent/inventory/discovery/discovery.h"
#include "agent/inventory/discovery/parse.h"
#include "agent/inventory/hostfs/host_fs.h"
#include "agent/policy/health/health.h"
#include "agent/policy/select/config.h"
#include "agent/policy/select/env.h"
#include "agent/policy/select/select.h"

namespace fabric::ctl {

int RunAnnounceLocal(const Options& opt) {
  if (absl::Status s = announce::CheckIfname(opt.ifname, "--ifname"); !s.ok()) {
    return Fail(kUsage, std::string(s.message()));
  }
  std::unique_ptr<announce::ScopedNetns> in_netns;
  if (!opt.netns.empty()) {
    auto entered = announce::ScopedNetns::Enter(opt.netns);
    if (!entered.ok()) {
      return Fail(entered.status().code() == absl::StatusCode::kNotFound ? kFailed : kUnreadable,
                  std::string(entered.status().message()));
    }
    in_netns = *std::move(entered);
  }
  auto target = announce::DescribeInterface(opt.ifname);
  if (!target.ok()) return Fail(kFailed, std::string(target.status().message()));
  // The agent's rules (agent/fabric/announce/validate.h): only the interface's own addresses.
  auto chosen = announce::ChooseOwnAddresses(*target, opt.ips);
  if (!chosen.ok()) {
    return Fail(absl::IsFailedPrecondition(chosen.status()) ? kFailed : kUsage,
                std::string(chosen.status().message()));
  }
  target->addresses = *std::move(chosen);
  for (const std::string& gw : opt.gateways) {
    int family = gw.find(':') == std::string::npos ? AF_INET : AF_INET6;
    in6_addr addr{};
    if (inet_pton(family, gw.c_str(), &addr) != 1) {
      return Fail(kUsage, absl::StrCat("--gateway=", gw, ": not an IP address"));
    }
    for (announce::Address& a : target->addresses) {
      if (a.family == family) {
        a.has_gateway = true;
        a.gateway = addr;
      }
    }
  }
  announce::Plan plan;
  if (!opt.repeat) {
    plan.schedule.fast_count = 0;
    plan.schedule.tail.clear();
  }
  plan.arp_reply_form = opt.arp_reply;
  plan.ipv6 = !opt.no_ipv6;
  plan.prime_gateway = !opt.gateways.empty();
  plan.conflict_probe = opt.conflict_probe;
  auto link = announce::PacketLink::Open(target->ifindex);
  if (!link.ok()) {
    return Fail(link.status().code() == absl::StatusCode::kPermissionDenied ? kUnreadable : kFailed,
                absl::StrCat(link.status().message(),
                             link.status().code() == absl::StatusCode::kPermissionDenied
                                 ? " (needs CAP_NET_RAW)"
                                 : ""));
  }
  if (absl::Status s = announce::CheckAnnounceable(**link, *target, plan.ipv6, !opt.ips.empty());
      !s.ok()) {
    return Fail(absl::IsPermissionDenied(s) ? kUsage : kFailed, std::string(s.message()));
  }
  in_netns.reset();  // The socket stays bound to the pod's interface.
  announce::Job job(*target, plan, *std::move(link), announce::MonotonicNow());
  announce::Report report = announce::RunToCompletion(job);
  v1::Announcement a = announce::ToAnnouncement(*target, &report);
  a.set_netns(opt.netns);
  if (opt.json) {
    Print(ToJson(a));
  } else {
    Print(RenderAnnouncements({a}));
  }
  bool failed = report.arp_sent + report.na_sent == 0 || !report.conflicts.empty();
  return failed ? kFailed : kOk;
}

// Re-announce a pod the agent holds (or an interface of the agent's netns), through the agent.
int RunAnnounceRemote(const Options& opt) {
  auto client = Client(opt);
  if (!client.ok()) return Fail(kUsage, std::string(client.status().message()));
  v1::AnnounceRequest req;
  req.set_container_id(opt.container);
  req.set_ifname(opt.ifname);
  for (const std::string& ip : opt.ips) req.add_ips(ip);
  auto resp = (*client)->Announce(req);
  if (!resp.ok()) return Fail(AgentCode(resp.status()), std::string(resp.status().message()));
  if (opt.json) {
    Print(ToJson(*resp));
  } else {
    Print(RenderAnnouncements({resp->announcements().begin(), resp->announcements().end()}));
  }
  return kOk;
}

}  // namespace fabric::ctl
