#include "agent/fabric/probes/verbs_loops.h"

#include <algorithm>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/common/status.h"
#include "agent/common/strings.h"
#include "agent/fabric/probes/clock.h"
#include "agent/fabric/probes/send_window.h"
#include "agent/fabric/probes/spin.h"

namespace fabric::probes {
namespace {

constexpr int kPollBatch = 16;
constexpr uint8_t kStopMark = 0xff;

// The ping-pong marker of message k in the last byte: 1..127, never the stop mark, never the
// previous message's value.
inline uint8_t Seq(uint64_t k) { return static_cast<uint8_t>((k - 1) % 127 + 1); }

std::string WcError(const ibv_wc& wc, std::string_view where) {
  std::string hint;
  switch (wc.status) {
    case IBV_WC_RETRY_EXC_ERR:
      hint = " (the peer stopped answering: it is gone or unreachable)";
      break;
    case IBV_WC_RNR_RETRY_EXC_ERR:
      hint = " (the peer had no receive posted)";
      break;
    case IBV_WC_REM_ACCESS_ERR:
      hint = " (the peer rejected the rkey or address)";
      break;
    case IBV_WC_WR_FLUSH_ERR:
      hint = " (the QP had already failed)";
      break;
    default:
      break;
  }
  return absl::StrCat(Av(where), ": completion error '", ibv_wc_status_str(wc.status), "'", hint,
                      " (vendor error 0x", absl::Hex(wc.vendor_err), ")");
}

// One test's loops over `v_`'s QPs.
class Loops {
 public:
  Loops(VerbsResources& v, absl::Duration timeout, const Canceller* cancel, const Channel* watch,
        bool stamp_posts = false)
      : v_(v),
        p_(v.params()),
        scq_(v.send_cq()),
        rcq_(v.recv_cq()),
        timeout_(timeout),
        cancel_(cancel),
        watch_(watch),
        stamp_posts_(stamp_posts) {}

  absl::StatusOr<Measurement> RunClient();
  absl::StatusOr<Measurement> RunPerftestLat(bool server);
  absl::StatusOr<Measurement> RunBi(bool server);
  absl::Status WarmUp();
  absl::Status RunServer(Channel& ch);
  // send_bw's receiver: until the client's Done on `done` (duration mode, or a client that gave
  // up) or, with none, until the iterations (or the duration after the first message) are over;
  // the first and last receive's times in `m` (perftest's server figures).
  absl::Status ReceiveSends(const Channel* done, Measurement* m);

 private:
  // Duration mode, from now: the warm-up margin ends at `warm_end`, the measured window at `end`.
  struct Window {
    int64_t warm_end;
    int64_t end;
    // `now` is in the measured window.
    bool Samples(int64_t now) const { return now >= warm_end && now < end; }
  };
  Window DurationWindow() const {
    const int64_t warm_end = NowNs() + absl::ToInt64Nanoseconds(p_.margin);
    return {warm_end, warm_end + absl::ToInt64Nanoseconds(p_.duration)};
  }
  absl::StatusOr<Measurement> RunBw();
  absl::Status CountSends(std::span<const ibv_wc> wcs, SendWindow& sends) const;
  absl::Status Repost(std::span<const ibv_wc> wcs, uint64_t received);
  template <typename RoundTrip>
  absl::StatusOr<Measurement> TimeRoundTrips(RoundTrip round_trip);
  template <typename AwaitReply>
  absl::StatusOr<Measurement> RunPingPongClient(std::string_view noun, AwaitReply await_reply);
  template <typename AwaitPing>
  absl::Status RunPingPongServer(std::string_view reply_completion, AwaitPing await_ping);
  absl::StatusOr<Measurement> RunWriteLatClient();
  absl::StatusOr<Measurement> RunSendLatClient();
  absl::StatusOr<Measurement> RunReadLatClient();
  absl::Status RunWriteLatServer();
  absl::Status RunSendLatServer();
  absl::Status RunSendBwServer(Channel& ch);
  // Waits for one completion on `cq` into `wc`.
  absl::Status WaitCompletion(ibv_cq* cq, Spin& spin, std::string_view what, ibv_wc* wc);
  // Waits for one send completion (latency tests signal every message).
  absl::Status WaitSend(Spin& spin, std::string_view what);
  absl::Status WaitRecv(Spin& spin, std::string_view what);
  // Posts one work request on QP 0 and waits for its completion: `wr` must be signalled.
  absl::Status PostAndWait(ibv_send_wr& wr, Spin& spin, std::string_view what);

  VerbsResources& v_;
  const ProbeParams& p_;
  ibv_cq* const scq_;
  ibv_cq* const rcq_;
  absl::Duration timeout_;
  const Canceller* cancel_;
  const Channel* watch_;  // the control connection, watched while measuring
  bool stamp_posts_;      // bandwidth: Measurement::post_ns
};

absl::Status Loops::WaitCompletion(ibv_cq* cq, Spin& spin, std::string_view what, ibv_wc* wc) {
  for (;;) {
    const int n = ibv_poll_cq(cq, 1, wc);
    if (n > 0) {
      if (wc->status != IBV_WC_SUCCESS) return absl::UnavailableError(WcError(*wc, what));
      spin.Progress();
      return absl::OkStatus();
    }
    if (n < 0) return absl::UnavailableError("ibv_poll_cq failed (device removed?)");
    if (spin.Tick()) return spin.Why(what);
  }
}

absl::Status Loops::WaitSend(Spin& spin, std::string_view what) {
  ibv_wc wc;
  return WaitCompletion(scq_, spin, what, &wc);
}

absl::Status Loops::WaitRecv(Spin& spin, std::string_view what) {
  ibv_wc wc;
  FABRIC_RETURN_IF_ERROR(WaitCompletion(rcq_, spin, what, &wc));
  return v_.PostRecv(static_cast<uint32_t>(wc.wr_id));
}

absl::Status Loops::PostAndWait(ibv_send_wr& wr, Spin& spin, std::string_view what) {
  FABRIC_RETURN_IF_ERROR(v_.PostSend(0, &wr));
  return WaitSend(spin, what);
}

absl::StatusOr<Measurement> Loops::RunClient() {
  switch (p_.test) {
    case TestKind::kWriteBw:
    case TestKind::kSendBw:
    case TestKind::kReadBw:
      return RunBw();
    case TestKind::kWriteLat:
      return RunWriteLatClient();
    case TestKind::kSendLat:
      return RunSendLatClient();
    case TestKind::kReadLat:
      return RunReadLatClient();
  }
  return absl::InternalError("unknown test");
}

absl::Status Loops::RunServer(Channel& ch) {
  switch (p_.test) {
    case TestKind::kWriteLat:
      return RunWriteLatServer();
    case TestKind::kSendLat:
      return RunSendLatServer();
    case TestKind::kSendBw:
      return RunSendBwServer(ch);
    default:
      // write_bw, read_bw, read_lat: the server's memory is the target; its CPU stays out.
      return absl::OkStatus();
  }
}

absl::StatusOr<Measurement> Loops::RunBw() {
  const bool dur = p_.duration_mode();
  const uint64_t total = dur ? 0 : p_.iterations * p_.num_qps;
  SendWindow sends(v_);
  Measurement m;
  Spin spin(timeout_, cancel_, watch_);
  ibv_wc wc[kPollBatch];
  const auto [warm_end, end] = DurationWindow();
  bool in_window = !dur;
  bool stopping = false;
  uint64_t window_base = 0;
  const bool stamp = stamp_posts_ && !dur;
  if (stamp) m.post_ns.reserve(total);
  if (!dur) m.first_ns = NowNs();

  for (;;) {
    for (uint32_t q = 0; q < p_.num_qps; ++q) {
      FABRIC_RETURN_IF_ERROR(sends.Fill(q, stamp ? &m.post_ns : nullptr));
    }
    const int n = ibv_poll_cq(scq_, kPollBatch, wc);
    if (n > 0) {
      FABRIC_RETURN_IF_ERROR(CountSends(std::span<const ibv_wc>(wc, n), sends));
      const int64_t now = NowNs();
      spin.Progress();
      if (!dur) {
        m.marks.push_back({now, sends.completed()});
        m.last_ns = now;
        if (sends.completed() == total) break;
      } else if (!in_window && !stopping) {
        if (now >= warm_end) {
          in_window = true;
          window_base = sends.completed();
          m.first_ns = now;
        }
      } else if (in_window) {
        m.messages = sends.completed() - window_base;
        m.marks.push_back({now, m.messages});
        m.last_ns = now;
        if (now >= end) {
          in_window = false;
          stopping = true;
          // One last signalled message on each QP, so that its completion covers the tail.
          sends.Stop();
        }
      }
    } else if (n < 0) {
      return absl::UnavailableError("ibv_poll_cq failed (device removed?)");
    } else if (spin.Tick()) {
      return spin.Why(absl::StrCat("completions after ", sends.completed(), " messages"));
    }
    if (stopping && sends.Drained()) break;
  }
  if (!dur) m.messages = total;
  return m;
}

// perftest's run_iter_bi (send_bw -b): each side sends as RunBw does and receives as many
// messages from the peer, reposting each receive; the server sends only after its first receive.
// By iterations the figures come from the sends, as RunBw's. Duration mode, each side on its own
// clock (the client's from its start, the server's from its first receive): a margin, the window,
// a margin, sending throughout; `messages` counts the window's receives and completed sends
// (perftest adds both to its iterations) and the run stops at the last margin's end without
// waiting for what is in flight (perftest then destroys the QPs, whose peer may have stopped).
absl::StatusOr<Measurement> Loops::RunBi(bool server) {
  const bool dur = p_.duration_mode();
  const uint64_t total = dur ? 0 : p_.iterations * p_.num_qps;
  SendWindow sends(v_);
  Measurement m;
  // The server's first receive may come a peer's set-up later.
  Spin spin(timeout_ + (server ? p_.margin : absl::ZeroDuration()), cancel_, watch_);
  ibv_wc wc[kPollBatch];
  bool holding = server;
  std::optional<Window> window;
  if (dur && !server) window = DurationWindow();
  auto sampling = [&](int64_t now) { return window && window->Samples(now); };
  uint64_t received = 0;
  const bool stamp = stamp_posts_ && !dur;
  if (stamp) m.post_ns.reserve(total);
  if (!dur) m.first_ns = NowNs();
  for (;;) {
    for (uint32_t q = 0; q < p_.num_qps && !holding; ++q) {
      FABRIC_RETURN_IF_ERROR(sends.Fill(q, stamp ? &m.post_ns : nullptr));
    }
    const int nr = ibv_poll_cq(rcq_, kPollBatch, wc);
    if (nr > 0) {
      FABRIC_RETURN_IF_ERROR(Repost(std::span<const ibv_wc>(wc, nr), received));
      if (holding && dur) window = DurationWindow();
      holding = false;
      received += static_cast<uint64_t>(nr);
      if (dur && sampling(NowNs())) m.messages += static_cast<uint64_t>(nr);
      spin.Progress();
    }
    const uint64_t before = sends.completed();
    const int ns = nr < 0 ? 0 : ibv_poll_cq(scq_, kPollBatch, wc);
    if (ns > 0) {
      FABRIC_RETURN_IF_ERROR(CountSends(std::span<const ibv_wc>(wc, ns), sends));
      const int64_t now = NowNs();
      spin.Progress();
      if (!dur) {
        m.marks.push_back({now, sends.completed()});
      } else if (sampling(now)) {
        m.messages += sends.completed() - before;
      }
    }
    if (nr < 0 || ns < 0) return absl::UnavailableError("ibv_poll_cq failed (device removed?)");
    if (!dur && sends.completed() == total && received >= total) break;
    if (dur && window && NowNs() >= window->end + absl::ToInt64Nanoseconds(p_.margin)) break;
    if (nr == 0 && ns == 0 && spin.Tick()) {
      return spin.Why(
          absl::StrCat("the run after ", sends.completed(), " sends and ", received, " receives"));
    }
  }
  if (dur) {
    m.first_ns = window->warm_end;
    m.last_ns = window->end;
  } else {
    m.messages = total;
    m.last_ns = NowNs();  // perftest's end without a peak: the loop's
  }
  return m;
}

// Send completions into `sends`; the first failed one is the test's error.
absl::Status Loops::CountSends(std::span<const ibv_wc> wcs, SendWindow& sends) const {
  for (const ibv_wc& wc : wcs) {
    if (wc.status != IBV_WC_SUCCESS) {
      return absl::UnavailableError(WcError(
          wc, absl::StrCat(Av(TestName(p_.test)), " after ", sends.completed(), " messages")));
    }
    sends.Complete(wc.wr_id);
  }
  return absl::OkStatus();
}

// Receive completions, each receive posted again on its QP (wr_id); the first failed one is the
// test's error, `received` the count before them.
absl::Status Loops::Repost(std::span<const ibv_wc> wcs, uint64_t received) {
  for (const ibv_wc& wc : wcs) {
    if (wc.status != IBV_WC_SUCCESS) {
      return absl::UnavailableError(
          WcError(wc, absl::StrCat("receive after ", received, " messages")));
    }
    FABRIC_RETURN_IF_ERROR(v_.PostRecv(static_cast<uint32_t>(wc.wr_id)));
  }
  return absl::OkStatus();
}

// perftest's latency loop on QP 0: `round_trip(k)` posts message k and waits for what ends it,
// for k = 1.. until the iterations are done or, in duration mode, the margin and then the
// duration have passed. The time is read just before each post, so a sample is the time between
// two successive posts; in duration mode only those after the warm-up margin are kept. (A
// template, so that the body is inlined into the timed loop.)
template <typename RoundTrip>
absl::StatusOr<Measurement> Loops::TimeRoundTrips(RoundTrip round_trip) {
  const bool dur = p_.duration_mode();
  Measurement m;
  if (!dur) m.posts.reserve(p_.iterations);
  const auto [warm_end, end] = DurationWindow();
  for (uint64_t k = 1;; ++k) {
    const int64_t now = NowNs();
    if (dur ? now >= end : k > p_.iterations) break;
    if (!dur || now >= warm_end) m.posts.push_back(now);
    FABRIC_RETURN_IF_ERROR(round_trip(k));
  }
  return m;
}

// write_lat and send_lat: message k carries Seq(k) in its last byte; `await_reply(spin, k)` waits
// for the server's answer. In duration mode a last message carries the stop mark, which ends the
// server's loop.
template <typename AwaitReply>
absl::StatusOr<Measurement> Loops::RunPingPongClient(std::string_view noun,
                                                     AwaitReply await_reply) {
  uint8_t* out_last = v_.outbox(0) + p_.size - 1;
  ibv_sge sge = v_.Sge(v_.outbox(0));
  ibv_send_wr wr = v_.WorkRequest(0, sge, IBV_SEND_SIGNALED);
  const std::string completion = absl::StrCat("the ", Av(noun), "'s completion");
  Spin spin(timeout_, cancel_, watch_);
  absl::StatusOr<Measurement> m = TimeRoundTrips([&](uint64_t k) -> absl::Status {
    *out_last = Seq(k);
    FABRIC_RETURN_IF_ERROR(PostAndWait(wr, spin, completion));
    return await_reply(spin, k);
  });
  if (!m.ok()) return m;
  if (p_.duration_mode()) {
    *out_last = kStopMark;
    FABRIC_RETURN_IF_ERROR(
        PostAndWait(wr, spin, absl::StrCat("the last ", Av(noun), "'s completion")));
  }
  m->messages = m->posts.size();
  return m;
}

// The server's side of write_lat and send_lat: `await_ping(spin, k)` waits for the client's
// message k and prepares the reply; it returns true when the message was the stop mark.
template <typename AwaitPing>
absl::Status Loops::RunPingPongServer(std::string_view reply_completion, AwaitPing await_ping) {
  ibv_sge sge = v_.Sge(v_.outbox(0));
  ibv_send_wr wr = v_.WorkRequest(0, sge, IBV_SEND_SIGNALED);
  Spin spin(timeout_ + p_.margin, cancel_, watch_);
  for (uint64_t k = 1; p_.duration_mode() || k <= p_.iterations; ++k) {
    absl::StatusOr<bool> stop = await_ping(spin, k);
    if (!stop.ok()) return stop.status();
    if (*stop) break;
    FABRIC_RETURN_IF_ERROR(PostAndWait(wr, spin, reply_completion));
  }
  return absl::OkStatus();
}

absl::StatusOr<Measurement> Loops::RunWriteLatClient() {
  volatile uint8_t* in_last = v_.inbox(0) + p_.size - 1;
  return RunPingPongClient("write", [&](Spin& spin, uint64_t k) -> absl::Status {
    const uint8_t want = Seq(k);
    while (*in_last != want) {
      if (spin.Tick()) return spin.Why(absl::StrCat("the server's write ", k));
    }
    spin.Progress();
    return absl::OkStatus();
  });
}

absl::Status Loops::RunWriteLatServer() {
  volatile uint8_t* in_last = v_.inbox(0) + p_.size - 1;
  uint8_t* out_last = v_.outbox(0) + p_.size - 1;
  auto await_write = [&](Spin& spin, uint64_t k) -> absl::StatusOr<bool> {
    const uint8_t want = Seq(k);
    uint8_t got;
    while ((got = *in_last) != want && got != kStopMark) {
      if (spin.Tick()) return spin.Why(absl::StrCat("the client's write ", k));
    }
    if (got == kStopMark) return true;
    spin.Progress();
    *out_last = want;
    return false;
  };
  return RunPingPongServer("the write's completion", await_write);
}

absl::StatusOr<Measurement> Loops::RunSendLatClient() {
  return RunPingPongClient("send", [&](Spin& spin, uint64_t k) {
    return WaitRecv(spin, absl::StrCat("the server's reply ", k));
  });
}

absl::Status Loops::RunSendLatServer() {
  volatile uint8_t* in_last = v_.inbox(0) + p_.size - 1;
  auto await_send = [&](Spin& spin, uint64_t k) -> absl::StatusOr<bool> {
    FABRIC_RETURN_IF_ERROR(WaitRecv(spin, absl::StrCat("the client's send ", k)));
    return *in_last == kStopMark;
  };
  return RunPingPongServer("the reply's completion", await_send);
}

absl::StatusOr<Measurement> Loops::RunReadLatClient() {
  ibv_sge sge = v_.Sge(v_.outbox(0));
  ibv_send_wr wr = v_.WorkRequest(0, sge, IBV_SEND_SIGNALED);
  Spin spin(timeout_, cancel_, watch_);
  absl::StatusOr<Measurement> m =
      TimeRoundTrips([&](uint64_t k) { return PostAndWait(wr, spin, absl::StrCat("read ", k)); });
  if (!m.ok()) return m;
  // The last read's completion closes the last sample.
  m->posts.push_back(NowNs());
  m->messages = m->posts.size() - 1;
  return m;
}

absl::Status Loops::RunSendBwServer(Channel& ch) {
  Measurement unused;
  return ReceiveSends(&ch, &unused);
}

absl::Status Loops::ReceiveSends(const Channel* done, Measurement* m) {
  const bool dur = p_.duration_mode();
  const uint64_t expected = dur ? 0 : p_.iterations * p_.num_qps;
  uint64_t received = 0;
  ibv_wc wc[kPollBatch];
  // The client's warm-up counts as traffic, but its set-up may take a margin's time.
  Spin spin(timeout_ + p_.margin, cancel_);
  uint32_t idle = 0;
  // Without a control channel (perftest's client), a duration run is timed from the first
  // message: a margin, the window, a margin (perftest's catch_alarm).
  std::optional<Window> window;
  for (;;) {
    const int n = ibv_poll_cq(rcq_, kPollBatch, wc);
    if (n > 0) {
      const int64_t now = NowNs();
      FABRIC_RETURN_IF_ERROR(Repost(std::span<const ibv_wc>(wc, n), received));
      if (received == 0) {
        m->first_ns = now;
        if (dur && done == nullptr) window = DurationWindow();
      }
      received += static_cast<uint64_t>(n);
      m->last_ns = now;
      spin.Progress();
      idle = 0;
      if (!dur && received >= expected) break;
      if (window && window->Samples(now)) m->messages += static_cast<uint64_t>(n);
      if (window && now >= window->end + absl::ToInt64Nanoseconds(p_.margin)) break;
      continue;
    }
    if (n < 0) return absl::UnavailableError("ibv_poll_cq failed (device removed?)");
    if (window && NowNs() >= window->end + absl::ToInt64Nanoseconds(p_.margin)) break;
    // In duration mode the client's Done ends the test; in either mode it means the client
    // has finished (or given up), so stop receiving.
    if (done != nullptr && (++idle & 1023) == 0 && done->Readable()) break;
    if (spin.Tick()) return spin.Why(absl::StrCat("receives after ", received, " messages"));
  }
  if (!dur) m->messages = received;
  // perftest times the window itself (its alarm's states), not the receives in it.
  if (window) {
    m->first_ns = window->warm_end;
    m->last_ns = window->end;
  }
  return absl::OkStatus();
}

}  // namespace

// perftest's run_iter_lat_write and run_iter_lat_send, as they behave on the wire. write: each
// side RDMA-writes message k with (k mod 256) in its last byte and waits for the peer's message k
// in its own buffer before sending k + 1; the server sends first. send: the same with sends, each
// awaited as a receive completion (reposted at once); the client sends first. A sample is the
// time between two of this side's posts. Duration mode (perftest's catch_alarm, from this side's
// own start): a margin, the window, a margin; `messages` counts the completions in the window,
// and either side stops on its own clock, leaving the peer to time out its last wait the same.
absl::StatusOr<Measurement> Loops::RunPerftestLat(bool server) {
  const bool dur = p_.duration_mode();
  const uint64_t iters = dur ? UINT64_MAX : p_.iterations;
  const bool send = VerbOf(p_.test) == Verb::kSend;
  const bool first = send ? !server : server;  // sends before it has received anything
  volatile uint8_t* poll = v_.inbox(0) + p_.size - 1;
  uint8_t* post = v_.outbox(0) + p_.size - 1;
  ibv_sge sge = v_.Sge(v_.outbox(0));
  ibv_send_wr wr = v_.WorkRequest(0, sge, IBV_SEND_SIGNALED);
  Spin spin(timeout_, cancel_, watch_);
  const Window window = dur ? DurationWindow() : Window{};
  const int64_t stop = window.end + absl::ToInt64Nanoseconds(p_.margin);
  if (dur) spin.EndAt(stop);
  // A wait the run's end cut short ends the run; any other failure is the test's.
  auto ended = [&](const absl::Status& s) { return !s.ok() && dur && spin.ended(); };
  Measurement m;
  if (!dur) m.posts.reserve(iters);
  uint64_t scnt = 0, ccnt = 0, rcnt = 0;
  while (scnt < iters || ccnt < iters || rcnt < iters) {
    if (rcnt < iters && !(scnt < 1 && first)) {
      ++rcnt;
      absl::Status got;
      if (send) {
        got = WaitRecv(spin, absl::StrCat("the peer's message ", rcnt));
      } else {
        while (*poll != static_cast<uint8_t>(rcnt)) {
          if (spin.Tick()) break;
        }
        if (*poll == static_cast<uint8_t>(rcnt)) {
          spin.Progress();
        } else {
          got = spin.Why(absl::StrCat("the peer's message ", rcnt));
        }
      }
      if (ended(got)) break;
      FABRIC_RETURN_IF_ERROR(got);
    }
    if (scnt < iters) {
      if (!dur) m.posts.push_back(NowNs());
      *post = static_cast<uint8_t>(++scnt);
      FABRIC_RETURN_IF_ERROR(v_.PostSend(0, &wr));
    }
    if (dur && NowNs() >= stop) break;
    if (ccnt < iters) {
      ibv_wc wc;
      absl::Status done =
          WaitCompletion(scq_, spin, absl::StrCat("message ", ccnt + 1, "'s completion"), &wc);
      if (ended(done)) break;
      FABRIC_RETURN_IF_ERROR(done);
      ++ccnt;
      if (dur) {
        const int64_t now = NowNs();
        if (window.Samples(now)) ++m.messages;
      }
    }
  }
  if (!dur) m.messages = iters;
  return m;
}

absl::Status Loops::WarmUp() {
  Spin spin(timeout_, cancel_, watch_);
  for (uint32_t q = 0; q < p_.num_qps; ++q) {
    ibv_sge sge = v_.Sge(v_.outbox(q));
    ibv_send_wr wr = v_.WorkRequest(q, sge, IBV_SEND_SIGNALED);
    for (uint32_t i = 0; i < p_.tx_depth; ++i) FABRIC_RETURN_IF_ERROR(v_.PostSend(q, &wr));
    for (uint32_t i = 0; i < p_.tx_depth; ++i) {
      FABRIC_RETURN_IF_ERROR(WaitSend(spin, absl::StrCat("warm-up message ", i + 1)));
    }
  }
  return absl::OkStatus();
}

absl::Status PerftestWarmUp(VerbsResources& verbs, absl::Duration timeout,
                            const Canceller* cancel) {
  return Loops(verbs, timeout, cancel, nullptr).WarmUp();
}

absl::StatusOr<Measurement> RunPerftestLat(VerbsResources& verbs, bool server,
                                           absl::Duration timeout, const Canceller* cancel) {
  return Loops(verbs, timeout, cancel, nullptr).RunPerftestLat(server);
}

absl::StatusOr<Measurement> RunPerftestSendBwServer(VerbsResources& verbs, absl::Duration timeout,
                                                    const Canceller* cancel) {
  Measurement m;
  FABRIC_RETURN_IF_ERROR(Loops(verbs, timeout, cancel, nullptr).ReceiveSends(nullptr, &m));
  return m;
}

absl::StatusOr<Measurement> RunPerftestBi(VerbsResources& verbs, bool server,
                                          absl::Duration timeout, const Canceller* cancel) {
  return Loops(verbs, timeout, cancel, nullptr, /*stamp_posts=*/true).RunBi(server);
}

absl::StatusOr<Measurement> RunVerbsClient(VerbsResources& verbs, absl::Duration timeout,
                                           const Canceller* cancel, const Channel* watch,
                                           bool stamp_posts) {
  return Loops(verbs, timeout, cancel, watch, stamp_posts).RunClient();
}

absl::Status RunVerbsServer(VerbsResources& verbs, absl::Duration timeout, const Canceller* cancel,
                            const Channel* watch, Channel& ch) {
  return Loops(verbs, timeout, cancel, watch).RunServer(ch);
}

}  // namespace fabric::probes
