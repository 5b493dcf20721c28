#include "agent/fabric/perftest/peer.h"

#include <algorithm>
#include <limits>
#include <span>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/common/status.h"
#include "agent/fabric/perftest/connect.h"
#include "agent/fabric/perftest/figures.h"
#include "agent/fabric/perftest/oob.h"
#include "agent/fabric/probes/engine.h"
#include "agent/fabric/probes/verbs_loops.h"
#include "agent/fabric/probes/verbs_resources.h"

namespace fabric::probes {
namespace {

namespace pt = ::fabric::perftest;

absl::Status Prefixed(const absl::Status& s, const char* step) {
  return absl::Status(s.code(), absl::StrCat(step, ": ", s.message()));
}

// How long the client's run may take: its duration with margins, or its messages at no less
// than 100 MB/s; plus the step time-out.
// A generous bound, for a client that stops without closing: one that goes away closes the
// exchange, which ends the wait at once.
absl::Duration RunBound(const ProbeParams& p, absl::Duration timeout) {
  if (p.duration_mode()) return p.duration + 2 * p.margin + timeout;
  const double messages = static_cast<double>(p.iterations) * p.num_qps;
  // Bandwidth: 100 MB/s, or 10,000 messages a second (a software RoCE's small messages), for
  // each size that runs; latency: 10 ms a round trip.
  double seconds = 0;
  for (uint64_t size : SizesToRun(p)) {
    seconds += IsLatency(p.test)
                   ? messages * 0.01
                   : std::max(messages * static_cast<double>(size) / 1e8, messages * 1e-4);
  }
  return std::min(absl::Seconds(seconds), absl::Hours(1)) + timeout;
}

// perftest's latency figures from the time before each of this side's posts: write and send
// report half the round trip, read the whole.
absl::StatusOr<pt::LatFigures> LatFigures(const ProbeParams& p, std::span<const int64_t> posts) {
  std::vector<uint64_t> ticks;
  for (int64_t t : posts) ticks.push_back(static_cast<uint64_t>(t - posts.front()));
  return pt::ComputeLat(p.size, ticks, VerbOf(p.test) == Verb::kRead ? 1 : 2, 1e9);
}

// The latency figures of one side's run into `r`: per sample, or with -D the window's average
// and rate (perftest's print_report_lat_duration).
absl::Status SetLatFigures(const ProbeParams& p, const Measurement& m,
                           std::span<const int64_t> posts, PerftestResult& r) {
  const int rtt = VerbOf(p.test) == Verb::kRead ? 1 : 2;
  if (p.duration_mode()) {
    absl::StatusOr<pt::LatDurationFigures> f = pt::ComputeLatDuration(
        p.size, m.messages, static_cast<uint64_t>(absl::ToInt64Nanoseconds(p.duration)), rtt, 1e9);
    if (!f.ok()) return f.status();
    r.lat_duration = *f;
    return absl::OkStatus();
  }
  absl::StatusOr<pt::LatFigures> f = LatFigures(p, posts);
  if (!f.ok()) return f.status();
  r.lat = *f;
  return absl::OkStatus();
}

// write_lat and send_lat: the ping-pong, both sides measuring.
absl::Status PingPong(const PerftestServerOptions& o, VerbsResources& verbs, bool server,
                      const Canceller* cancel, PerftestResult& r) {
  absl::StatusOr<Measurement> m = RunPerftestLat(verbs, server, o.local.timeout, cancel);
  if (!m.ok()) return m.status();
  return SetLatFigures(o.params, *m, m->posts, r);
}

// perftest's figures from our loop's stamps: each message's post, and each poll's time for the
// messages it completed (a receiver's: its first and last receive, no peak).
absl::StatusOr<pt::BwReport> Figures(const Measurement& m, const PerftestServerOptions& o,
                                     uint64_t size) {
  pt::BwRun run;
  run.size = size;
  run.messages = m.messages;
  run.cq_mod = o.params.cq_mod;
  run.post_list = o.params.post_list;
  run.gbits = o.gbits;
  run.hz = 1e9;
  // perftest measures no peak past 20000 iterations (its arrays), nor in duration mode.
  run.peak =
      !o.params.duration_mode() && o.params.iterations <= 20000 && m.post_ns.size() == m.messages;
  const int64_t base = m.first_ns;
  auto tick = [base](int64_t t) { return static_cast<uint64_t>(std::max<int64_t>(t - base, 0)); };
  if (run.peak) {
    for (int64_t t : m.post_ns) run.posted.push_back(tick(t));
    run.completed.assign(m.messages, 0);
    uint64_t done = 0;
    for (const CompletionMark& mark : m.marks) {
      for (; done < mark.messages && done < m.messages; ++done)
        run.completed[done] = tick(mark.t_ns);
    }
  } else {
    run.posted = {tick(m.first_ns)};
    run.completed = {tick(m.last_ns)};
  }
  return pt::ComputeBw(run);
}

// What each of perftest's tests does once the QPs are connected, either side (write_bw.c,
// read_bw.c, send_bw.c, write_lat.c, read_lat.c, send_lat.c). `one` swaps QP 0's keys: the sync
// points; `close` is perftest's ctx_close_connection (one last swap).
class Session {
 public:
  using Line = PerftestResult::Line;

  Session(PerftestOob& oob, const PerftestServerOptions& o, VerbsResources& verbs,
          const Connected& c, const Canceller* cancel)
      : oob_(oob), o_(o), verbs_(verbs), c_(c), cancel_(cancel) {}

  absl::StatusOr<PerftestResult> Run() {
    PerftestResult r;
    r.peer_version = c_.peer_version;
    r.mtu_bytes = 128 << c_.mtu;
    r.ethernet = verbs_.port_attr().link_layer == IBV_LINK_LAYER_ETHERNET;
    r.out_reads = c_.out_reads;
    const bool server = !oob_.client();
    switch (o_.params.test) {
      case TestKind::kWriteLat:  // no closing swap: the socket just closes
        FABRIC_RETURN_IF_ERROR(PingPong(o_, verbs_, server, cancel_, r));
        oob_.Close();
        return r;
      case TestKind::kSendLat:  // both post receives before the sync
        FABRIC_RETURN_IF_ERROR(verbs_.PostInitialRecvs());
        FABRIC_RETURN_IF_ERROR(One(o_.local.timeout));
        FABRIC_RETURN_IF_ERROR(PingPong(o_, verbs_, server, cancel_, r));
        // With -D each side stops on its own clock: the peer's last message may come after.
        FABRIC_RETURN_IF_ERROR(Close(o_.local.timeout + o_.params.margin));
        return r;
      case TestKind::kReadLat:  // the server closes at once and waits; only the client measures
        if (server) {
          FABRIC_RETURN_IF_ERROR(Close(RunBound(o_.params, o_.local.timeout)));
          return r;
        } else {
          absl::StatusOr<Measurement> m =
              RunVerbsClient(verbs_, o_.local.timeout, cancel_, nullptr);
          if (!m.ok()) return m.status();
          // Our loop stamps the last read's completion too; perftest's samples end at the last
          // post.
          const size_t n = std::min<size_t>(m->posts.size(), o_.params.iterations);
          FABRIC_RETURN_IF_ERROR(
              SetLatFigures(o_.params, *m, std::span<const int64_t>(m->posts).first(n), r));
          FABRIC_RETURN_IF_ERROR(Close(o_.local.timeout));
          return r;
        }
      case TestKind::kSendBw:
        return SendBw(server, std::move(r));
      case TestKind::kWriteBw:
      case TestKind::kReadBw:
        if (o_.duplex) return Bidirectional(std::move(r));
        return server ? PassiveServer(std::move(r)) : ReportingClient(std::move(r));
    }
    return absl::InternalError("unknown test");
  }

 private:
  absl::Status One(absl::Duration bound) {
    return SwapKeys(oob_, c_.mine, c_.keys, 1, bound).status();
  }
  absl::Status Close(absl::Duration bound) {
    FABRIC_RETURN_IF_ERROR(One(bound));
    oob_.Close();
    return absl::OkStatus();
  }

  // write_bw and read_bw: the client moves the data; its swap after the run says it is done,
  // then its report comes (ours is empty, as perftest's passive server's).
  absl::StatusOr<PerftestResult> PassiveServer(PerftestResult r) {
    if (absl::Status s = One(RunBound(o_.params, o_.local.timeout)); !s.ok()) {
      return Prefixed(s, "waiting for the client's run");
    }
    absl::StatusOr<pt::BwReport> client = SwapReports(oob_, pt::BwReport{});
    if (!client.ok()) return client.status();
    r.bw = *client;
    FABRIC_RETURN_IF_ERROR(Close(o_.local.timeout));
    return r;
  }
  absl::StatusOr<PerftestResult> ReportingClient(PerftestResult r) {
    // -a: every size in turn, nothing said between them; the last size's report crosses.
    FABRIC_RETURN_IF_ERROR(EachSize(r, [&]() { return Own(Measure()); }));
    FABRIC_RETURN_IF_ERROR(One(o_.local.timeout));
    FABRIC_RETURN_IF_ERROR(SwapReports(oob_, *r.bw).status());
    FABRIC_RETURN_IF_ERROR(Close(o_.local.timeout));
    return r;
  }
  // -b: both ends warm up, meet, move data and swap reports; each prints the sum.
  // With -a both ends meet again after each size's run (perftest 4.6 and later).
  absl::StatusOr<PerftestResult> Bidirectional(PerftestResult r) {
    auto size_run = [&]() -> absl::StatusOr<Line> {
      FABRIC_RETURN_IF_ERROR(WarmUp());
      FABRIC_RETURN_IF_ERROR(One(o_.local.timeout));
      absl::StatusOr<pt::BwReport> mine = Timed();
      if (!mine.ok()) return mine.status();
      if (o_.params.all_sizes) FABRIC_RETURN_IF_ERROR(One(RunBound(o_.params, o_.local.timeout)));
      return Summed(*mine);
    };
    FABRIC_RETURN_IF_ERROR(EachSize(r, size_run));
    FABRIC_RETURN_IF_ERROR(Close(o_.local.timeout));
    return r;
  }
  // send_bw: the receiver posts its receives before the sync (the server; with -b both ends);
  // each side reports its own figures and no report crosses, except with -b by iterations. -a:
  // each size between two syncs, the receives posted once (each takes the largest size, and is
  // posted again as it completes).
  absl::StatusOr<PerftestResult> SendBw(bool server, PerftestResult r) {
    if (server || o_.duplex) FABRIC_RETURN_IF_ERROR(verbs_.PostRecvs());
    auto size_run = [&]() -> absl::StatusOr<Line> {
      FABRIC_RETURN_IF_ERROR(One(o_.local.timeout));
      absl::StatusOr<Line> line =
          o_.duplex ? SendBoth(server) : Own(server ? Receive() : Measure());
      if (line.ok() && o_.params.all_sizes) {
        FABRIC_RETURN_IF_ERROR(One(RunBound(o_.params, o_.local.timeout)));
      }
      return line;
    };
    FABRIC_RETURN_IF_ERROR(EachSize(r, size_run));
    FABRIC_RETURN_IF_ERROR(Close(o_.local.timeout));
    return r;
  }
  // send_bw -b (run_iter_bi): both ends send and receive at once. By iterations the reports
  // cross and each prints the sum; with -D each prints its own window's sends and receives.
  absl::StatusOr<Line> SendBoth(bool server) {
    absl::StatusOr<Measurement> m = RunPerftestBi(verbs_, server, o_.local.timeout, cancel_);
    if (!m.ok()) return m.status();
    absl::StatusOr<pt::BwReport> mine = Figures(*m, o_, verbs_.params().size);
    if (!mine.ok()) return mine.status();
    if (o_.params.duration_mode()) return Line{*mine, {}};
    return Summed(*mine);
  }

  // Each size of the run in turn (one, or with -a all), `size_run` giving its line; the last
  // line is the result's, and with -a each is kept.
  template <typename SizeRun>
  absl::Status EachSize(PerftestResult& r, SizeRun size_run) {
    for (uint64_t size : SizesToRun(o_.params)) {
      verbs_.set_size(size);
      absl::StatusOr<Line> line = size_run();
      if (!line.ok()) return line.status();
      r.bw = line->bw;
      r.own_average = line->own_average;
      if (o_.params.all_sizes) r.sizes.push_back(*line);
    }
    return absl::OkStatus();
  }
  static absl::StatusOr<Line> Own(absl::StatusOr<pt::BwReport> mine) {
    if (!mine.ok()) return mine.status();
    return Line{*mine, {}};
  }
  // -b's line: this end's report and the peer's, summed; this end's average decides the digits.
  absl::StatusOr<Line> Summed(const pt::BwReport& mine) {
    absl::StatusOr<pt::BwReport> theirs = SwapReports(oob_, mine);
    if (!theirs.ok()) return theirs.status();
    Line line{mine, mine.average};
    line.bw.peak += theirs->peak;
    line.bw.average += theirs->average;
    line.bw.msg_rate += theirs->msg_rate;
    return line;
  }
  absl::StatusOr<pt::BwReport> Measure() {
    FABRIC_RETURN_IF_ERROR(WarmUp());
    return Timed();
  }
  absl::Status WarmUp() {
    // perftest skips its warm-up for sends (the receiver counts every message).
    if (!o_.warm_up || VerbOf(o_.params.test) == Verb::kSend) return absl::OkStatus();
    return PerftestWarmUp(verbs_, o_.local.timeout, cancel_);
  }
  absl::StatusOr<pt::BwReport> Timed() {
    absl::StatusOr<Measurement> m =
        RunVerbsClient(verbs_, o_.local.timeout, cancel_, nullptr, /*stamp_posts=*/true);
    if (!m.ok()) return m.status();
    return Figures(*m, o_, verbs_.params().size);
  }
  absl::StatusOr<pt::BwReport> Receive() {
    absl::StatusOr<Measurement> m = RunPerftestSendBwServer(verbs_, o_.local.timeout, cancel_);
    if (!m.ok()) return m.status();
    return Figures(*m, o_, verbs_.params().size);
  }

  PerftestOob& oob_;
  const PerftestServerOptions& o_;
  VerbsResources& verbs_;
  const Connected& c_;
  const Canceller* cancel_;
};

absl::StatusOr<PerftestResult> RunSession(PerftestOob& oob, const PerftestServerOptions& o,
                                          VerbsResources& verbs, const Canceller* cancel) {
  absl::StatusOr<Connected> c = Connect(oob, o, verbs, cancel);
  if (!c.ok()) return c.status();
  absl::StatusOr<PerftestResult> r = Session(oob, o, verbs, *c, cancel).Run();
  if (r.ok()) {
    r->device = verbs.device();
    r->gid_index = verbs.gid_index();
    r->memory = verbs.memory();
    r->placement = verbs.placement();
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    if (o.params.rdma_cm && verbs.num_qps() > 0 &&
        ibv_query_qp(verbs.qp(0), &attr, IBV_QP_AV, &init) == 0 && attr.ah_attr.is_global) {
      r->traffic_class = attr.ah_attr.grh.traffic_class;
    }
  }
  return r;
}

absl::Status Supported(const PerftestServerOptions& o) {
  FABRIC_RETURN_IF_ERROR(CheckGpuMemory(o.params, o.local));
  return ValidateParams(o.params);
}

// -R: the test runs on the device and port rdma_cm connected the exchange through; -d, when
// given, must name it.
absl::Status UseCmDevice(const PerftestOob& oob, const PerftestServerOptions& o,
                         VerbsResources& verbs) {
  verbs.UseDevice(oob.cm_context(), oob.cm_port());
  if (!o.local.device.empty() && o.local.device != verbs.device()) {
    return absl::FailedPreconditionError(absl::StrCat("rdma_cm connects ", oob.peer(), " through ",
                                                      verbs.device(), ", not ", o.local.device));
  }
  FABRIC_RETURN_IF_ERROR(verbs.QueryDevice());
  return verbs.Place();
}

// The exchange outlives the test's verbs objects: with -R they live on the device rdma_cm opened
// for it, which closes when its last id goes.
absl::StatusOr<PerftestResult> Finish(absl::StatusOr<PerftestResult> r, VerbsResources& verbs,
                                      std::unique_ptr<PerftestOob>& oob) {
  absl::Status released = verbs.Release();
  oob.reset();
  if (!r.ok()) return r.status();
  if (!released.ok()) return Prefixed(released, "releasing");
  return r;
}

}  // namespace

absl::StatusOr<PerftestResult> ServePerftestClient(const PerftestServerOptions& o,
                                                   const Canceller* cancel,
                                                   const std::function<void()>& listening) {
  FABRIC_RETURN_IF_ERROR(Supported(o));
  AllowList allow;
  if (o.allow) {
    allow = *o.allow;
  } else {
    absl::StatusOr<AllowList> host = AllowList::HostSubnets();
    if (!host.ok()) return host.status();
    allow = *host;
  }
  std::unique_ptr<PerftestOob> oob;
  VerbsResources verbs(false, o.params, o.local);
  absl::StatusOr<PerftestResult> served = [&]() -> absl::StatusOr<PerftestResult> {
    if (o.params.rdma_cm) {
      absl::StatusOr<std::unique_ptr<PerftestOob>> cm =
          AcceptCmOob(o.bind, o.port, allow, o.local.timeout, cancel, listening);
      if (!cm.ok()) return cm.status();
      oob = *std::move(cm);
      FABRIC_RETURN_IF_ERROR(UseCmDevice(*oob, o, verbs));
    } else {
      // The device first: a missing device or a down port is said before any client waits.
      FABRIC_RETURN_IF_ERROR(verbs.OpenDevice());
      absl::StatusOr<Fd> own = o.listener >= 0 ? Fd() : ListenTcp(o.bind, o.port);
      if (!own.ok()) return own.status();
      if (listening) listening();
      Acceptor acceptor;
      absl::StatusOr<Fd> fd =
          AcceptTcp(o.listener >= 0 ? o.listener : own->get(),
                    Deadline::At(std::numeric_limits<int64_t>::max()), cancel, &acceptor);
      if (!fd.ok()) return fd.status();
      oob = TcpOob(*std::move(fd), /*client=*/false, o.local.timeout, cancel);
      if (!allow.Allows(oob->peer())) {
        return absl::PermissionDeniedError(absl::StrCat(
            "perftest client ", oob->peer(), " is not in the allow-list (", allow.ToString(), ")"));
      }
    }
    if (o.admit) FABRIC_RETURN_IF_ERROR(o.admit(verbs.device()));
    absl::StatusOr<PerftestResult> r = RunSession(*oob, o, verbs, cancel);
    if (r.ok()) r->peer = oob->peer();
    return r;
  }();
  return Finish(std::move(served), verbs, oob);
}

absl::StatusOr<PerftestResult> RunPerftestClient(const PerftestServerOptions& o,
                                                 const std::string& host, absl::Duration retry,
                                                 const Canceller* cancel) {
  FABRIC_RETURN_IF_ERROR(Supported(o));
  std::unique_ptr<PerftestOob> oob;
  VerbsResources verbs(true, o.params, o.local);
  absl::StatusOr<PerftestResult> run = [&]() -> absl::StatusOr<PerftestResult> {
    if (o.params.rdma_cm) {
      absl::StatusOr<std::unique_ptr<PerftestOob>> cm =
          ConnectCmOob(host, o.port, o.local.timeout, Deadline::In(retry), cancel);
      if (!cm.ok()) return cm.status();
      oob = *std::move(cm);
      FABRIC_RETURN_IF_ERROR(UseCmDevice(*oob, o, verbs));
    } else {
      FABRIC_RETURN_IF_ERROR(verbs.OpenDevice());
      absl::StatusOr<Fd> fd =
          ConnectTcp(host, o.port, Deadline::In(o.local.timeout), cancel, Deadline::In(retry));
      if (!fd.ok()) return fd.status();
      oob = TcpOob(*std::move(fd), /*client=*/true, o.local.timeout, cancel);
    }
    return RunSession(*oob, o, verbs, cancel);
  }();
  return Finish(std::move(run), verbs, oob);
}

absl::StatusOr<ProbeResult> RunPerftestProbe(const ProbeSpec& spec) {
  // perftest's -D gives latency as an average alone, which a result's figures cannot carry: the
  // schedule asks a perftest peer's latency by iterations (ValidateSchedule).
  if (IsLatency(spec.params.test) && spec.params.duration_mode()) {
    return absl::InvalidArgumentError(
        "a perftest peer's latency tests run by iterations here (its -D gives an average only)");
  }
  PerftestServerOptions o;
  o.params = spec.params;
  o.params.cq_mod = PerftestCqMod(o.params);
  o.gbits = true;
  o.local = spec.local;
  o.port = spec.port;
  absl::StatusOr<PerftestResult> r =
      RunPerftestClient(o, spec.host, spec.connect_retry, spec.cancel);
  if (!r.ok()) return r.status();
  ProbeResult out;
  out.params = o.params;
  out.device = r->device;
  out.ib_port = o.local.ib_port;
  out.gid_index = r->gid_index;
  out.memory = r->memory;
  out.peer = spec.host;
  out.clock = "CLOCK_MONOTONIC_RAW, perftest's arithmetic";
  if (r->bw) {
    out.iterations = r->bw->iters;
    BandwidthResult& bw = out.bw.emplace();
    // perftest reports no peak in duration mode or past 20000 iterations (0.00).
    if (r->bw->peak > 0) bw.peak_gbps = r->bw->peak;
    bw.avg_gbps = r->bw->average;
    bw.msg_rate_mpps = r->bw->msg_rate;
  }
  if (r->lat) {
    out.iterations = r->lat->iters;
    LatencyResult& lat = out.lat.emplace();
    // perftest drops the two largest of its iters - 1 samples.
    lat.samples = r->lat->iters > 3 ? r->lat->iters - 3 : 0;
    lat.min_us = r->lat->t_min;
    lat.max_us = r->lat->t_max;
    lat.typical_us = r->lat->typical;
    lat.avg_us = r->lat->average;
    lat.stdev_us = r->lat->stdev;
    lat.p99_us = r->lat->p99;
    lat.p999_us = r->lat->p999;
  }
  return out;
}

}  // namespace fabric::probes
