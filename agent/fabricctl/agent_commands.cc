// fabricctl announcements, probe, probes and watch: through the agent.
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

int RunAnnouncements(const Options& opt) {
  auto client = Client(opt);
  if (!client.ok()) return Fail(kUsage, std::string(client.status().message()));
  auto resp = (*client)->ListAnnouncements(opt.container);
  if (!resp.ok()) return Fail(AgentCode(resp.status()), std::string(resp.status().message()));
  if (opt.json) {
    Print(ToJson(*resp));
  } else if (resp->announcements().empty()) {
    std::printf("no announcements held%s\n",
                opt.container.empty() ? "" : absl::StrCat(" for ", opt.container).c_str());
  } else {
    Print(RenderAnnouncements({resp->announcements().begin(), resp->announcements().end()}));
  }
  return kOk;
}

// One test now, by the agent (it holds the device and keeps the result with its schedule's).
int RunProbe(const Options& opt) {
  auto client = Client(opt);
  if (!client.ok()) return Fail(kUsage, std::string(client.status().message()));
  v1::RunProbeRequest req = opt.probe;
  if (opt.probe_duration_s > 0) {
    req.set_duration_seconds(static_cast<uint32_t>(std::ceil(opt.probe_duration_s)));
  }
  req.set_timeout_seconds(static_cast<uint32_t>(std::ceil(opt.probe_step_timeout_s)));
  // The agent may wait up to a minute for the device, then every step is bounded by the step
  // timeout; iterations run as long as they run, so leave room for both.
  const absl::Duration bound = absl::Seconds(opt.timeout_s) + absl::Seconds(60) +
                               absl::Seconds(req.duration_seconds() + 2) +
                               8 * absl::Seconds(req.timeout_seconds());
  auto r = (*client)->RunProbe(req, bound);
  if (!r.ok()) return Fail(AgentCode(r.status()), std::string(r.status().message()));
  if (opt.json) {
    Print(ToJson(*r));
  } else if (r->ok()) {
    Print(probes::FormatTable(probes::ResultFromProto(*r)));
    if (r->has_fraction_of_rate()) {
      std::printf(" %.0f%% of the port's %g Gb/s%s\n", 100 * r->fraction_of_rate(),
                  r->port_rate_gbps(), r->degraded() ? " (DEGRADED)" : "");
    }
    if (!r->teardown_error().empty()) {
      std::printf(" warning: releasing RDMA resources: %s\n", r->teardown_error().c_str());
    }
  }
  if (!r->ok()) {
    return Fail(kFailed, absl::StrCat(r->test(), " with ", r->peer(), ": ", r->error_code(), ": ",
                                      r->error()));
  }
  return kOk;
}

int RunProbes(const Options& opt) {
  auto client = Client(opt);
  if (!client.ok()) return Fail(kUsage, std::string(client.status().message()));
  v1::ListProbeResultsRequest req;
  req.set_peer(opt.peer);
  req.set_device(opt.device);
  req.set_test(opt.test);
  req.set_limit(opt.limit);
  auto resp = (*client)->ListProbeResults(req);
  if (!resp.ok()) return Fail(AgentCode(resp.status()), std::string(resp.status().message()));
  Print(opt.json ? ToJson(*resp) : RenderProbeResults(*resp));
  return kOk;
}

// One line per change as the agent sees it: "TIME gen N KIND SUBJECT OLD -> NEW"; with --json
// each event on one line (the proto3 JSON mapping without the inventory after the first).
int RunWatch(const Options& opt) {
  auto client = Client(opt);
  if (!client.ok()) return Fail(kUsage, std::string(client.status().message()));
  uint32_t seen = 0;
  absl::Status s = (*client)->Watch(
      [&](const v1::InventoryEvent& e) {
        const std::string when = absl::FormatTime("%H:%M:%E3S", absl::Now(), absl::LocalTimeZone());
        if (opt.json) {
          v1::InventoryEvent compact = e;
          if (seen > 0) compact.mutable_inventory()->clear_host();
          google::protobuf::util::JsonPrintOptions o;
          std::string line;
          (void)google::protobuf::util::MessageToJsonString(compact, &line, o);
          std::printf("%s\n", line.c_str());
        } else if (seen == 0) {
          std::printf("%s gen %llu inventory: %d RDMA devices, %d netdevs, %d accelerators\n",
                      when.c_str(), static_cast<unsigned long long>(e.inventory().generation()),
                      e.inventory().host().rdma_devices_size(), e.inventory().host().netdevs_size(),
                      e.inventory().host().accelerators_size());
        } else {
          for (const v1::InventoryChange& c : e.changes()) {
            std::string kind = v1::InventoryChange::Kind_Name(c.kind());
            if (absl::StartsWith(kind, "KIND_")) kind = kind.substr(5);
            std::string line = absl::StrCat(when, " gen ", e.inventory().generation(), " ",
                                            absl::AsciiStrToLower(kind));
            if (!c.subject().empty()) absl::StrAppend(&line, " ", c.subject());
            if (!c.old_value().empty() || !c.new_value().empty()) {
              absl::StrAppend(&line, " ", c.old_value().empty() ? "-" : c.old_value(), " -> ",
                              c.new_value().empty() ? "-" : c.new_value());
            }
            if (c.count() > 0) absl::StrAppend(&line, " (", c.count(), " since start)");
            std::printf("%s\n", line.c_str());
          }
        }
        std::fflush(stdout);
        ++seen;
        return opt.count == 0 || seen < opt.count;
      },
      opt.duration_s > 0 ? absl::Seconds(opt.duration_s) : absl::InfiniteDuration());
  if (!s.ok()) return Fail(AgentCode(s), std::string(s.message()));
  return kOk;
}

}  // namespace fabric::ctl
