#include "agent/fabric/probes/perftest_peer.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <span>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/common/status.h"
#include "agent/fabric/perftest/figures.h"
#include "agent/fabric/probes/engine.h"
#include "agent/fabric/probes/perftest_oob.h"
#include "agent/fabric/probes/rdma_cm.h"
#include "agent/fabric/probes/verbs_loops.h"
#include "agent/fabric/probes/verbs_resources.h"

namespace fabric::probes {
namespace {

namespace pt = ::fabric::perftest;

static_assert(sizeof(ibv_device_attr) == pt::kDeviceAttrSize,
              "perftest sends struct ibv_device_attr raw");

absl::Status Prefixed(const absl::Status& s, const char* step) {
  return absl::Status(s.code(), absl::StrCat(step, ": ", s.message()));
}

// -m's bytes as the verbs enum (256 -> IBV_MTU_256 = 1, ... 4096 -> 5); the CLI admits only those.
ibv_mtu MtuEnum(int bytes) {
  int e = 1;
  while (e < 5 && (128 << e) < bytes) ++e;
  return static_cast<ibv_mtu>(e);
}

uint32_t CacheLine() {
  const long n = sysconf(_SC_LEVEL1_DCACHE_LINESIZE);
  return n > 0 ? static_cast<uint32_t>(n) : 64;
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

pt::Negotiate LocalNegotiate(const PerftestServerOptions& o, const ibv_device_attr& attr) {
  pt::Negotiate n;
  n.test_method = o.params.all_sizes ? pt::kMethodAll : pt::kMethodRegular;
  n.verb = PerftestVerb(o.params.test);
  n.tst = IsLatency(o.params.test) ? pt::kTstLatency : pt::kTstBandwidth;
  n.report_fmt = o.gbits ? pt::kReportGbits : pt::kReportMbytes;
  n.size = o.params.size;
  n.test_type = o.params.duration_mode() ? pt::kDuration : pt::kIterations;
  n.iters = o.params.duration_mode() ? 0 : o.params.iterations;
  n.num_of_qps = static_cast<int32_t>(o.params.num_qps);
  // perftest's -D is the whole run: the window and a margin either side (PerftestParams).
  n.duration =
      o.params.duration_mode()
          ? static_cast<int32_t>(absl::ToInt64Seconds(o.params.duration + 2 * o.params.margin))
          : 5;
  std::memcpy(n.device_attr.data(), &attr, sizeof attr);
  return n;
}

// Version, system data, MTU and (6.28+) the parameters; returns the MTU both use.
absl::StatusOr<ibv_mtu> Prologue(PerftestOob& oob, const PerftestServerOptions& o,
                                 const VerbsResources& verbs, pt::Version* peer,
                                 uint32_t* cycle_buffer, uint16_t* out_reads) {
  const auto ours = pt::EncodeVersion(pt::kOurVersion);
  std::array<uint8_t, pt::kVersionSize> theirs{};
  FABRIC_RETURN_IF_ERROR(oob.Exchange(ours, theirs, "waiting for the perftest version"));
  absl::StatusOr<pt::Version> v = pt::DecodeVersion(theirs);
  if (!v.ok()) return v.status();
  *peer = *v;

  std::array<uint8_t, 4> in{};
  const long page = sysconf(_SC_PAGESIZE);
  FABRIC_RETURN_IF_ERROR(oob.Exchange(pt::EncodeU32(page > 0 ? static_cast<uint32_t>(page) : 4096),
                                      in, "waiting for the page size"));
  absl::StatusOr<uint32_t> their_page = pt::DecodePageSize(in);
  if (!their_page.ok()) return their_page.status();
  *cycle_buffer = std::max<uint32_t>(*their_page, page > 0 ? page : 4096);
  FABRIC_RETURN_IF_ERROR(
      oob.Exchange(pt::EncodeU32(CacheLine()), in, "waiting for the cache line size"));

  int my_mtu = static_cast<int>(verbs.port_attr().active_mtu);
  if (o.mtu > 0) my_mtu = std::min(my_mtu, static_cast<int>(MtuEnum(o.mtu)));
  std::array<uint8_t, pt::kMtuSize> mtu_in{};
  FABRIC_RETURN_IF_ERROR(oob.Exchange(pt::EncodeMtu(my_mtu), mtu_in, "waiting for the MTU"));
  absl::StatusOr<int> their_mtu = pt::DecodeMtu(mtu_in);
  if (!their_mtu.ok()) return their_mtu.status();

  *out_reads = static_cast<uint16_t>(std::clamp(verbs.device_attr().max_qp_rd_atom, 1, 0xffff));
  if (pt::Negotiates(*peer)) {
    // 320 bytes from perftest builds with mlx5dv (the usual), else 312, and nothing says which:
    // a client sends the larger; a server reads what came and answers in its size.
    constexpr char kWhat[] = "waiting for the negotiated parameters";
    pt::Negotiate local = LocalNegotiate(o, verbs.device_attr());
    if (oob.client()) FABRIC_RETURN_IF_ERROR(oob.Write(pt::EncodeNegotiate(local), kWhat));
    absl::StatusOr<std::vector<uint8_t>> remote = oob.ReadNegotiation(kWhat);
    if (!remote.ok()) return remote.status();
    if (!oob.client()) {
      local.mlx5dv = remote->size() == pt::kNegotiateSizeMlx5dv;
      FABRIC_RETURN_IF_ERROR(oob.Write(pt::EncodeNegotiate(local), kWhat));
    }
    absl::StatusOr<pt::Negotiate> r = pt::DecodeNegotiate(*remote);
    if (!r.ok()) return r.status();
    if (std::optional<std::string> differs = pt::FirstMismatch(local, *r)) {
      return absl::FailedPreconditionError(
          absl::StrCat("the perftest ", peer->text, oob.client() ? " server" : " client",
                       " runs another test:", *differs, " (give both ends the same flags)"));
    }
    if (r->MaxQpRdAtom() > 0 && r->MaxQpRdAtom() < *out_reads) {
      *out_reads = static_cast<uint16_t>(r->MaxQpRdAtom());
    }
  }
  return static_cast<ibv_mtu>(std::min(my_mtu, *their_mtu));
}

// How the keys travel: as text over TCP (with the GID or without: each side reads the form its
// own settings imply), as perftest's binary struct over rdma_cm (56 bytes, 64 with 6.29 peers).
struct KeyForm {
  bool cm = false;
  bool gid = false;
  size_t cm_size = 56;
  int gid_index = -1;
};

// One round of keys, QP by QP; the peer's are returned.
absl::StatusOr<std::vector<pt::Key>> SwapKeys(PerftestOob& oob, const std::vector<pt::Key>& mine,
                                              const KeyForm& form, size_t count,
                                              absl::Duration bound) {
  std::vector<pt::Key> theirs;
  std::vector<uint8_t> in(form.cm ? form.cm_size : pt::KeySize(form.gid));
  for (size_t q = 0; q < count; ++q) {
    const std::vector<uint8_t> out = form.cm ? pt::EncodeCmKey(mine[q], form.gid_index, in.size())
                                             : pt::EncodeKey(mine[q], form.gid);
    FABRIC_RETURN_IF_ERROR(oob.Exchange(out, in, "waiting for the QP keys", bound));
    absl::StatusOr<pt::Key> k = form.cm ? pt::DecodeCmKey(in) : pt::DecodeKey(in, form.gid);
    if (!k.ok()) return k.status();
    theirs.push_back(*k);
  }
  return theirs;
}

wire::QpEndpoint EndpointOf(const pt::Key& k) {
  wire::QpEndpoint e;
  e.qpn = k.qpn;
  e.psn = k.psn;
  e.gid = k.gid;
  e.lid = k.lid;
  e.rkey = k.rkey;
  e.addr = k.vaddr;
  return e;
}

// The QPs, connected by rdma_cm (-R) between two swaps of empty keys, as perftest's
// create_rdma_cm_connection does: the server listens on the exchange's port, which the
// exchange's listener has freed; the client tries again while it is not listening yet.
absl::Status ConnectByRdmaCm(PerftestOob& oob, const PerftestServerOptions& o,
                             VerbsResources& verbs, const KeyForm& keys, const Canceller* cancel) {
  const std::vector<pt::Key> empty(1);
  RdmaCm cm(verbs, o.local, cancel);
  const bool server = !oob.client();
  if (server) FABRIC_RETURN_IF_ERROR(cm.Open(/*server=*/true, o.bind, o.port));
  FABRIC_RETURN_IF_ERROR(SwapKeys(oob, empty, keys, 1, o.local.timeout).status());
  if (server) {
    FABRIC_RETURN_IF_ERROR(cm.Accept(/*only_from=*/oob.peer()));
  } else {
    FABRIC_RETURN_IF_ERROR(cm.Open(/*server=*/false, "", 0));
    FABRIC_RETURN_IF_ERROR(cm.Connect(oob.peer(), o.port, Deadline::In(o.local.timeout)));
  }
  return SwapKeys(oob, empty, keys, 1, o.local.timeout).status();
}

// Both ends after the accept or connect: the prologue, the memory and QPs, the keys (twice, as
// perftest prints them) and the QPs connected, then one more swap on QP 0: both are ready.
struct Connected {
  std::string peer_version;
  ibv_mtu mtu = IBV_MTU_1024;
  uint16_t out_reads = 0;
  std::vector<pt::Key> mine;
  KeyForm keys;
};
absl::StatusOr<Connected> Connect(PerftestOob& oob, const PerftestServerOptions& o,
                                  VerbsResources& verbs, const Canceller* cancel) {
  pt::Version peer;
  uint32_t cycle_buffer = 0;
  uint16_t out_reads = 0;
  absl::StatusOr<ibv_mtu> mtu = Prologue(oob, o, verbs, &peer, &cycle_buffer, &out_reads);
  if (!mtu.ok()) return mtu.status();
  Connected c;
  c.peer_version = peer.text;
  c.mtu = *mtu;
  c.out_reads = out_reads;
  c.keys.cm = o.params.rdma_cm;
  c.keys.gid = verbs.global();
  c.keys.cm_size = pt::CmKeySize(peer);
  c.keys.gid_index = verbs.gid_index();
  // Small messages land at successive cache lines within the peer's cycle buffer.
  verbs.set_min_region(std::max<uint64_t>(o.params.size, cycle_buffer));
  FABRIC_RETURN_IF_ERROR(verbs.SetupMemory());
  const uint32_t n = o.params.num_qps;
  if (o.params.rdma_cm) {
    FABRIC_RETURN_IF_ERROR(ConnectByRdmaCm(oob, o, verbs, c.keys, cancel));
  } else {
    for (uint32_t q = 0; q < n; ++q) {
      FABRIC_RETURN_IF_ERROR(verbs.CreateQp(verbs.objects().qps.emplace_back(), nullptr));
      FABRIC_RETURN_IF_ERROR(verbs.ToInit(verbs.qp(q)));
    }
  }
  for (uint32_t q = 0; q < n; ++q) {
    pt::Key k;
    k.lid = verbs.port_attr().lid;
    k.out_reads = out_reads;
    k.qpn = verbs.qp(q)->qp_num;
    k.psn = verbs.psn(q);
    k.rkey = verbs.rkey();
    k.vaddr = reinterpret_cast<uintptr_t>(verbs.inbox(q));
    std::memcpy(k.gid.data(), verbs.gid().raw, 16);
    c.mine.push_back(k);
  }
  const bool send = VerbOf(o.params.test) == Verb::kSend;
  // write_lat and read_lat swap QP 0's keys once more before the round of all QPs.
  if (IsLatency(o.params.test) && !send) {
    FABRIC_RETURN_IF_ERROR(SwapKeys(oob, c.mine, c.keys, 1, o.local.timeout).status());
  }
  absl::StatusOr<std::vector<pt::Key>> theirs = SwapKeys(oob, c.mine, c.keys, n, o.local.timeout);
  if (!theirs.ok()) return theirs.status();
  std::vector<wire::QpEndpoint> remote;
  for (const pt::Key& k : *theirs) remote.push_back(EndpointOf(k));
  verbs.set_remote(remote);
  if (!o.params.rdma_cm) {  // rdma_cm has brought them to RTS
    for (uint32_t q = 0; q < n; ++q) {
      FABRIC_RETURN_IF_ERROR(verbs.ToRtr(verbs.qp(q), verbs.remote(q), *mtu, c.keys.gid));
      FABRIC_RETURN_IF_ERROR(verbs.ToRts(verbs.qp(q), verbs.psn(q)));
    }
  }
  // Then every QP's keys again (perftest prints them) and QP 0's once more: send_bw and send_lat
  // swap QP 0's first.
  const uint32_t first = send ? 1 : n, second = send ? n : 1;
  FABRIC_RETURN_IF_ERROR(SwapKeys(oob, c.mine, c.keys, first, o.local.timeout).status());
  FABRIC_RETURN_IF_ERROR(SwapKeys(oob, c.mine, c.keys, second, o.local.timeout).status());
  return c;
}

// The reports, a field per exchange: `mine` out, the peer's back.
absl::StatusOr<pt::BwReport> SwapReports(PerftestOob& oob, const pt::BwReport& mine) {
  std::vector<uint8_t> report;
  for (const auto& field : pt::EncodeBwReport(mine)) {
    std::array<uint8_t, pt::kBwReportFieldSize> in{};
    FABRIC_RETURN_IF_ERROR(oob.Exchange(field, in, "waiting for the report"));
    report.insert(report.end(), in.begin(), in.end());
  }
  return pt::DecodeBwReport(report);
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
    for (uint64_t size : SizesToRun(o_.params)) {
      verbs_.set_size(size);
      absl::StatusOr<pt::BwReport> mine = Measure();
      if (!mine.ok()) return mine.status();
      r.bw = *mine;
      if (o_.params.all_sizes) r.sizes.push_back({*mine, std::nullopt});
    }
    FABRIC_RETURN_IF_ERROR(One(o_.local.timeout));
    FABRIC_RETURN_IF_ERROR(SwapReports(oob_, *r.bw).status());
    FABRIC_RETURN_IF_ERROR(Close(o_.local.timeout));
    return r;
  }
  // -b: both ends warm up, meet, move data and swap reports; each prints the sum.
  // With -a both ends meet again after each size's run (perftest 4.6 and later).
  absl::StatusOr<PerftestResult> Bidirectional(PerftestResult r) {
    for (uint64_t size : SizesToRun(o_.params)) {
      verbs_.set_size(size);
      FABRIC_RETURN_IF_ERROR(WarmUp());
      FABRIC_RETURN_IF_ERROR(One(o_.local.timeout));
      absl::StatusOr<pt::BwReport> mine = Timed();
      if (!mine.ok()) return mine.status();
      if (o_.params.all_sizes) FABRIC_RETURN_IF_ERROR(One(RunBound(o_.params, o_.local.timeout)));
      absl::StatusOr<pt::BwReport> theirs = SwapReports(oob_, *mine);
      if (!theirs.ok()) return theirs.status();
      r.own_average = mine->average;
      r.bw = *mine;
      r.bw->peak += theirs->peak;
      r.bw->average += theirs->average;
      r.bw->msg_rate += theirs->msg_rate;
      if (o_.params.all_sizes) r.sizes.push_back({*r.bw, r.own_average});
    }
    FABRIC_RETURN_IF_ERROR(Close(o_.local.timeout));
    return r;
  }
  // send_bw: the server posts its receives before the sync; each side reports its own figures
  // and no report crosses. -a: each size between two syncs, the receives posted once (each
  // takes the largest size, and is posted again as it completes).
  absl::StatusOr<PerftestResult> SendBw(bool server, PerftestResult r) {
    if (server) FABRIC_RETURN_IF_ERROR(verbs_.PostInitialRecvs());
    for (uint64_t size : SizesToRun(o_.params)) {
      verbs_.set_size(size);
      FABRIC_RETURN_IF_ERROR(One(o_.local.timeout));
      absl::StatusOr<pt::BwReport> mine = server ? Receive() : Measure();
      if (!mine.ok()) return mine.status();
      r.bw = *mine;
      if (!o_.params.all_sizes) continue;
      r.sizes.push_back({*mine, std::nullopt});
      FABRIC_RETURN_IF_ERROR(One(RunBound(o_.params, o_.local.timeout)));
    }
    FABRIC_RETURN_IF_ERROR(Close(o_.local.timeout));
    return r;
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
  if (o.local.gpu && IsLatency(o.params.test)) {
    return absl::UnimplementedError(
        "GPU memory is for the bandwidth tests: the latency tests poll their buffer from the CPU");
  }
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

int32_t PerftestVerb(TestKind test) {
  switch (VerbOf(test)) {
    case Verb::kSend:
      return pt::kVerbSend;
    case Verb::kRead:
      return pt::kVerbRead;
    case Verb::kWrite:
      break;
  }
  return pt::kVerbWrite;
}

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
