// fabricctl's commands, shared by its files: the options of every command, how a command reaches
// the agent or the host, and how its errors become exit codes (main.cc has the flags).
//
// Exit codes: 0 success; 1 the host lacks what was asked (no RDMA device, an unknown GPU, no
// usable port); 2 usage or bad input (flags, addresses, config); 3 the host cannot be read (the
// sysfs root does not exist, the agent is not serving). `health` follows the monitoring-plugin
// convention instead.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/fabricctl/client.h"
#include "fabric/v1/agent.pb.h"

namespace fabric::ctl {

enum ExitCode { kOk = 0, kFailed = 1, kUsage = 2, kUnreadable = 3 };

struct Options {
  std::string sysfs = "/sys";
  std::string procfs = "/proc";
  std::string config;
  bool json = false;
  std::string gpus;
  std::string format = "shell";
  bool keep_set = false;
  bool is_export = false;
  std::string target = kDefaultTarget;
  double timeout_s = 5;
  ClientTls tls;
  bool local = false;  // --sysfs or --procfs given: discover here instead of asking the agent.
  std::string fail_on = "unknown";
  bool liveness = false;
  // announce
  std::string ifname;
  std::string netns;
  std::vector<std::string> ips;
  std::vector<std::string> gateways;
  std::string container;
  bool repeat = false;
  bool arp_reply = false;
  bool no_ipv6 = false;
  bool conflict_probe = false;
  // probe, probes
  v1::RunProbeRequest probe;
  double probe_duration_s = 0;
  double probe_step_timeout_s = 10;
  std::string test;
  std::string device;
  std::string peer;
  uint32_t limit = 0;
  // watch
  uint32_t count = 0;
  double duration_s = 0;
};

// The agent for this invocation; an error for a bad --target or unreadable TLS files.
absl::StatusOr<std::unique_ptr<AgentClient>> Client(const Options& opt);
// The exit code for an error from the agent: the agent's verdict on the request (bad input,
// unknown GPU) or, when it cannot be reached, "the host cannot be read".
int AgentCode(const absl::Status& s);
// Prints "fabricctl: MESSAGE" to stderr; returns `code`.
int Fail(int code, const std::string& message);
void Print(const std::string& s);

struct Loaded {
  v1::Host host;
  v1::AgentConfig config;
};
// Discovers the host and reads the config, or asks the agent for its inventory; on failure
// sets the exit code.
absl::StatusOr<Loaded> Load(const Options& opt, int* code);
int NoRdma(const v1::Host& host);
// --gpus as a list ("all": every GPU of `host`).
absl::StatusOr<std::vector<std::string>> GpuList(const v1::Host& host, const std::string& gpus);

// The commands about the host (host_commands.cc): here or through the agent.
int RunInventory(const Options& opt);
int RunTopo(const Options& opt);
int RunSelect(const Options& opt);
int RunEnv(const Options& opt);
int RunHealth(const Options& opt);
// announce_command.cc: packets sent from here, or through the agent.
int RunAnnounceLocal(const Options& opt);
int RunAnnounceRemote(const Options& opt);
// The commands through the agent (agent_commands.cc).
int RunAnnouncements(const Options& opt);
int RunProbe(const Options& opt);
int RunProbes(const Options& opt);
int RunWatch(const Options& opt);

}  // namespace fabric::ctl
