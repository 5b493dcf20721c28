// fabric-probe: perftest-grade RDMA bandwidth and latency tests, client and responder.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/common/log.h"
#include "agent/common/strings.h"
#include "agent/fabric/perftest/output.h"
#include "agent/fabric/probes/cli.h"
#include "agent/fabric/probes/engine.h"
#include "agent/fabric/probes/perftest_peer.h"
#include "agent/fabric/probes/probe.h"
#include "agent/fabric/probes/report.h"

namespace fabric::probes {
namespace {

void Print(const std::string& s, FILE* f) {
  std::fwrite(s.data(), 1, s.size(), f);
  std::fflush(f);
}

void Error(absl::string_view message) {
  Print(absl::StrCat("fabric-probe: error: ", message, "\n"), stderr);
}

// SIGINT and SIGTERM stop the probe through its canceller (the server's Stop()), so resources
// are released in order and the exit code says what happened.
void StopOnSignals(std::function<void()> stop) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([set, stop = std::move(stop)] {
    int sig = 0;
    if (sigwait(&set, &sig) == 0) stop();
  }).detach();
}

int RunServer(const CliConfig& c) {
  absl::StatusOr<std::unique_ptr<ProbeServer>> server = ProbeServer::Create(c.server_options);
  if (!server.ok()) {
    Error(server.status().message());
    return kExitFailure;
  }
  ProbeServer* s = server->get();
  StopOnSignals([s] { s->Stop(); });
  Print(
      absl::StrCat(
          "fabric-probe: serving ", s->allow().ToString(),
          c.server_options.allow.has_value() ? "" : " (this host's subnets; set --allow to change)",
          "\n"),
      stderr);
  // Tests and scripts read the port from here when they asked for port 0.
  Print(absl::StrCat("fabric-probe: waiting for a client on port ", s->port(), "\n"), stderr);
  int rc = kExitOk;
  for (;;) {
    absl::StatusOr<ServedTest> t = s->ServeOne();
    if (!t.ok()) {
      if (absl::IsCancelled(t.status())) return rc;
      Error(t.status().message());
      return kExitFailure;
    }
    if (t->status.ok()) {
      Print(absl::StrCat("fabric-probe: served ", Av(TestName(t->params.test)), " over ",
                         Av(TransportName(t->params.transport)),
                         t->device.empty() ? "" : absl::StrCat(" on ", t->device), " to ", t->peer,
                         "\n"),
            stderr);
    } else {
      Error(
          absl::StrCat(Av(TestName(t->params.test)), " from ", t->peer, ": ", t->status.message()));
      rc = kExitFailure;
    }
    if (!c.forever) return rc;
  }
}

// A canceller that SIGINT and SIGTERM trigger; null (the reason printed) if none could be made.
std::unique_ptr<Canceller> CancelOnSignals() {
  absl::StatusOr<std::unique_ptr<Canceller>> cancel = Canceller::Create();
  if (!cancel.ok()) {
    Error(cancel.status().message());
    return nullptr;
  }
  Canceller* k = cancel->get();
  StopOnSignals([k] { k->Cancel(); });
  return *std::move(cancel);
}

// Facing a stock ib_write_bw: serving its client, printing the client's report, or being the
// client of its server, printing ours; perftest's table (--json: perftest's --out_json file).
int RunPerftest(const CliConfig& c) {
  std::unique_ptr<Canceller> cancel = CancelOnSignals();
  if (cancel == nullptr) return kExitFailure;
  PerftestServerOptions o;
  o.params = c.server ? c.server_options.expect : c.client.params;
  o.gbits = c.gbits;
  o.local = c.server ? c.server_options.local : c.client.local;
  o.bind = c.server_options.bind;
  o.port = c.server ? c.server_options.port : c.client.port;
  o.allow = c.server_options.allow;
  perftest::BwReport report;
  std::optional<perftest::LatFigures> lat;
  perftest::TestInfo info;
  if (c.server) {
    Print(absl::StrCat("fabric-probe: waiting for a perftest client on port ", o.port, "\n"),
          stderr);
    absl::StatusOr<PerftestServed> s = ServePerftestClient(o, cancel.get());
    if (!s.ok()) {
      if (absl::IsCancelled(s.status())) return kExitOk;
      Error(s.status().message());
      return kExitFailure;
    }
    Print(absl::StrCat("fabric-probe: served perftest ", s->peer_version, "'s ",
                       Av(TestName(o.params.test)), " on ", s->device, " to ", s->peer, "\n"),
          stderr);
    report = s->client;
    lat = s->lat;
    info.device = s->device;
    info.client = false;
    if (s->gid_index >= 0) info.gid_index = s->gid_index;
  } else {
    absl::StatusOr<PerftestRun> r =
        RunPerftestClient(o, c.client.host, c.client.connect_retry, cancel.get());
    if (!r.ok()) {
      Error(absl::StrCat(Av(TestName(o.params.test)), " with perftest at ", c.client.host, " port ",
                         o.port, ": ", r.status().message()));
      return kExitFailure;
    }
    report = r->report;
    lat = r->lat;
    info.device = r->device;
    if (r->gid_index >= 0) info.gid_index = r->gid_index;
  }
  info.num_of_qps = static_cast<int>(o.params.num_qps);
  info.tx_depth = static_cast<int>(o.params.tx_depth);
  info.cq_mod = static_cast<int>(o.params.cq_mod);
  info.inline_size = static_cast<int>(o.params.inline_size);
  if (lat) {
    info.bandwidth = false;
    Print(c.json ? perftest::LatJson(info, *lat, perftest::Output::kFull)
                 : absl::StrCat(perftest::kResultLine, perftest::LatHeader(false),
                                perftest::LatLine(*lat, perftest::Output::kFull),
                                perftest::kResultLine),
          stdout);
    return kExitOk;
  }
  Print(c.json ? perftest::BwJson(info, report, c.gbits, perftest::Output::kFull)
               : absl::StrCat(perftest::kResultLine, perftest::BwHeader(c.gbits),
                              perftest::BwLine(report, c.gbits, perftest::Output::kFull),
                              perftest::kResultLine),
        stdout);
  return kExitOk;
}

int RunClient(CliConfig c) {
  std::unique_ptr<Canceller> cancel = CancelOnSignals();
  if (cancel == nullptr) return kExitFailure;
  Canceller* k = cancel.get();
  c.client.cancel = k;
  absl::StatusOr<ProbeResult> r = RunProbe(c.client);
  if (!r.ok()) {
    Error(absl::StrCat(Av(TestName(c.client.params.test)), " with ", c.client.host, " port ",
                       c.client.port, ": ", r.status().message()));
    return kExitFailure;
  }
  Print(c.json ? FormatJson(*r) + "\n" : FormatTable(*r), stdout);
  return kExitOk;
}

}  // namespace
}  // namespace fabric::probes

int main(int argc, char** argv) {
  using namespace fabric::probes;
  fabric::InitLog("fabric-probe", fabric::LogLevel::kInfo);
  CliParse parse = ParseCli(std::vector<std::string>(argv, argv + argc));
  if (parse.exit) {
    Print(parse.output, parse.exit_code == kExitOk ? stdout : stderr);
    return parse.exit_code;
  }
  CliConfig& c = parse.config;
  if (c.perftest) return RunPerftest(c);  // RDMA always: perftest has no TCP transport
  if (!c.server) {
    absl::StatusOr<TransportChoice> t =
        ChooseTransport(c.transport, c.device_given, c.client.params.rdma_cm, HaveRdmaDevice());
    if (!t.ok()) {
      Error(t.status().message());
      return kExitFailure;
    }
    if (!t->fallback.empty()) Print(absl::StrCat("fabric-probe: ", t->fallback, "\n"), stderr);
    c.client.params.transport = t->transport;
  }
  return c.server ? RunServer(c) : RunClient(std::move(c));
}
