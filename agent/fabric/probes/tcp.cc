// The TCP transport: the same tests over the control connection, for hosts without RDMA (or
// --transport=tcp). Results are labelled "tcp"; they measure the kernel's TCP stack, not a NIC.
//
// Framing on the data phase: every message is `size` bytes and its last byte says whether more
// follow (0) or it is the last one (1); the one-byte requests of read tests say the same.
#include <poll.h>
#include <sys/socket.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/common/status.h"
#include "agent/fabric/probes/engine.h"

namespace fabric::probes {
namespace {

constexpr uint8_t kMore = 0;
constexpr uint8_t kLast = 1;

// Whether the peer has sent something, without blocking.
bool Pending(int fd) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, 0) > 0;
}

struct Window {
  Window(const ProbeParams& p, int64_t start)
      : dur(p.duration_mode()),
        warm_end(start + absl::ToInt64Nanoseconds(p.margin)),
        end(warm_end + absl::ToInt64Nanoseconds(p.duration)) {}
  bool dur;
  int64_t warm_end;
  int64_t end;
};

// Client streams messages; the server acknowledges the last with one byte.
absl::StatusOr<Measurement> StreamToServer(Channel& ch, const ProbeParams& p) {
  std::vector<uint8_t> msg(p.size, 0);
  const int fd = ch.fd();
  Measurement m;
  const int64_t start = NowNs();
  const Window w(p, start);
  bool counting = !w.dur;
  m.first_ns = start;
  uint64_t sent = 0;
  for (uint64_t k = 1;; ++k) {
    const int64_t now = w.dur ? NowNs() : 0;
    if (w.dur && !counting && now >= w.warm_end) {
      counting = true;
      m.first_ns = now;
    }
    const bool last = w.dur ? now >= w.end : k == p.iterations;
    msg.back() = last ? kLast : kMore;
    FABRIC_RETURN_IF_ERROR(WriteAll(fd, msg.data(), msg.size(), Deadline::In(ch.timeout()),
                                    ch.cancel(), absl::StrCat("sending message ", k)));
    if (counting && !(w.dur && last)) ++sent;
    if (last) break;
  }
  uint8_t ack = 0;
  FABRIC_RETURN_IF_ERROR(ReadAll(fd, &ack, 1, Deadline::In(ch.timeout()), ch.cancel(),
                                 "waiting for the server's acknowledgement"));
  m.last_ns = NowNs();
  m.messages = sent;
  return m;
}

absl::Status ReceiveStream(Channel& ch, const ProbeParams& p) {
  std::vector<uint8_t> msg(p.size);
  const int fd = ch.fd();
  for (uint64_t k = 1;; ++k) {
    FABRIC_RETURN_IF_ERROR(ReadAll(fd, msg.data(), msg.size(),
                                   Deadline::In(ch.timeout() + p.margin), ch.cancel(),
                                   absl::StrCat("receiving message ", k)));
    if (msg.back() == kLast) break;
  }
  const uint8_t ack = 1;
  return WriteAll(fd, &ack, 1, Deadline::In(ch.timeout()), ch.cancel(), "acknowledging");
}

// read_bw: the client asks (one byte), the server streams until told to stop (duration) or
// `iterations` messages; the client counts what arrives.
absl::StatusOr<Measurement> StreamFromServer(Channel& ch, const ProbeParams& p) {
  std::vector<uint8_t> msg(p.size);
  const int fd = ch.fd();
  Measurement m;
  const int64_t start = NowNs();
  const Window w(p, start);
  bool counting = !w.dur;
  bool stop_sent = false;
  m.first_ns = start;
  const uint8_t go = kMore;
  FABRIC_RETURN_IF_ERROR(WriteAll(fd, &go, 1, Deadline::In(ch.timeout()), ch.cancel(), "asking"));
  for (uint64_t k = 1;; ++k) {
    FABRIC_RETURN_IF_ERROR(ReadAll(fd, msg.data(), msg.size(), Deadline::In(ch.timeout()),
                                   ch.cancel(), absl::StrCat("receiving message ", k)));
    const int64_t now = NowNs();
    if (counting && !stop_sent) {
      ++m.messages;
      m.last_ns = now;
    }
    if (msg.back() == kLast) break;
    if (w.dur && !counting && now >= w.warm_end) {
      counting = true;
      m.first_ns = now;
    }
    if (w.dur && !stop_sent && now >= w.end) {
      const uint8_t stop = kLast;
      FABRIC_RETURN_IF_ERROR(
          WriteAll(fd, &stop, 1, Deadline::In(ch.timeout()), ch.cancel(), "asking to stop"));
      stop_sent = true;
    }
  }
  return m;
}

absl::Status StreamToClient(Channel& ch, const ProbeParams& p) {
  std::vector<uint8_t> msg(p.size, 0);
  const int fd = ch.fd();
  uint8_t req = 0;
  FABRIC_RETURN_IF_ERROR(ReadAll(fd, &req, 1, Deadline::In(ch.timeout() + p.margin), ch.cancel(),
                                 "waiting for the client's request"));
  for (uint64_t k = 1;; ++k) {
    bool last = !p.duration_mode() && k == p.iterations;
    if (p.duration_mode() && Pending(fd)) {
      FABRIC_RETURN_IF_ERROR(
          ReadAll(fd, &req, 1, Deadline::In(ch.timeout()), ch.cancel(), "reading a request"));
      last = true;
    }
    msg.back() = last ? kLast : kMore;
    FABRIC_RETURN_IF_ERROR(WriteAll(fd, msg.data(), msg.size(), Deadline::In(ch.timeout()),
                                    ch.cancel(), absl::StrCat("sending message ", k)));
    if (last) return absl::OkStatus();
  }
}

// Ping-pong: write_lat and send_lat send `size` bytes each way; read_lat sends a one-byte request
// and gets `size` bytes back. Each post time is recorded as the RDMA loops do.
absl::StatusOr<Measurement> PingPongClient(Channel& ch, const ProbeParams& p) {
  const bool read = VerbOf(p.test) == Verb::kRead;
  std::vector<uint8_t> out(read ? 1 : p.size, 0), in(p.size);
  const int fd = ch.fd();
  Measurement m;
  if (!p.duration_mode()) m.posts.reserve(p.iterations + 1);
  const Window w(p, NowNs());
  for (uint64_t k = 1;; ++k) {
    const int64_t now = NowNs();
    if (w.dur ? now >= w.end : k > p.iterations) break;
    if (!w.dur || now >= w.warm_end) m.posts.push_back(now);
    out.back() = kMore;
    FABRIC_RETURN_IF_ERROR(WriteAll(fd, out.data(), out.size(), Deadline::In(ch.timeout()),
                                    ch.cancel(), absl::StrCat("sending ping ", k)));
    FABRIC_RETURN_IF_ERROR(ReadAll(fd, in.data(), in.size(), Deadline::In(ch.timeout()),
                                   ch.cancel(), absl::StrCat("waiting for pong ", k)));
  }
  // Reads are timed to their completion, as the RDMA read loop does.
  if (read) m.posts.push_back(NowNs());
  out.back() = kLast;
  FABRIC_RETURN_IF_ERROR(WriteAll(fd, out.data(), out.size(), Deadline::In(ch.timeout()),
                                  ch.cancel(), "sending the stop"));
  m.messages = read ? m.posts.size() - 1 : m.posts.size();
  return m;
}

absl::Status PingPongServer(Channel& ch, const ProbeParams& p) {
  const bool read = VerbOf(p.test) == Verb::kRead;
  std::vector<uint8_t> in(read ? 1 : p.size), out(p.size, 0);
  const int fd = ch.fd();
  for (uint64_t k = 1;; ++k) {
    FABRIC_RETURN_IF_ERROR(ReadAll(fd, in.data(), in.size(), Deadline::In(ch.timeout() + p.margin),
                                   ch.cancel(), absl::StrCat("waiting for ping ", k)));
    if (in.back() == kLast) return absl::OkStatus();
    FABRIC_RETURN_IF_ERROR(WriteAll(fd, out.data(), out.size(), Deadline::In(ch.timeout()),
                                    ch.cancel(), absl::StrCat("sending pong ", k)));
  }
}

absl::Status Barrier(Channel& ch, bool client) {
  if (client) {
    FABRIC_RETURN_IF_ERROR(ch.Send(wire::Sync{1}));
    return ch.RecvAs<wire::Sync>("the server's barrier").status();
  }
  FABRIC_RETURN_IF_ERROR(ch.RecvAs<wire::Sync>("the client's barrier").status());
  return ch.Send(wire::Sync{1});
}

}  // namespace

absl::StatusOr<Measurement> RunTcpClient(Channel& ch, const ProbeParams& p) {
  FABRIC_RETURN_IF_ERROR(Barrier(ch, true));
  switch (p.test) {
    case TestKind::kWriteBw:
    case TestKind::kSendBw:
      return StreamToServer(ch, p);
    case TestKind::kReadBw:
      return StreamFromServer(ch, p);
    default:
      return PingPongClient(ch, p);
  }
}

absl::Status RunTcpServer(Channel& ch, const ProbeParams& p) {
  FABRIC_RETURN_IF_ERROR(Barrier(ch, false));
  switch (p.test) {
    case TestKind::kWriteBw:
    case TestKind::kSendBw:
      return ReceiveStream(ch, p);
    case TestKind::kReadBw:
      return StreamToClient(ch, p);
    default:
      return PingPongServer(ch, p);
  }
}

}  // namespace fabric::probes
