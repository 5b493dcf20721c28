#include "cni-hook/docs.h"

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/common/version.h"
#include "agent/fabric/announce/handoff.h"
#include "cni-hook/cni.h"
#include "cni-hook/routing.h"

namespace fabric::cni {
namespace {

// As cni-hook/README.md's table; ParseConfig (cni.cc) is what reads them.
constexpr ConfigKey kConfigKeys[] = {
    {"announce.count", "3", "fast repeats after the first announcement (0-100)"},
    {"announce.intervalMs", "100", "milliseconds between the fast repeats"},
    {"announce.tailMs", "[1000, 5000]", "later announcements, as offsets from the first"},
    {"announce.arpReply", "false", "also send the ARP reply form"},
    {"announce.ipv6", "true", "unsolicited neighbour advertisements for IPv6 addresses"},
    {"gateway.prime", "true", "ARP/NS to each address's gateway (in the repeats, not in ADD)"},
    {"gateway.timeoutMs", "500", "how long gateway priming waits"},
    {"conflictProbe.enabled", "false",
     "RFC 5227 probe before the first announcement: ADD then waits up to timeoutMs"},
    {"conflictProbe.timeoutMs", "200", "at most 5000"},
    {"agentSocket", announce::kDefaultHandoffSocket,
     "the agent's hand-off socket (fabric-agent --announce-socket)"},
    {"requireAgent", "false", "fail ADD (code 11) and STATUS (code 50) without the agent"},
    {"envDir", "unset", "write the pod's NCCL/UCX environment to ENVDIR/CONTAINERID.env"},
    {"stateDir", kDefaultStateDir, "pid files of detached children, pod routing records"},
    {"logLevel", "info", "debug, info, warning or error"},
    {"podRouting.mode", "auto", "auto, on or off: per-interface routing tables and ARP sysctls"},
    {"podRouting.tableRange", "[10000, 10999]",
     "routing tables the plugin may use, inclusive; not 253-255"},
    {"podRouting.rulePriority", "1000", "priority of the from-address rules (1-32765)"},
};

docs::Item CodeItem(int code, const char* when) { return {absl::StrCat(code), "", when}; }

}  // namespace

std::span<const ConfigKey> ConfigKeys() { return kConfigKeys; }

docs::Page ManPage() {
  docs::Page p;
  p.name = "fabric-cni";
  // Run by the container runtime, not a user: section 8, with the daemon it talks to.
  p.section = 8;
  p.summary = "chained CNI plugin that announces a new pod's addresses to the RDMA fabric";
  p.synopsis = "< NETWORK-CONFIG (with CNI_COMMAND and the other CNI_* variables set)";
  p.description = {
      absl::StrCat("fabric-cni is a chained CNI plugin (spec ",
                   absl::StrJoin(kSupportedVersions, ", "),
                   "). The runtime runs it after the plugin that creates the pod's interface, "
                   "with the CNI_* variables in the environment and the network config, "
                   "prevResult included, on stdin. On ADD it sends a gratuitous ARP request for "
                   "each IPv4 address and an unsolicited neighbour advertisement for each IPv6 "
                   "one, on every container-side interface of prevResult, before ADD returns, "
                   "and hands the repeats to fabric-agent(8); optionally it writes the pod's "
                   "NCCL/UCX environment (envDir) and routes each pod interface by its own table "
                   "(podRouting)."),
      "Install it beside the other plugins (/opt/cni/bin) and list it after the plugin that "
      "creates the interface. Run by hand, --version prints its version and --help points here."};
  p.sections.push_back(
      {"COMMANDS",
       {"CNI_COMMAND selects one:"},
       {{"ADD", "",
         "needs prevResult: announces each container interface's addresses, hands the sockets "
         "to the agent (or, without one, to a detached child) and prints prevResult"},
        {"DEL", "",
         "cancels the repeats, removes the env, state and routing of the attachment; succeeds "
         "when repeated and after the namespace is gone"},
        {"CHECK", "",
         "needs prevResult: the interfaces, addresses, pod routing and env file are still as ADD "
         "left them"},
        {"VERSION", "", "prints the supported spec versions"},
        {"STATUS", "", "(1.1.0) fails with code 50 when requireAgent is set and the agent is away"},
        {"GC", "",
         "(1.1.0) cleans up attachments not in cni.dev/valid-attachments (none without it)"}}});
  docs::Section config{"NETWORK CONFIGURATION",
                       {"fabric-cni reads these keys of its object in the network config (nested "
                        "keys as announce: {count: 3}). All are optional; unknown keys are "
                        "ignored, since other plugins' keys share the object. A key of the wrong "
                        "type or range fails with code 7, naming it."},
                       {}};
  for (const ConfigKey& k : kConfigKeys) {
    config.items.push_back({k.key, "", absl::StrCat(k.text, "; default: ", k.default_value)});
  }
  p.sections.push_back(std::move(config));
  p.sections.push_back(
      {"RESULT",
       {"ADD prints prevResult unchanged (with cniVersion added when it had none). VERSION "
        "prints cniVersion and supportedVersions. DEL, CHECK, STATUS and GC print nothing on "
        "success.",
        "An error is the spec's JSON object on stdout (cniVersion, code, msg, details) with exit "
        "status 1. The codes:"},
       {CodeItem(kIncompatibleVersion,
                 "unsupported or missing cniVersion; STATUS or GC below 1.1.0"),
        CodeItem(kInvalidEnv, "a missing or invalid CNI_* variable"),
        CodeItem(kIoFailure, "files in stateDir or envDir, fork, entering the namespace"),
        CodeItem(kDecodeFailure, "stdin is not a JSON object"),
        CodeItem(kInvalidConfig,
                 "a key of ours has the wrong type or range; no prevResult on ADD or CHECK"),
        CodeItem(kTryAgain, "requireAgent and the agent is not available (ADD, CHECK)"),
        CodeItem(kNotAvailable, "STATUS: requireAgent and the agent is not available"),
        CodeItem(kAnnounceFailed, "no packet socket on a pod interface (CAP_NET_RAW)"),
        CodeItem(kAddressConflict, "conflictProbe: another host answered for a pod address"),
        CodeItem(103, "CHECK: an interface, address, rule, table or ARP sysctl is gone"),
        CodeItem(kPodRoutingFailed,
                 "pod routing: no free table, or the kernel refused a rule or "
                 "route")}});
  p.sections.push_back({"EXIT STATUS",
                        {},
                        {{"0", "", "success"},
                         {"1", "", "an error, as the JSON on stdout says"},
                         {"2", "", "a command-line argument other than those above"},
                         {"5", "", "the result could not be written to stdout"}}});
  p.sections.push_back({"ENVIRONMENT",
                        {},
                        {{"CNI_COMMAND", "", "ADD, DEL, CHECK, VERSION, STATUS or GC"},
                         {"CNI_CONTAINERID", "", "the container's id"},
                         {"CNI_NETNS", "", "the pod's network namespace (may be empty for DEL)"},
                         {"CNI_IFNAME", "", "the interface the runtime asked for"},
                         {"CNI_ARGS", "", "K=V;K=V pairs"},
                         {"CNI_PATH", "", "where plugins are found"}}});
  p.sections.push_back(
      {"FILES",
       {},
       {{"STATEDIR/CONTAINERID-IFNAME.pid", "", "a detached child's pid and start time"},
        {"STATEDIR/CONTAINERID-IFNAME.routes", "", "the attachment's pod routing"},
        {"ENVDIR/CONTAINERID.env", "", "the pod's NCCL/UCX environment"}}});
  p.see_also = {"fabric-agent(8)", "fabricctl(1)", "ip-rule(8)"};
  return p;
}

docs::Completion CompletionWords() {
  docs::Completion c;
  c.program = "fabric-cni";
  c.words = {"--help", "--version"};
  return c;
}

int RunCommandLine(const std::vector<std::string>& args) {
  if (std::optional<std::string> kind = docs::GenerateKind(args)) {
    return docs::PrintGenerated(*kind, ManPage(), CompletionWords());
  }
  if (args.size() == 2 && args[1] == "--version") {
    std::printf("fabric-cni %s\n", kFabricVersion);
    return 0;
  }
  if (args.size() == 2 && (args[1] == "--help" || args[1] == "-h")) {
    std::printf(
        "fabric-cni: a chained CNI plugin, run by the container runtime with CNI_COMMAND and the "
        "network config on stdin (man 8 fabric-cni)\n");
    return 0;
  }
  std::fprintf(stderr, "fabric-cni: unexpected arguments; --help for more\n");
  return 2;
}

}  // namespace fabric::cni
