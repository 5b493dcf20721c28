// fabricctl announce: gratuitous ARP / unsolicited NA for an interface's addresses, sent from
// here (the agent's announce library, in --netns if given), or asked of the agent (--via-agent,
// --container) for a pod fabric-cni handed to it.
#include <arpa/inet.h>

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "agent/common/ip.h"
#include "agent/common/output.h"
#include "agent/fabric/announce/announce.h"
#include "agent/fabric/announce/link.h"
#include "agent/fabric/announce/to_proto.h"
#include "agent/fabric/announce/validate.h"
#include "agent/fabricctl/client.h"
#include "agent/fabricctl/ctl.h"
#include "agent/fabricctl/render.h"

namespace fabric::ctl {
namespace {

struct AnnounceOptions {
  std::string ifname;
  std::vector<std::string> ips;
  std::string container;
  bool via_agent = false;
  // Local announcements only.
  std::string netns;
  std::vector<std::string> gateways;
  bool repeat = false;
  bool arp_reply = false;
  bool no_ipv6 = false;
  bool conflict_probe = false;
};

// The target interface's addresses (--ip: a subset) with their gateways (--gateway).
absl::Status ChooseAddresses(const AnnounceOptions& opt, announce::Target* target) {
  // The agent's rules (agent/fabric/announce/validate.h): only the interface's own addresses.
  auto chosen = announce::ChooseOwnAddresses(*target, opt.ips);
  if (!chosen.ok()) {
    return absl::IsFailedPrecondition(chosen.status()) ? FailedError(chosen.status())
                                                       : UsageError(chosen.status());
  }
  target->addresses = *std::move(chosen);
  for (const std::string& gw : opt.gateways) {
    absl::StatusOr<IpAddress> ip = ParseIp(gw);
    if (!ip.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--gateway=", gw, ": not an IP address"));
    }
    for (announce::Address& a : target->addresses) {
      if (a.family == ip->family) {
        a.has_gateway = true;
        a.gateway = ip->addr;
      }
    }
  }
  return absl::OkStatus();
}

// Sends from here: needs CAP_NET_RAW (and CAP_SYS_ADMIN for --netns).
Outcome RunLocal(const CommonOptions& common, const AnnounceOptions& opt) {
  if (absl::Status s = announce::CheckIfname(opt.ifname, "--ifname"); !s.ok()) {
    return UsageError(s);
  }
  std::unique_ptr<announce::ScopedNetns> in_netns;
  if (!opt.netns.empty()) {
    auto entered = announce::ScopedNetns::Enter(opt.netns);
    if (!entered.ok()) {
      return absl::IsNotFound(entered.status()) ? FailedError(entered.status())
                                                : UnreadableError(entered.status());
    }
    in_netns = *std::move(entered);
  }
  auto target = announce::DescribeInterface(opt.ifname);
  if (!target.ok()) return FailedError(target.status());
  if (absl::Status s = ChooseAddresses(opt, &*target); !s.ok()) return s;
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
    if (absl::IsPermissionDenied(link.status())) {
      return UnreadableError(absl::PermissionDeniedError(
          absl::StrCat(link.status().message(), " (needs CAP_NET_RAW)")));
    }
    return FailedError(link.status());
  }
  if (absl::Status s = announce::CheckAnnounceable(**link, *target, plan.ipv6, !opt.ips.empty());
      !s.ok()) {
    return absl::IsPermissionDenied(s) ? UsageError(s) : FailedError(s);
  }
  in_netns.reset();  // The socket stays bound to the pod's interface.
  announce::Job job(*target, plan, *std::move(link), announce::MonotonicNow());
  announce::Report report = announce::RunToCompletion(job);
  v1::Announcement a = announce::ToAnnouncement(*target, &report);
  a.set_netns(opt.netns);
  if (common.json) {
    Write(ToJson(a));
  } else {
    Write(RenderAnnouncements({a}));
  }
  if (report.arp_sent + report.na_sent == 0 || !report.conflicts.empty()) {
    // The printed announcement says what went wrong.
    Outcome o(absl::FailedPreconditionError("nothing announced, or an address conflict"));
    o.reported = true;
    return o;
  }
  return {};
}

// Re-announce a pod the agent holds (or an interface of the agent's netns), through the agent.
Outcome RunRemote(const CommonOptions& common, const AnnounceOptions& opt) {
  auto client = Connect(common);
  if (!client.ok()) return client.status();
  v1::AnnounceRequest req;
  req.set_container_id(opt.container);
  req.set_ifname(opt.ifname);
  for (const std::string& ip : opt.ips) req.add_ips(ip);
  auto resp = (*client)->Announce(req);
  if (!resp.ok()) return resp.status();
  if (common.json) {
    Write(ToJson(*resp));
  } else {
    Write(RenderAnnouncements({resp->announcements().begin(), resp->announcements().end()}));
  }
  return {};
}

Outcome RunAnnounce(const CommonOptions& common, const AnnounceOptions& opt) {
  if (!opt.container.empty() || opt.via_agent) {
    if (!opt.netns.empty() || !opt.gateways.empty() || opt.repeat || opt.arp_reply || opt.no_ipv6 ||
        opt.conflict_probe) {
      return absl::InvalidArgumentError(
          "--netns, --gateway, --repeat, --arp-reply, --no-ipv6 and --conflict-probe are for "
          "local announcements; the agent uses its own plan");
    }
    if (opt.container.empty() && opt.ifname.empty()) {
      return absl::InvalidArgumentError("--via-agent needs --container or --ifname");
    }
    return RunRemote(common, opt);
  }
  if (opt.ifname.empty()) {
    return absl::InvalidArgumentError("announce needs --ifname (or --container)");
  }
  return RunLocal(common, opt);
}

}  // namespace

Command AddAnnounce(CLI::App& app, CommonOptions& common) {
  CLI::App* cmd = app.add_subcommand(
      "announce",
      "gratuitous ARP / unsolicited NA for an interface's addresses now (here, or --via-agent "
      "for a pod fabric-cni handed to the agent)");
  auto opt = std::make_shared<AnnounceOptions>();
  AddJsonFlag(cmd, &common);
  AddAgentFlags(cmd, &common,
                "fabric-agent to ask with --via-agent or --container: unix:///PATH, /PATH or "
                "HOST:PORT (default $FABRICCTL_TARGET)");
  cmd->add_option("--ifname", opt->ifname, "the interface to announce");
  cmd->add_option("--netns", opt->netns,
                  "network namespace of the interface: /var/run/netns/NAME, "
                  "/proc/PID/ns/net, a CNI_NETNS path");
  cmd->add_option("--ip", opt->ips,
                  "address to announce (repeatable); default: every global address of "
                  "the interface");
  cmd->add_option("--gateway", opt->gateways,
                  "prime this gateway (ARP request / NS) and report whether it answers");
  cmd->add_flag("--repeat", opt->repeat,
                "follow the default schedule (now, 3 x 100 ms, 1 s, 5 s) instead of "
                "one round");
  cmd->add_flag("--arp-reply", opt->arp_reply, "also send the ARP reply form");
  cmd->add_flag("--no-ipv6", opt->no_ipv6, "skip IPv6 addresses");
  cmd->add_flag("--conflict-probe", opt->conflict_probe,
                "RFC 5227 probe first; an address someone else answers for is not "
                "announced (exit 1)");
  cmd->add_option("--container", opt->container,
                  "re-announce a pod fabric-cni handed to the agent (asks the agent)");
  cmd->add_flag("--via-agent", opt->via_agent,
                "ask the agent to announce (--container, or --ifname of the agent's "
                "own network namespace)");
  return {cmd, [&common, opt] { return RunAnnounce(common, *opt); }};
}

}  // namespace fabric::ctl
