// What every fabricctl command shares: reaching the agent or the host, exit codes (ctl.h).
#include "agent/fabricctl/ctl.h"

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
#include "agent/config/config.h"
#include "agent/fabric/announce/announce.h"
#include "agent/fabric/announce/link.h"
#include "agent/fabric/announce/to_proto.h"
#include "agent/fabric/announce/validate.h"
#include "agent/fabric/probes/report.h"
#include "agent/fabric/probes/schedule.h"
#include "agent/fabricctl/client.h"
#include "agent/fabricctl/render.h"
#include "agent/inventory/discovery/discovery.h"
#include "agent/inventory/discovery/parse.h"
#include "agent/inventory/hostfs/host_fs.h"
#include "agent/policy/health/health.h"
#include "agent/policy/select/env.h"
#include "agent/policy/select/select.h"

namespace fabric::ctl {

absl::StatusOr<std::unique_ptr<AgentClient>> Client(const Options& opt) {
  auto target = GrpcTarget(opt.target);
  if (!target.ok()) return target.status();
  auto creds = ChannelCredentialsFor(opt.tls);
  if (!creds.ok()) return creds.status();
  return std::make_unique<AgentClient>(*target, absl::Seconds(opt.timeout_s), *std::move(creds));
}

int AgentCode(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
      return kUsage;
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kFailedPrecondition:
      return kFailed;
    default:
      return kUnreadable;
  }
}

int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "fabricctl: %s\n", message.c_str());
  return code;
}

void Print(const std::string& s) { std::fwrite(s.data(), 1, s.size(), stdout); }

// Discovers the host and reads the config, or asks the agent for its inventory; on failure
// returns the exit code.
absl::StatusOr<Loaded> Load(const Options& opt, int* code) {
  Loaded out;
  if (!opt.local) {
    auto client = Client(opt);
    if (!client.ok()) {
      *code = kUsage;
      return client.status();
    }
    auto inv = (*client)->GetInventory();
    if (!inv.ok()) {
      *code = AgentCode(inv.status());
      return inv.status();
    }
    out.host = std::move(*inv->mutable_host());
    return out;
  }
  if (!opt.config.empty()) {
    auto config = LoadConfig(opt.config);
    if (!config.ok()) {
      *code = kUsage;
      return config.status();
    }
    out.config = *std::move(config);
  }
  HostFsImpl sysfs(opt.sysfs);
  HostFsImpl procfs(opt.procfs);
  auto host = Discover(sysfs, procfs);
  if (!host.ok()) {
    *code = kUnreadable;
    return host.status();
  }
  out.host = *std::move(host);
  return out;
}

int NoRdma(const v1::Host& host) {
  return Fail(kFailed, absl::StrCat("no RDMA device found under ", host.sysfs_root(),
                                    "/class/infiniband (is the RDMA driver loaded?)"));
}

// "all" means every compute accelerator, in PCI order.
absl::StatusOr<std::vector<std::string>> GpuList(const v1::Host& host, const std::string& gpus) {
  std::vector<std::string> list;
  if (gpus == "all") {
    list = ComputeGpus(host);
    if (list.empty()) return absl::NotFoundError("--gpus=all: the host has no GPU or accelerator");
    return list;
  }
  for (absl::string_view g : absl::StrSplit(gpus, ',', absl::SkipWhitespace())) {
    list.emplace_back(g);
  }
  if (list.empty()) return absl::InvalidArgumentError("--gpus is empty");
  return list;
}

}  // namespace fabric::ctl
