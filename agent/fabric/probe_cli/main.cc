// fabric-probe: perftest-grade RDMA bandwidth and latency tests, client and responder.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "agent/common/atomic_file.h"
#include "agent/common/log.h"
#include "agent/common/output.h"
#include "agent/common/strings.h"
#include "agent/fabric/perftest/output.h"
#include "agent/fabric/perftest/peer.h"
#include "agent/fabric/probe_cli/cli.h"
#include "agent/fabric/probe_cli/report.h"
#include "agent/fabric/probes/engine.h"
#include "agent/fabric/probes/probe.h"

namespace fabric::probes {
namespace {

void Error(absl::string_view message) {
  Write(absl::StrCat("fabric-probe: error: ", message, "\n"), stderr);
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
  Write(
      absl::StrCat(
          "fabric-probe: serving ", s->allow().ToString(),
          c.server_options.allow.has_value() ? "" : " (this host's subnets; set --allow to change)",
          "\n"),
      stderr);
  // Tests and scripts read the port from here when they asked for port 0.
  Write(absl::StrCat("fabric-probe: waiting for a client on port ", s->port(), "\n"), stderr);
  int rc = kExitOk;
  for (;;) {
    absl::StatusOr<ServedTest> t = s->ServeOne();
    if (!t.ok()) {
      if (absl::IsCancelled(t.status())) return rc;
      Error(t.status().message());
      return kExitFailure;
    }
    if (t->status.ok()) {
      Write(absl::StrCat("fabric-probe: served ", Av(TestName(t->params.test)), " over ",
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

// Facing stock perftest: serving its client or being the client of its server, printing what
// perftest prints on this side; perftest's table (--json: perftest's --out_json file).
int RunPerftest(const CliConfig& c) {
  std::unique_ptr<Canceller> cancel = CancelOnSignals();
  if (cancel == nullptr) return kExitFailure;
  const PerftestServerOptions& o = c.perftest_options;
  const std::string test(TestName(o.params.test));
  absl::StatusOr<PerftestResult> r;
  if (c.server) {
    r = ServePerftestClient(o, cancel.get(), [&o] {
      Write(absl::StrCat("fabric-probe: waiting for a perftest client on port ", o.port, "\n"),
            stderr);
    });
    if (absl::IsCancelled(r.status())) return kExitOk;
    if (r.ok()) {
      Write(absl::StrCat("fabric-probe: served perftest ", r->peer_version, "'s ", test, " on ",
                         r->device, " to ", r->peer, "\n"),
            stderr);
    }
  } else {
    r = RunPerftestClient(o, c.client.host, c.client.connect_retry, cancel.get());
    if (!r.ok()) {
      r = absl::Status(r.status().code(),
                       absl::StrCat(test, " with perftest at ", c.client.host, " port ", o.port,
                                    ": ", r.status().message()));
    }
  }
  if (!r.ok()) {
    Error(r.status().message());
    return kExitFailure;
  }
  perftest::TestInfo info;
  info.device = r->device;
  info.client = !c.server;
  if (r->gid_index >= 0) info.gid_index = r->gid_index;
  info.num_of_qps = static_cast<int>(o.params.num_qps);
  info.tx_depth = static_cast<int>(o.params.tx_depth);
  info.cq_mod = static_cast<int>(o.params.cq_mod);
  info.inline_size = static_cast<int>(o.params.inline_size);
  info.bandwidth = !IsLatency(o.params.test);
  info.verb = PerftestVerb(o.params.test);
  info.mtu_bytes = r->mtu_bytes;
  info.link_type = r->ethernet ? "Ethernet" : "IB";
  info.out_reads = r->out_reads;
  if (o.local.gpu && o.local.gpu->vendor == gpumem::GpuVendor::kCuda) {
    int index = 0;
    info.cuda_device = absl::SimpleAtoi(o.local.gpu->device, &index) ? index : 0;
  }
  info.rocm = o.local.gpu && o.local.gpu->vendor == gpumem::GpuVendor::kRocm;
  info.rdma_cm = o.params.rdma_cm;
  info.duplex = o.duplex;
  if (o.params.tos >= 0) info.tos = o.params.tos;
  if (o.params.tos >= 0 && r->traffic_class) {
    Write(absl::StrCat("fabric-probe: the QPs' traffic class is ", *r->traffic_class, " (-T ",
                       o.params.tos, ")\n"),
          stderr);
  }
  if (o.local.gpu) Write(absl::StrCat("fabric-probe: the buffer is in ", r->memory, "\n"), stderr);
  if (!r->placement.empty())
    Write(absl::StrCat("fabric-probe: ran on ", r->placement, "\n"), stderr);
  // perftest prints the table (or --output's one figure) and writes --out_json's file beside it.
  std::string table, json;
  const bool full = c.output == perftest::Output::kFull;
  if (r->lat) {
    table = full ? absl::StrCat(perftest::kResultLine, perftest::LatHeader(false),
                                perftest::LatLine(*r->lat, c.output), perftest::kResultLine)
                 : perftest::LatLine(*r->lat, c.output);
    json = perftest::LatJson(info, *r->lat, c.output);
  } else if (r->lat_duration) {
    const std::string line = perftest::LatDurationLine(*r->lat_duration, c.output);
    table = full ? absl::StrCat(perftest::kResultLine, perftest::LatHeader(true), line,
                                perftest::kResultLine)
                 : line;
    json = perftest::LatDurationJson(info, *r->lat_duration, c.output);
  } else if (r->bw) {
    std::string lines;
    for (const PerftestResult::Line& size : r->sizes) {  // -a
      lines += perftest::BwLine(size.bw, c.gbits, c.output, size.own_average);
    }
    if (r->sizes.empty()) lines = perftest::BwLine(*r->bw, c.gbits, c.output, r->own_average);
    table = full ? absl::StrCat(perftest::kResultLine, perftest::BwHeader(c.gbits), lines,
                                perftest::kResultLine)
                 : lines;
    json = perftest::BwJson(info, *r->bw, c.gbits, c.output, r->own_average);
  } else if (full) {  // read_lat's server measures nothing, as perftest's
    table = perftest::kResultLine;
  }
  Write(c.json ? json : table, stdout);
  if (!c.out_json_file.empty() && !json.empty()) {
    const std::filesystem::path path = std::filesystem::absolute(c.out_json_file);
    absl::StatusOr<bool> wrote =
        ReplaceFileIfChanged(path.parent_path().string(), path.filename().string(), json);
    if (!wrote.ok()) {
      Error(absl::StrCat("--out_json: ", wrote.status().message()));
      return kExitFailure;
    }
  }
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
  Write(c.json ? FormatJson(*r) + "\n" : FormatTable(*r), stdout);
  return kExitOk;
}

}  // namespace
}  // namespace fabric::probes

int main(int argc, char** argv) {
  using namespace fabric::probes;
  fabric::InitLog("fabric-probe", fabric::LogLevel::kInfo);
  CliParse parse = ParseCli(std::vector<std::string>(argv, argv + argc));
  if (parse.exit) {
    fabric::Write(parse.output, parse.exit_code == kExitOk ? stdout : stderr);
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
    if (!t->fallback.empty())
      fabric::Write(absl::StrCat("fabric-probe: ", t->fallback, "\n"), stderr);
    c.client.params.transport = t->transport;
  }
  return c.server ? RunServer(c) : RunClient(std::move(c));
}
